package file

import (
	"bytes"
	"io"
	"path/filepath"
	"testing"
)

// writeAll writes batches into a new file of src's schema and version.
func writeFile(t *testing.T, src *File, pageBytes int, fill func(w *Writer)) *File {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, src.Desc.GetSchema().GetFields(), WriterOptions{Version: src.Version(), PageBytes: pageBytes})
	if err != nil {
		t.Fatal(err)
	}
	fill(w)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := Open(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestWriteRowsFromViews: every corpus file streamed with NextView in
// odd-sized batches and written with WriteRows, one row in three dropped
// (and every third batch written whole, and one batch with Write in
// between), reads back as the same rows gathered with Take and written
// with Write; with 4 KiB pages the reused page buffers of the writer
// serve many pages.
func TestWriteRowsFromViews(t *testing.T) {
	for _, p := range oracleFiles(t, "testdata") {
		src := openFile(t, p[0])
		for _, c := range []struct {
			pb   int
			keep bool
		}{{0, false}, {4096, false}, {0, true}, {4096, true}} {
			pb := c.pb
			name := filepath.Base(p[0]) + map[bool]string{true: "/small-pages", false: ""}[pb > 0] + map[bool]string{true: "/keep-fsst", false: ""}[c.keep]
			t.Run(name, func(t *testing.T) {
				all, err := src.ReadAll(nil)
				if err != nil {
					t.Fatal(err)
				}
				const batch = 37
				var kept []int
				keep := func(b, r int) bool { return b%3 == 2 || (b*batch+r)%3 != 1 }
				for r := 0; r < all.NumRows; r++ {
					if keep(r/batch, r%batch) {
						kept = append(kept, r)
					}
				}
				want := writeFile(t, src, pb, func(w *Writer) {
					nb := &Batch{NumRows: len(kept)}
					for _, c := range all.Columns {
						nb.Columns = append(nb.Columns, c.Take(kept))
					}
					if err := w.Write(nb); err != nil {
						t.Fatal(err)
					}
				})
				got := writeFile(t, src, pb, func(w *Writer) {
					st, err := src.Stream(nil, batch)
					if err != nil {
						t.Fatal(err)
					}
					if c.keep {
						st.KeepFSST()
					}
					for b := 0; ; b++ {
						bt, err := st.NextView()
						if err == io.EOF {
							break
						}
						if err != nil {
							t.Fatal(err)
						}
						var rows []int
						for r := 0; r < bt.NumRows; r++ {
							if keep(b, r) {
								rows = append(rows, r)
							}
						}
						switch {
						case b%3 == 2 && b == 5:
							// Write keeps its arrays: give it copies.
							cp := &Batch{NumRows: bt.NumRows}
							for _, c := range bt.Columns {
								cp.Columns = append(cp.Columns, c.Slice(0, c.Len))
							}
							err = w.Write(cp)
						case b%3 == 2:
							err = w.WriteRows(bt, nil)
						default:
							err = w.WriteRows(bt, rows)
						}
						if err != nil {
							t.Fatal(err)
						}
					}
				})
				sameRows(t, want, got)
			})
		}
	}
}

// TestWriteRowsRefusesBadRows: a row index outside the batch is an error,
// not a panic.
func TestWriteRowsRefusesBadRows(t *testing.T) {
	src := openFile(t, "testdata/all_v22.lance")
	b, err := src.ReadRange(nil, 0, 4)
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWriter(&bytes.Buffer{}, src.Desc.GetSchema().GetFields(), WriterOptions{Version: V2_2})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteRows(b, []int{0, 4}); err == nil {
		t.Fatal("row 4 of 4 accepted")
	}
}
