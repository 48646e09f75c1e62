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
// deletions: plain) and when its rows are rewritten (deletes_arrow). A
// missing file is named once too (the storage error names it already).
func TestCompactDamagedDataFile(t *testing.T) {
	for _, tc := range []struct{ table, damage string }{{"plain", "page"}, {"deletes_arrow", "page"}, {"plain", "missing"}} {
		table := tc.table
		t.Run(table+" "+tc.damage, func(t *testing.T) {
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
			var damaged []byte
			if tc.damage == "missing" {
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
			} else {
				damagePage(t, path, "s")
				if damaged, err = os.ReadFile(path); err != nil {
					t.Fatal(err)
				}
			}
			_, err = Run(t.Context(), h, DefaultOptions(), Env{})
			if err == nil {
				t.Fatal("compaction of a table with a damaged data file succeeded")
			}
			// The operating system's error names the local path as well.
			msg := strings.ReplaceAll(err.Error(), path, "")
			if n := strings.Count(msg, key); n != 1 || tc.damage == "page" && !strings.Contains(err.Error(), "page 0") {
				t.Errorf("error names %s %d times, or no page: %v", key, n, err)
			}
			after, _, err := meta.ReadLatest(t.Context(), h.Bucket)
			if err != nil {
				t.Fatal(err)
			}
			if a, b := after.Manifest.GetVersion(), before.Manifest.GetVersion(); a != b {
				t.Errorf("version %d committed (was %d)", a, b)
			}
			if now, err := os.ReadFile(path); damaged != nil && (err != nil || !bytes.Equal(now, damaged)) {
				t.Errorf("the damaged file changed (%v)", err)
			}
		})
	}
}
