package file

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTableCorpus decodes every Lance file of the table corpus that
// internal/testing/lancedb keeps (data files, scalar-index files, MemWAL
// generations and their 2.0 _pk_index), and checks what can be checked
// without an oracle: row counts and the sorted order of BTree pages.
func TestTableCorpus(t *testing.T) {
	root := filepath.Join("..", "..", "testing", "lancedb", "testdata", "corpus")
	if _, err := os.Stat(root); err != nil {
		t.Skip("no table corpus:", err)
	}
	var n, pk int
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".lance") {
			return err
		}
		n++
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		f, err := Open(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Errorf("%s: %v", p, err)
			return nil
		}
		all, err := f.ReadAll(nil)
		if err != nil {
			t.Errorf("%s (%s): %v", p, f.Version(), err)
			return nil
		}
		for i, c := range all.Columns {
			if c.Len != int(f.NumRows()) {
				t.Errorf("%s: %s has %d rows, file %d", p, all.Fields[i].Name, c.Len, f.NumRows())
			}
		}
		if strings.Contains(p, "_pk_index") {
			pk++
			if f.Version() != V2_0 {
				t.Errorf("%s: _pk_index is %s, expected 2.0", p, f.Version())
			}
			if v := all.Column("values"); v != nil && v.Type.Kind == KindInt64 {
				xs := v.Int64s()
				for i := 1; i < len(xs); i++ {
					if xs[i] < xs[i-1] {
						t.Errorf("%s: values not sorted at %d", p, i)
						break
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 || pk == 0 {
		t.Fatalf("found %d files, %d _pk_index files", n, pk)
	}
	t.Logf("%d files, %d _pk_index files", n, pk)
}
