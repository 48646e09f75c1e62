package file

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"testing"

	pb "github.com/compactord/compactord/gen/lancefilepb"
	"github.com/compactord/compactord/gen/lancepb"
)

// keepSchema: flat string and binary columns the writer FSST-compresses
// (the binary's short values with 0xff bytes only when asked to), two of
// them with nulls.
var keepSchema = []*lancepb.Field{
	{Name: "s", Id: 0, ParentId: -1, LogicalType: "string", Nullable: true},
	{Name: "ls", Id: 1, ParentId: -1, LogicalType: "large_string"},
	{Name: "bin", Id: 2, ParentId: -1, LogicalType: "binary", Nullable: true, Metadata: map[string][]byte{metaCompression: []byte("fsst")}},
	{Name: "forced", Id: 3, ParentId: -1, LogicalType: "string", Metadata: map[string][]byte{metaCompression: []byte("fsst")}},
	{Name: "n", Id: 4, ParentId: -1, LogicalType: "int64"},
}

// fsstTables lists the symbol table of every FSST page of a column
// ("" for a page without one).
func fsstTables(t *testing.T, f *File, col int) []string {
	t.Helper()
	var out []string
	for _, p := range f.Columns[col].GetPages() {
		pl := &pb.PageLayout{}
		if err := unwrapEncoding(p.GetEncoding(), "PageLayout", pl); err != nil {
			t.Fatal(err)
		}
		out = append(out, string(pl.GetMiniBlockLayout().GetValueCompression().GetFsst().GetSymbolTable()))
	}
	return out
}

// keepFSSTRewrite streams src in batches of batch rows (keep: with
// KeepFSST) and writes every row but those with r%10 == 3 with WriteRows;
// it returns the file written and the symbol tables built meanwhile.
func keepFSSTRewrite(t *testing.T, src *File, keep bool, batch int) ([]byte, *Writer, int64) {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, src.Desc.GetSchema().GetFields(), WriterOptions{Version: src.Version()})
	if err != nil {
		t.Fatal(err)
	}
	st, err := src.Stream(nil, batch)
	if err != nil {
		t.Fatal(err)
	}
	if keep {
		st.KeepFSST()
	}
	before := fsstBuilds.Load()
	for off := 0; ; {
		bt, err := st.NextView()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var rows []int
		for r := 0; r < bt.NumRows; r++ {
			if (off+r)%10 != 3 {
				rows = append(rows, r)
			}
		}
		off += bt.NumRows
		if err := w.WriteRows(bt, rows); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), w, fsstBuilds.Load() - before
}

// TestWriteRowsKeepsFSST: a file whose string columns span several FSST
// pages (each with its own table), streamed with KeepFSST in batches that
// cross pages and written with every tenth row dropped, builds no symbol
// table (without KeepFSST it builds some), writes only FSST pages whose
// tables are the source pages', reads back as exactly the kept rows, and
// LanceDB 0.39 reads those too.
func TestWriteRowsKeepsFSST(t *testing.T) {
	dir := t.TempDir()
	var cases []lancedbCase
	for _, v := range []Version{V2_1, V2_2} {
		var sbuf bytes.Buffer
		sw, err := NewWriter(&sbuf, keepSchema, WriterOptions{Version: v, PageBytes: 64 << 10})
		if err != nil {
			t.Fatal(err)
		}
		strs := *sw.Schema()
		strs.Fields = strs.Fields[:4]
		in := fsstBatch(&strs, 30000)
		in.Columns = append(in.Columns, &Array{Type: sw.Schema().Fields[4].Type, Name: "n", Len: in.NumRows, Values: make([]byte, 8*in.NumRows)})
		for i := 0; i < in.NumRows; i++ {
			le.PutUint64(in.Columns[4].Values[8*i:], uint64(i))
		}
		if err := sw.Write(in); err != nil {
			t.Fatal(err)
		}
		if err := sw.Close(); err != nil {
			t.Fatal(err)
		}
		src, err := Open(bytes.NewReader(sbuf.Bytes()), int64(sbuf.Len()))
		if err != nil {
			t.Fatal(err)
		}
		var kept []int
		for r := 0; r < in.NumRows; r++ {
			if r%10 != 3 {
				kept = append(kept, r)
			}
		}
		if _, _, built := keepFSSTRewrite(t, src, false, 1000); built == 0 {
			t.Fatalf("%s: the re-encoding path built no symbol table", v)
		}
		data, w, built := keepFSSTRewrite(t, src, true, 1300)
		if built != 0 {
			t.Errorf("%s: KeepFSST rewrite built %d symbol tables", v, built)
		}
		out, err := Open(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		for _, fl := range src.Schema.Fields[:4] {
			srcTabs := map[string]bool{}
			st := fsstTables(t, src, fl.Column)
			if len(st) < 3 {
				t.Fatalf("%s %s: source has %d pages, want several", v, fl.Name, len(st))
			}
			for i, tab := range st {
				if tab == "" {
					t.Fatalf("%s %s: source page %d is not FSST", v, fl.Name, i)
				}
				srcTabs[tab] = true
			}
			for i, tab := range fsstTables(t, out, fl.Column) {
				if tab == "" || !srcTabs[tab] {
					t.Errorf("%s %s: output page %d has no source page's symbol table", v, fl.Name, i)
				}
			}
		}
		got, err := out.ReadAll(nil)
		if err != nil {
			t.Fatal(err)
		}
		if got.NumRows != len(kept) {
			t.Fatalf("%s: %d rows, want %d", v, got.NumRows, len(kept))
		}
		want := &oracle{Rows: len(kept), Columns: map[string]json.RawMessage{}}
		for i, fl := range src.Schema.Fields {
			wa := in.Columns[i].Take(kept)
			if g, w := canonAny(got.Columns[i]), canonAny(wa); !reflect.DeepEqual(g, w) {
				t.Errorf("%s %s: read back %s", v, fl.Name, firstDiff(g, w))
			}
			wj, _ := json.Marshal(canonColumn(wa))
			want.Columns[fl.Name] = wj
		}
		name := fmt.Sprintf("keepfsst_w%d%d", v.Major, v.Minor)
		f2, c := w.DataFileFields()
		writeTable(t, dir, name, keepSchema, data, v, f2, c, uint64(len(kept)))
		cases = append(cases, lancedbCase{name: name, want: want})
	}
	lancedbRead(t, dir, cases)
}
