package file

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"
)

// rewrite reads every row of f and writes them to a new file of the given
// version with the given page size.
func rewrite(t testing.TB, f *File, v Version, pageBytes int) []byte {
	t.Helper()
	b, err := f.ReadAll(nil)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, f.Desc.GetSchema().GetFields(), WriterOptions{Version: v, PageBytes: pageBytes})
	if err != nil {
		t.Fatal(err)
	}
	// Several batches, to exercise buffering across writes.
	step := max(1, b.NumRows/3)
	for lo := 0; lo < b.NumRows; lo += step {
		hi := min(b.NumRows, lo+step)
		part := &Batch{NumRows: hi - lo}
		for _, c := range b.Columns {
			part.Columns = append(part.Columns, c.Slice(lo, hi))
		}
		if err := w.Write(part); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func canonAny(a *Array) []any {
	gj, _ := json.Marshal(canonColumn(a))
	var g []any
	_ = json.Unmarshal(gj, &g)
	return g
}

// sameRows compares every column of two files value by value.
func sameRows(t *testing.T, want, got *File) {
	t.Helper()
	if want.NumRows() != got.NumRows() {
		t.Fatalf("rows %d, want %d", got.NumRows(), want.NumRows())
	}
	for _, fl := range want.Schema.Fields {
		wb, err := want.ReadAll([]string{fl.Name})
		if err != nil {
			t.Fatal(err)
		}
		gb, err := got.ReadAll([]string{fl.Name})
		if err != nil {
			t.Errorf("%s (%s): %v", fl.Name, fl.Type, err)
			continue
		}
		w, g := canonAny(wb.Columns[0]), canonAny(gb.Columns[0])
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s (%s): %s", fl.Name, fl.Type, firstDiff(g, w))
		}
	}
}

// TestRewriteCorpus reads every LanceDB-written file of the corpus, writes
// it again at its own version (and, for 2.1+, at the other 2.x versions)
// with small and default pages, and reads it back equal.
func TestRewriteCorpus(t *testing.T) {
	for _, p := range oracleFiles(t, "testdata") {
		src := openFile(t, p[0])
		versions := rewriteVersions(src)
		for _, v := range versions {
			for _, pb := range []int{0, 4096} {
				name := filepath.Base(p[0]) + "/" + v.String()
				if pb > 0 {
					name += "/small-pages"
				}
				t.Run(name, func(t *testing.T) {
					out := rewrite(t, src, v, pb)
					got, err := Open(bytes.NewReader(out), int64(len(out)))
					if err != nil {
						t.Fatal(err)
					}
					if got.Version() != v {
						t.Fatalf("version %s, want %s", got.Version(), v)
					}
					sameRows(t, src, got)
				})
			}
		}
	}
}
