package file

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/compactord/compactord/gen/lancepb"
)

// TestAllNullPagesJoin: columns whose first pages are all null (constant
// layout, decoded as placeholders) and whose later pages have data read
// back equal across the page boundary, also as a stream and in ranges
// over the boundary, and LanceDB reads them equal.
func TestAllNullPagesJoin(t *testing.T) {
	fields := []*lancepb.Field{
		{Name: "v", Id: 0, ParentId: -1, LogicalType: "fixed_size_list:float:4", Nullable: true},
		{Name: "vi", Id: 1, ParentId: -1, LogicalType: "fixed_size_list:int32:3", Nullable: true},
		{Name: "i", Id: 3, ParentId: -1, LogicalType: "int64", Nullable: true},
		{Name: "s", Id: 4, ParentId: -1, LogicalType: "string", Nullable: true},
		{Name: "b", Id: 5, ParentId: -1, LogicalType: "bool", Nullable: true},
		{Name: "p", Id: 6, ParentId: -1, LogicalType: "struct", Nullable: true, Metadata: packedMeta},
		{Name: "x", Id: 7, ParentId: 6, LogicalType: "int32"},
		{Name: "y", Id: 8, ParentId: 6, LogicalType: "double"},
	}
	const n = 4000
	dir := t.TempDir()
	var cases []lancedbCase
	for _, v := range []Version{V2_1, V2_2} {
		var buf bytes.Buffer
		w, err := NewWriter(&buf, fields, WriterOptions{Version: v, PageBytes: 2048})
		if err != nil {
			t.Fatal(err)
		}
		s := w.Schema()
		b := &Batch{NumRows: n}
		for _, f := range s.Fields {
			a := randArray(rand.New(rand.NewPCG(7, 8)), f, n)
			a.Valid = make([]byte, bitmapLen(n))
			for i := n / 2; i < n; i++ {
				if i%5 != 0 {
					setBit(a.Valid, i)
				}
			}
			if f.Packed() {
				for _, c := range a.Children {
					c.Valid = nil
				}
			}
			b.Columns = append(b.Columns, a)
		}
		if err := w.Write(b); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		f, err := Open(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		if err != nil {
			t.Fatal(err)
		}
		if p := len(f.Columns[0].GetPages()); p < 4 {
			t.Fatalf("%d pages", p)
		}
		if !bytes.Contains([]byte(pageEncodings(t, f, 0)), []byte("constant_layout")) {
			t.Fatalf("%s: no all-null page in %s", v, pageEncodings(t, f, 0)[:200])
		}
		got, err := f.ReadAll(nil)
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		mid, err := f.ReadRange(nil, n/2-10, n/2+10)
		if err != nil {
			t.Fatalf("%s: range over the boundary: %v", v, err)
		}
		want := &oracle{Rows: n, Columns: map[string]json.RawMessage{}}
		for i, fl := range s.Fields {
			if g, w := canonAny(got.Columns[i]), canonAny(b.Columns[i]); !reflect.DeepEqual(g, w) {
				t.Errorf("%s %s: %s", v, fl.Name, firstDiff(g, w))
			}
			if g, w := canonAny(mid.Columns[i]), canonAny(b.Columns[i].Slice(n/2-10, n/2+10)); !reflect.DeepEqual(g, w) {
				t.Errorf("%s %s range: %s", v, fl.Name, firstDiff(g, w))
			}
			want.Columns[fl.Name], _ = json.Marshal(canonColumn(b.Columns[i]))
		}
		name := fmt.Sprintf("allnull_w%d%d", v.Major, v.Minor)
		df, dc := w.DataFileFields()
		writeTable(t, dir, name, fields, buf.Bytes(), v, df, dc, n)
		cases = append(cases, lancedbCase{name: name, want: want})
	}
	lancedbRead(t, dir, cases)
}
