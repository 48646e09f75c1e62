package file

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/compactord/compactord/gen/lancepb"
)

// rewriteVersions is the versions a corpus file is rewritten at: its own
// for 2.0, both 2.1 and 2.2 otherwise, except that packed structs with
// variable-width children need 2.2.
func rewriteVersions(f *File) []Version {
	if f.Version() == V2_0 {
		return []Version{V2_0}
	}
	for _, fl := range f.Schema.Fields {
		if _, anyVar, err := packedLayout(fl); fl.Packed() && err == nil && anyVar {
			return []Version{V2_2}
		}
	}
	return []Version{V2_1, V2_2}
}

var packedMeta = map[string][]byte{"lance-encoding:packed": []byte("true")}

func packedSchema(v Version) []*lancepb.Field {
	fs := []*lancepb.Field{
		{Name: "pf", Id: 0, ParentId: -1, LogicalType: "struct", Metadata: packedMeta},
		{Name: "a", Id: 1, ParentId: 0, LogicalType: "int32"},
		{Name: "b", Id: 2, ParentId: 0, LogicalType: "double"},
		{Name: "c", Id: 3, ParentId: 0, LogicalType: "uint8"},
		{Name: "d", Id: 4, ParentId: 0, LogicalType: "fixed_size_binary:3"},
		{Name: "pn", Id: 5, ParentId: -1, LogicalType: "struct", Nullable: v != V2_0, Metadata: map[string][]byte{"packed": []byte("TRUE")}},
		{Name: "x", Id: 6, ParentId: 5, LogicalType: "int64"},
	}
	if v == V2_2 {
		fs = append(fs,
			&lancepb.Field{Name: "pv", Id: 7, ParentId: -1, LogicalType: "struct", Nullable: true, Metadata: packedMeta},
			&lancepb.Field{Name: "id", Id: 8, ParentId: 7, LogicalType: "int32"},
			&lancepb.Field{Name: "s", Id: 9, ParentId: 7, LogicalType: "string"},
			&lancepb.Field{Name: "bin", Id: 10, ParentId: 7, LogicalType: "binary"})
	}
	return fs
}

// packedBatch: n rows of every packed struct of the schema, nulls in the
// nullable structs (never in their children).
func packedBatch(s *Schema, n int) *Batch {
	b := &Batch{NumRows: n}
	fixed := func(f *Field, gen func(i int) []byte) *Array {
		a := &Array{Type: f.Type, Name: f.Name, Len: n}
		for i := 0; i < n; i++ {
			a.Values = append(a.Values, gen(i)...)
		}
		return a
	}
	str := func(f *Field, gen func(i int) string) *Array {
		a := &Array{Type: f.Type, Name: f.Name, Len: n, Offsets: make([]int64, n+1)}
		for i := 0; i < n; i++ {
			a.Values = append(a.Values, gen(i)...)
			a.Offsets[i+1] = int64(len(a.Values))
		}
		return a
	}
	for _, f := range s.Fields {
		st := &Array{Type: f.Type, Name: f.Name, Len: n}
		if f.Nullable {
			st.Valid = make([]byte, bitmapLen(n))
			for i := 0; i < n; i++ {
				if i%7 != 3 {
					setBit(st.Valid, i)
				}
			}
		}
		for _, c := range f.Children {
			var a *Array
			switch c.Type.Kind {
			case KindUtf8, KindBinary:
				a = str(c, func(i int) string { return strings.Repeat(fmt.Sprintf("%s-%d;", c.Name, i*i), i%4) })
			default:
				w := c.Type.ByteWidth()
				a = fixed(c, func(i int) []byte {
					out := make([]byte, w)
					for k := range out {
						out[k] = byte(i*31 + k*7 + w)
					}
					return out
				})
			}
			st.Children = append(st.Children, a)
		}
		b.Columns = append(b.Columns, st)
	}
	return b
}

// TestLanceDBReadsPacked writes packed structs (fixed-width children at
// every version, variable-width ones at 2.2; small and multi-page), reads
// them back and has LanceDB read them equal; the pages must be packed
// (one column per struct).
func TestLanceDBReadsPacked(t *testing.T) {
	dir := t.TempDir()
	var cases []lancedbCase
	for _, v := range []Version{V2_0, V2_1, V2_2} {
		for _, pageBytes := range []int{0, 4096} {
			fields := packedSchema(v)
			var buf bytes.Buffer
			w, err := NewWriter(&buf, fields, WriterOptions{Version: v, PageBytes: pageBytes})
			if err != nil {
				t.Fatal(err)
			}
			b := packedBatch(w.Schema(), 3000)
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
			if len(f.Columns) != len(w.Schema().Fields) {
				t.Fatalf("%s: %d columns for %d packed structs", v, len(f.Columns), len(w.Schema().Fields))
			}
			got, err := f.ReadAll(nil)
			if err != nil {
				t.Fatal(err)
			}
			want := &oracle{Rows: b.NumRows, Columns: map[string]json.RawMessage{}}
			for i, fl := range w.Schema().Fields {
				if g, w := canonAny(got.Columns[i]), canonAny(b.Columns[i]); !reflect.DeepEqual(g, w) {
					t.Errorf("%s %s: read back %s", v, fl.Name, firstDiff(g, w))
				}
				want.Columns[fl.Name], _ = json.Marshal(canonColumn(b.Columns[i]))
			}
			name := fmt.Sprintf("packed_w%d%d_%d", v.Major, v.Minor, pageBytes)
			df, dc := w.DataFileFields()
			writeTable(t, dir, name, fields, buf.Bytes(), v, df, dc, uint64(b.NumRows))
			cases = append(cases, lancedbCase{name: name, want: want})
		}
	}
	lancedbRead(t, dir, cases)
}

// TestPackedErrors: what a packed struct cannot hold is an error.
func TestPackedErrors(t *testing.T) {
	try := func(v Version, fields []*lancepb.Field, edit func(b *Batch)) error {
		var buf bytes.Buffer
		w, err := NewWriter(&buf, fields, WriterOptions{Version: v})
		if err != nil {
			return err
		}
		b := packedBatch(w.Schema(), 50)
		if edit != nil {
			edit(b)
		}
		if err := w.Write(b); err != nil {
			return err
		}
		return w.Close()
	}
	if err := try(V2_1, packedSchema(V2_2), nil); err == nil || !strings.Contains(err.Error(), "2.2") {
		t.Errorf("variable packed struct at 2.1: %v", err)
	}
	if err := try(V2_2, packedSchema(V2_2), func(b *Batch) {
		c := b.Columns[0].Children[0]
		c.Valid = make([]byte, bitmapLen(c.Len))
	}); err == nil || !strings.Contains(err.Error(), "nulls") {
		t.Errorf("null child: %v", err)
	}
	nested := []*lancepb.Field{
		{Name: "p", Id: 0, ParentId: -1, LogicalType: "struct", Metadata: packedMeta},
		{Name: "l", Id: 1, ParentId: 0, LogicalType: "list"},
		{Name: "item", Id: 2, ParentId: 1, LogicalType: "int32"},
	}
	if err := try(V2_2, nested, func(b *Batch) {}); err == nil {
		t.Error("list in a packed struct: no error")
	}
}
