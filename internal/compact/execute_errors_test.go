package compact

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/format/file"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

// damagePage overwrites every buffer of the first page of column col of
// the Lance file at path (its size and metadata unchanged).
func damagePage(t *testing.T, path, col string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
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
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCompactDamagedDataFile: a compaction whose plan holds a fragment with
// a damaged data file (a page overwritten, the size unchanged) fails,
// naming the file once, commits nothing and leaves the file as it was;
// both when the fragment's pages would be copied without decoding (no
// deletions: plain) and when its rows are rewritten (deletes_arrow).
func TestCompactDamagedDataFile(t *testing.T) {
	for _, table := range []string{"plain", "deletes_arrow"} {
		t.Run(table, func(t *testing.T) {
			dir := lancedb.CorpusDir(t, table)
			h := openHandle(t, dir)
			before, _, err := meta.ReadLatest(t.Context(), h.Bucket)
			if err != nil {
				t.Fatal(err)
			}
			frag := before.Manifest.GetFragments()[0]
			if (frag.GetDeletionFile() != nil) != (table == "deletes_arrow") {
				t.Fatalf("%s: fragment 0's deletion file %v", table, frag.GetDeletionFile())
			}
			key := meta.DataKey(frag.GetFiles()[0].GetPath())
			path := filepath.Join(dir, filepath.FromSlash(key))
			damagePage(t, path, "s")
			damaged, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Run(t.Context(), h, DefaultOptions(), Env{})
			if err == nil {
				t.Fatal("compaction of a table with a damaged data file succeeded")
			}
			if n := strings.Count(err.Error(), key); n != 1 || !strings.Contains(err.Error(), "page 0") {
				t.Errorf("error names %s %d times, or no page: %v", key, n, err)
			}
			after, _, err := meta.ReadLatest(t.Context(), h.Bucket)
			if err != nil {
				t.Fatal(err)
			}
			if a, b := after.Manifest.GetVersion(), before.Manifest.GetVersion(); a != b {
				t.Errorf("version %d committed (was %d)", a, b)
			}
			if now, err := os.ReadFile(path); err != nil || !bytes.Equal(now, damaged) {
				t.Errorf("the damaged file changed (%v)", err)
			}
		})
	}
}
