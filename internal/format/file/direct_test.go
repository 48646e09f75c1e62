package file

import (
	"bytes"
	"fmt"
	"io"
	"reflect"
	"testing"

	"github.com/compactord/compactord/gen/lancepb"
)

// TestStreamViewsReuseWindows: a file of several pages per column
// (bitpacked ints, FSST strings, flat doubles; written with small pages)
// streamed with NextView in windows that cut chunks and pages reads, at
// every window, the same rows as ReadRange decodes afresh. NextView hands
// the buffers of the window it replaces back to the decoder, so a window
// decoded into a buffer still in use, or one not fully overwritten, shows
// up here.
func TestStreamViewsReuseWindows(t *testing.T) {
	const n = 50_000
	fields := []*lancepb.Field{
		{Name: "id", Id: 0, ParentId: -1, LogicalType: "int64"},
		{Name: "s", Id: 1, ParentId: -1, LogicalType: "string", Nullable: true},
		{Name: "f", Id: 2, ParentId: -1, LogicalType: "double"},
	}
	id := &Array{Len: n, Values: alloc(8 * n)}
	s := &Array{Len: n, Offsets: make([]int64, n+1)}
	f := &Array{Len: n, Values: alloc(8 * n)}
	for i := 0; i < n; i++ {
		le.PutUint64(id.Values[8*i:], uint64(i*3))
		le.PutUint64(f.Values[8*i:], uint64(i)*0x9E3779B97F4A7C15)
		s.Values = append(s.Values, fmt.Sprintf("value-%d-%s", i, "abcdefgh"[:i%8])...)
		s.Offsets[i+1] = int64(len(s.Values))
	}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, fields, WriterOptions{Version: V2_2, PageBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range []*Array{id, s, f} {
		a.Type, a.Name = w.Schema().Fields[i].Type, fields[i].Name
	}
	if err := w.Write(&Batch{NumRows: n, Columns: []*Array{id, s, f}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	src, err := Open(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	for c, col := range src.Columns {
		if len(col.GetPages()) < 3 {
			t.Fatalf("column %d has %d pages; the test wants several", c, len(col.GetPages()))
		}
	}
	for _, window := range []int{1000, 4096, 7777} {
		st, err := src.Stream(nil, window)
		if err != nil {
			t.Fatal(err)
		}
		for start := 0; ; start += window {
			bt, err := st.NextView()
			if err == io.EOF {
				if start < n {
					t.Fatalf("window %d: stream ended at row %d", window, start)
				}
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			want, err := src.ReadRange(nil, uint64(start), uint64(start+bt.NumRows))
			if err != nil {
				t.Fatal(err)
			}
			for i := range bt.Columns {
				g, w := canonAny(bt.Columns[i]), canonAny(want.Columns[i])
				if !reflect.DeepEqual(g, w) {
					t.Fatalf("window %d at row %d, column %s: %s", window, start, fields[i].Name, firstDiff(g, w))
				}
			}
		}
	}
	// The ended streams passed their buffers on; a long-lived process can
	// let them go.
	if spareHeld() == 0 {
		t.Fatal("ended streams left no decode buffer for the next one")
	}
	DropSpareBuffers()
	if got := spareHeld(); got != 0 {
		t.Fatalf("DropSpareBuffers kept %d bytes", got)
	}
}
