package file

import (
	"path/filepath"
	"testing"

	pb "github.com/compactord/compactord/gen/lancefilepb"
)

// TestFullZipWindow: a window of a full-zip page of fixed-width values
// (LanceDB's vector pages) is decoded from its own rows' bytes, and holds
// the rows a decode of the whole page holds there.
func TestFullZipWindow(t *testing.T) {
	f := openFile(t, filepath.Join("testdata", "fullzip_v22.lance"))
	var leaves []*Field
	var walk func(fs []*Field)
	walk = func(fs []*Field) {
		for _, fl := range fs {
			if len(fl.Children) == 0 && fl.Column >= 0 {
				leaves = append(leaves, fl)
			}
			walk(fl.Children)
		}
	}
	walk(f.Schema.Fields)
	cut := 0
	for _, leaf := range leaves {
		for pi, p := range f.Columns[leaf.Column].GetPages() {
			pl := &pb.PageLayout{}
			if err := unwrapEncoding(p.GetEncoding(), "PageLayout", pl); err != nil || pl.GetFullZipLayout() == nil {
				continue
			}
			whole, err := f.decodePage(p, leaf, false)
			if err != nil {
				t.Fatal(err)
			}
			rows := p.GetLength()
			for _, w := range [][2]uint64{{0, 1}, {1, rows / 2}, {rows / 3, rows}, {rows - 1, rows}} {
				if w[0] >= w[1] {
					continue
				}
				lp, ok, err := f.fullZipWindow(p, pl.GetFullZipLayout(), leaf, w[0], w[1])
				if err != nil {
					t.Fatalf("%s page %d window %v: %v", leaf.Name, pi, w, err)
				}
				if !ok {
					break
				}
				cut++
				if lp.rows != int(w[1]-w[0]) {
					t.Fatalf("%s page %d window %v: %d rows", leaf.Name, pi, w, lp.rows)
				}
				g, e := leafBytes(t, lp), leafBytes(t, whole)
				width := len(e) / int(rows)
				if string(g) != string(e[int(w[0])*width:int(w[1])*width]) {
					t.Fatalf("%s page %d window %v: values differ from the whole page's", leaf.Name, pi, w)
				}
			}
		}
	}
	if cut == 0 {
		t.Fatal("no full-zip page of fixed-width values in fullzip_v22.lance was cut")
	}
}

// leafBytes is the fixed-width value bytes of a decoded page (through a
// fixed-size list's child).
func leafBytes(t *testing.T, lp *leafPage) []byte {
	t.Helper()
	b := lp.values
	for b.child != nil {
		b = b.child
	}
	if b.isVar {
		t.Fatal("variable-width values")
	}
	return b.data
}
