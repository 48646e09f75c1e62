package merge

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/format/file"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

// damage overwrites, keeping the size, either the trailing magic of the
// Lance file at path or every buffer of the first page of its column
// named col; col "-" removes the file, "manifest" truncates it.
func damage(t *testing.T, path, col string) {
	t.Helper()
	switch col {
	case "-":
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		return
	case "manifest":
		if err := os.Truncate(path, 100); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if col == "" {
		copy(b[len(b)-4:], "XXXX")
	} else {
		f, err := file.Open(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		fl := f.Schema.Field(col)
		if fl == nil {
			t.Fatalf("%s has no column %s", path, col)
		}
		p := f.Columns[fl.Column].GetPages()[0]
		for k, off := range p.GetBufferOffsets() {
			for i := off; i < off+p.GetBufferSizes()[k]; i++ {
				b[i] = byte(i*37 + 11)
			}
		}
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestMergeNamesDamagedGenerationFile: a merge of a generation whose data
// file is damaged (its magic, or the page of its key column) or missing,
// or whose manifest is truncated, fails with an error naming the file by
// its path from the table's root, once.
func TestMergeNamesDamagedGenerationFile(t *testing.T) {
	for _, col := range []string{"", "id", "-", "manifest"} {
		t.Run(map[string]string{"": "magic", "id": "key page", "-": "missing", "manifest": "manifest"}[col], func(t *testing.T) {
			dir := lancedb.CorpusDir(t, "memwal_1")
			pattern := filepath.Join(dir, "_mem_wal", "*", "*_gen_1", "data", "*.lance")
			if col == "manifest" {
				pattern = filepath.Join(dir, "_mem_wal", "*", "*_gen_1", "_versions", "*.manifest")
			}
			m, _ := filepath.Glob(pattern)
			if len(m) != 1 {
				t.Fatalf("generation 1 data files: %v", m)
			}
			rel, _ := filepath.Rel(dir, m[0])
			key := filepath.ToSlash(rel)
			damage(t, m[0], col)
			_, err := RunAll(t.Context(), openHandle(t, dir), Env{MaxGenerations: 8})
			if err == nil {
				t.Fatal("merge of a damaged generation succeeded")
			}
			if n := strings.Count(err.Error(), key); n != 1 {
				t.Errorf("error names %s %d times: %v", key, n, err)
			}
		})
	}
}
