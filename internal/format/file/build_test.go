package file

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/compactord/compactord/gen/lancepb"
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

// TestWriteRowsVectors: fixed-size lists of fixed-width items (vectors)
// written with WriteRows take the builder (no gather per item) when their
// items have no nulls, batch after batch, and read back as the same rows
// gathered with Take and written with Write; batches whose items have
// nulls, and Write's batches in between, take the general path, before
// or after the builder's rows, with nothing lost or reordered.
func TestWriteRowsVectors(t *testing.T) {
	fields := []*lancepb.Field{
		{Name: "v", Id: 0, ParentId: -1, LogicalType: "fixed_size_list:float:4", Nullable: true},
		{Name: "vi", Id: 1, ParentId: -1, LogicalType: "fixed_size_list:int32:3", Nullable: true},
		{Name: "vd", Id: 3, ParentId: -1, LogicalType: "fixed_size_list:double:2"},
		{Name: "i", Id: 4, ParentId: -1, LogicalType: "int64", Nullable: true},
	}
	for _, v := range []Version{V2_0, V2_1, V2_2} {
		for _, pb := range []int{0, 1024} {
			t.Run(fmt.Sprintf("%s/pages%d", v, pb), func(t *testing.T) {
				var wantBuf, gotBuf bytes.Buffer
				want, err := NewWriter(&wantBuf, fields, WriterOptions{Version: v, PageBytes: pb})
				if err != nil {
					t.Fatal(err)
				}
				got, err := NewWriter(&gotBuf, fields, WriterOptions{Version: v, PageBytes: pb})
				if err != nil {
					t.Fatal(err)
				}
				r := rand.New(rand.NewPCG(3, uint64(pb)))
				s := got.Schema()
				for k := 0; k < 24; k++ {
					n := 50 + r.IntN(400)
					b := &Batch{NumRows: n}
					for _, f := range s.Fields {
						a := randArray(r, f, n)
						if f.Type.Kind == KindFixedSizeList {
							// Items with nulls in batches 5, 11, 17, 23
							// only.
							if k%6 != 5 {
								a.Children[0].Valid = nil
							} else if a.Children[0].Valid == nil || allSet(a.Children[0].Valid, a.Children[0].Len) {
								a.Children[0].Valid = make([]byte, bitmapLen(a.Children[0].Len))
								for i := 1; i < a.Children[0].Len; i += 2 {
									setBit(a.Children[0].Valid, i)
								}
							}
						}
						b.Columns = append(b.Columns, a)
					}
					var rows []int
					if k%4 != 3 {
						for i := 0; i < n; i++ {
							if r.IntN(10) != 0 {
								rows = append(rows, i)
							}
						}
					}
					taken := &Batch{NumRows: n}
					if rows != nil {
						taken.NumRows = len(rows)
					}
					for _, a := range b.Columns {
						if rows != nil {
							taken.Columns = append(taken.Columns, a.Take(rows))
						} else {
							taken.Columns = append(taken.Columns, a.Slice(0, a.Len))
						}
					}
					if err := want.Write(taken); err != nil {
						t.Fatal(err)
					}
					if k%8 == 6 {
						cp := &Batch{NumRows: taken.NumRows}
						for _, a := range taken.Columns {
							cp.Columns = append(cp.Columns, a.Slice(0, a.Len))
						}
						err = got.Write(cp)
					} else {
						err = got.WriteRows(b, rows)
					}
					if err != nil {
						t.Fatal(err)
					}
					if k%6 != 5 && k%8 != 6 {
						for i := 0; i < 3; i++ {
							p := got.pending[i]
							built := 0
							if p.build != nil {
								built = p.build.n
							}
							if p.rows > 0 && (built != p.rows || len(p.arrs) > 0) {
								t.Fatalf("batch %d: column %s: %d rows pending, %d of them in the builder and %d arrays: want all in the builder",
									k, s.Fields[i].Name, p.rows, built, len(p.arrs))
							}
						}
					}
				}
				for _, w := range []*Writer{want, got} {
					if err := w.Close(); err != nil {
						t.Fatal(err)
					}
				}
				wf, err := Open(bytes.NewReader(wantBuf.Bytes()), int64(wantBuf.Len()))
				if err != nil {
					t.Fatal(err)
				}
				gf, err := Open(bytes.NewReader(gotBuf.Bytes()), int64(gotBuf.Len()))
				if err != nil {
					t.Fatal(err)
				}
				sameRows(t, wf, gf)
			})
		}
	}
}

// TestViewVectors: a view of a fixed-size list of a flat type shares its
// items' buffer (rows [from*d, to*d)) and reads as Slice does.
func TestViewVectors(t *testing.T) {
	f := &Field{Name: "v", Type: DataType{Kind: KindFixedSizeList, Size: 3}, Nullable: true,
		Children: []*Field{{Name: "item", Type: DataType{Kind: KindFloat32}, Nullable: true}}}
	a := randArray(rand.New(rand.NewPCG(1, 2)), f, 100)
	for _, c := range [][2]int{{0, 100}, {8, 40}, {13, 14}, {99, 100}, {5, 5}} {
		v, s := a.view(c[0], c[1]), a.Slice(c[0], c[1])
		if c[1] > c[0] && &v.Children[0].Values[0] != &a.Children[0].Values[c[0]*3*4] {
			t.Errorf("view %v copies the items", c)
		}
		if !reflect.DeepEqual(canonAny(v), canonAny(s)) {
			t.Errorf("view %v: %s", c, firstDiff(canonAny(v), canonAny(s)))
		}
	}
}
