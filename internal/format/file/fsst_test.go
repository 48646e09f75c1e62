package file

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	pb "github.com/compactord/compactord/gen/lancefilepb"
	"github.com/compactord/compactord/gen/lancepb"
	"google.golang.org/protobuf/encoding/prototext"
)

func varBlock(vals [][]byte) *block {
	b := &block{n: len(vals), isVar: true, offsets: make([]int64, len(vals)+1)}
	for i, v := range vals {
		b.data = append(b.data, v...)
		b.offsets[i+1] = int64(len(b.data))
	}
	return b
}

// TestFSSTRoundTrip compresses several kinds of values with the encoder
// and expands them with the decoder, whole and split into chunks.
func TestFSSTRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	gens := map[string]func(i int) []byte{
		"ids": func(i int) []byte { return fmt.Appendf(nil, "%s-%x", fmt.Sprint(r.Uint64()%(1<<52)), i) },
		"urls": func(i int) []byte {
			return fmt.Appendf(nil, "https://example.com/users/%d/items?page=%d", r.IntN(1000), r.IntN(50))
		},
		"random": func(i int) []byte {
			b := make([]byte, 5+r.IntN(20))
			for k := range b {
				b[k] = byte(r.UintN(256))
			}
			return b
		},
		"escapes": func(i int) []byte { return bytes.Repeat([]byte{255, byte(i)}, 1+i%7) },
		"empties": func(i int) []byte {
			if i%3 == 0 {
				return nil
			}
			return []byte("abcdefgh")[:i%9]
		},
	}
	for name, g := range gens {
		t.Run(name, func(t *testing.T) {
			vals := make([][]byte, 20000)
			for i := range vals {
				vals[i] = g(i)
			}
			in := varBlock(vals)
			e := newFSSTEncoder()
			e.build(fsstSample(in))
			c := &block{n: in.n, isVar: true, offsets: make([]int64, in.n+1)}
			for i := 0; i < in.n; i++ {
				c.data = e.compress(c.data, in.data, int(in.offsets[i]), int(in.offsets[i+1]))
				c.offsets[i+1] = int64(len(c.data))
			}
			t.Logf("%d symbols, %d -> %d bytes (%.2fx)", e.ns, len(in.data), len(c.data), float64(len(in.data))/float64(len(c.data)))
			// Split into chunks as mini-block pages are.
			var parts []*block
			for lo := 0; lo < c.n; lo += 777 {
				hi := min(c.n, lo+777)
				p := &block{n: hi - lo, isVar: true, data: c.data[c.offsets[lo]:c.offsets[hi]]}
				for i := lo; i <= hi; i++ {
					p.offsets = append(p.offsets, c.offsets[i]-c.offsets[lo])
				}
				parts = append(parts, p)
			}
			for _, ins := range [][]*block{{c}, parts} {
				out, err := unfsstBlocks(e.table(), ins)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(out.data, in.data) || !slicesEqual(out.offsets, in.offsets) {
					t.Fatalf("round trip differs (%d vs %d bytes)", len(out.data), len(in.data))
				}
			}
		})
	}
}

func slicesEqual(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestFSSTDecodeErrors: a truncated escape, a bad table and values outside
// the chunk are errors.
func TestFSSTDecodeErrors(t *testing.T) {
	e := newFSSTEncoder()
	e.add(0x6261, 2)
	tab := e.table()
	if len(tab) != 2312 {
		t.Fatalf("table of %d bytes", len(tab))
	}
	ok := varBlock([][]byte{{0, 255, 'x'}})
	out, err := unfsstBlocks(tab, []*block{ok})
	if err != nil || string(out.data) != "abx" {
		t.Fatalf("decode: %q %v", out.data, err)
	}
	if _, err := unfsstBlocks(tab, []*block{varBlock([][]byte{{0, 255}})}); err == nil {
		t.Fatal("escape at the end: no error")
	}
	if _, err := unfsstBlocks(tab[:7], []*block{ok}); err == nil {
		t.Fatal("short table: no error")
	}
	bad := &block{n: 1, isVar: true, offsets: []int64{0, 9}, data: []byte{0}}
	if _, err := unfsstBlocks(tab, []*block{bad}); err == nil {
		t.Fatal("value past the chunk: no error")
	}
}

// pageEncodings is the text of every page layout of a column.
func pageEncodings(t testing.TB, f *File, col int) string {
	t.Helper()
	var sb strings.Builder
	for _, p := range f.Columns[col].GetPages() {
		pl := &pb.PageLayout{}
		if err := unwrapEncoding(p.GetEncoding(), "PageLayout", pl); err != nil {
			t.Fatal(err)
		}
		sb.WriteString(prototext.Format(pl))
	}
	return sb.String()
}

var fsstSchema = []*lancepb.Field{
	{Name: "s", Id: 0, ParentId: -1, LogicalType: "string", Nullable: true},
	{Name: "ls", Id: 1, ParentId: -1, LogicalType: "large_string"},
	{Name: "bin", Id: 2, ParentId: -1, LogicalType: "binary", Nullable: true},
	{Name: "forced", Id: 3, ParentId: -1, LogicalType: "string", Metadata: map[string][]byte{metaCompression: []byte("fsst")}},
	{Name: "zs", Id: 4, ParentId: -1, LogicalType: "string", Metadata: map[string][]byte{metaCompression: []byte("zstd")}},
	{Name: "l", Id: 5, ParentId: -1, LogicalType: "list", Nullable: true},
	{Name: "item", Id: 6, ParentId: 5, LogicalType: "string", Nullable: true},
	{Name: "off", Id: 7, ParentId: -1, LogicalType: "string", Metadata: map[string][]byte{metaCompression: []byte("none")}},
}

// fsstBatch: n rows of strings FSST compresses (ids, URLs, binary with
// 0xff bytes, nulls, empty values, lists of strings).
func fsstBatch(s *Schema, n int) *Batch {
	r := rand.New(rand.NewPCG(5, 6))
	str := func(name string, kind int, nullable bool, n int) *Array {
		a := &Array{Name: name, Len: n, Offsets: make([]int64, n+1)}
		if nullable {
			a.Valid = make([]byte, bitmapLen(n))
		}
		for i := 0; i < n; i++ {
			if nullable && r.IntN(7) == 0 {
				a.Offsets[i+1] = int64(len(a.Values))
				continue
			}
			if a.Valid != nil {
				setBit(a.Valid, i)
			}
			switch kind {
			case 0:
				a.Values = fmt.Appendf(a.Values, "%x-%d", r.Uint64()>>12, i)
			case 1:
				a.Values = fmt.Appendf(a.Values, "https://example.com/%s/%d?q=%d", []string{"users", "items", "orders"}[r.IntN(3)], r.IntN(100000), i)
			case 2:
				for k := r.IntN(12); k > 0; k-- {
					a.Values = append(a.Values, []byte{255, 'a', 'b', 'c', 0, byte(i)}[r.IntN(6)])
				}
			case 3:
				a.Values = strconv.AppendInt(a.Values, int64(i), 36)
			}
			a.Offsets[i+1] = int64(len(a.Values))
		}
		return a
	}
	b := &Batch{NumRows: n}
	for _, f := range s.Fields {
		var a *Array
		switch f.Name {
		case "s":
			a = str("s", 0, true, n)
		case "ls", "zs", "off":
			a = str(f.Name, 1, false, n)
		case "bin":
			a = str("bin", 2, true, n)
		case "forced":
			a = str("forced", 3, false, n)
		case "l":
			a = &Array{Name: "l", Len: n, Offsets: make([]int64, n+1), Valid: make([]byte, bitmapLen(n))}
			for j := 0; j < n; j++ {
				if j%5 != 0 {
					setBit(a.Valid, j)
					a.Offsets[j+1] = a.Offsets[j] + int64(j%4)
				} else {
					a.Offsets[j+1] = a.Offsets[j]
				}
			}
			a.Children = []*Array{str("item", 1, true, int(a.Offsets[n]))}
		}
		a.Type = f.Type
		if a.Children != nil {
			a.Children[0].Type = f.Children[0].Type
		}
		b.Columns = append(b.Columns, a)
	}
	return b
}

// TestLanceDBReadsFSST writes strings the encoder FSST-compresses (by
// LanceDB's thresholds, forced by metadata, under zstd, in a list) at 2.1
// and 2.2, checks the pages are FSST (and "none" is not), reads them back
// and has LanceDB read them equal.
func TestLanceDBReadsFSST(t *testing.T) {
	dir := t.TempDir()
	var cases []lancedbCase
	for _, v := range []Version{V2_1, V2_2} {
		var buf bytes.Buffer
		w, err := NewWriter(&buf, fsstSchema, WriterOptions{Version: v})
		if err != nil {
			t.Fatal(err)
		}
		b := fsstBatch(w.Schema(), 20000)
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
		want := &oracle{Rows: b.NumRows, Columns: map[string]json.RawMessage{}}
		got, err := f.ReadAll(nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, fl := range w.Schema().Fields {
			leaf := fl
			for len(leaf.Children) > 0 {
				leaf = leaf.Children[0]
			}
			enc := pageEncodings(t, f, leaf.Column)
			if isFSST := strings.Contains(enc, "fsst"); isFSST != (fl.Name != "off") {
				t.Errorf("%s %s: fsst %v in %s", v, fl.Name, isFSST, enc)
			}
			wj, _ := json.Marshal(canonColumn(b.Columns[i]))
			want.Columns[fl.Name] = wj
			if g, w := canonAny(got.Columns[i]), canonAny(b.Columns[i]); !reflect.DeepEqual(g, w) {
				t.Errorf("%s %s: read back %s", v, fl.Name, firstDiff(g, w))
			}
		}
		name := fmt.Sprintf("fsst_w%d%d", v.Major, v.Minor)
		f2, c := w.DataFileFields()
		writeTable(t, dir, name, fsstSchema, buf.Bytes(), v, f2, c, uint64(b.NumRows))
		cases = append(cases, lancedbCase{name: name, want: want})
	}
	lancedbRead(t, dir, cases)
}

// BenchmarkFSSTEncode compresses 500 000 strings shaped like the
// LanceDB benchmark's unique utf8 column.
func BenchmarkFSSTEncode(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	vals := make([][]byte, 500000)
	for i := range vals {
		vals[i] = fmt.Appendf(strconv.AppendUint(nil, r.Uint64()%(1<<52), 36), "-%x", i)
	}
	in := varBlock(vals)
	b.SetBytes(int64(len(in.data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, ok := fsstBlock(in, false, nil); !ok {
			b.Fatal("fsst did not pay")
		}
	}
}

// FuzzFSST: hostile tables and codes give errors, never panics; values
// the encoder compresses expand back equal.
func FuzzFSST(f *testing.F) {
	e := newFSSTEncoder()
	e.add(0x6261, 2)
	e.add(0x646362, 3)
	f.Add(e.table(), []byte{0, 1, 255, 7, 1}, []byte("abcabcd\xffxyz"))
	f.Fuzz(func(t *testing.T, table, codes, plain []byte) {
		in := &block{n: 2, isVar: true, offsets: []int64{0, int64(len(codes) / 2), int64(len(codes))}, data: codes}
		_, _ = unfsstBlocks(table, []*block{in, in})
		vals := bytes.SplitAfter(plain, []byte{'x'})
		v := varBlock(vals)
		enc := newFSSTEncoder()
		enc.build(fsstSample(v))
		c := &block{n: v.n, isVar: true, offsets: make([]int64, v.n+1)}
		c.data = enc.compressAll(v, c.offsets, nil)
		out, err := unfsstBlocks(enc.table(), []*block{c})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.data, v.data) || !slicesEqual(out.offsets, v.offsets) {
			t.Fatalf("round trip of %q differs", plain)
		}
	})
}

func TestCheckFSSTValues(t *testing.T) {
	vals := func(vs ...[]byte) *block {
		b := &block{n: len(vs), isVar: true, offsets: []int64{0}}
		for _, v := range vs {
			b.data = append(b.data, v...)
			b.offsets = append(b.offsets, int64(len(b.data)))
		}
		return b
	}
	long := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	for _, c := range []struct {
		name string
		b    *block
		err  string
	}{
		{"codes only", vals([]byte{1, 2}, long, nil), ""},
		{"escaped bytes", vals([]byte{fsstEscape, 'x'}, []byte{fsstEscape, fsstEscape}, append(append([]byte{}, long...), fsstEscape, 0)), ""},
		{"an escape ends a value", vals([]byte{1, 2}, []byte{3, fsstEscape}, []byte{4}), "value 1 ends in an escape"},
		{"an escaped escape, then a dangling one", vals([]byte{fsstEscape, fsstEscape, fsstEscape}), "value 0 ends in an escape"},
		{"after eight codes at a time", vals(append(append([]byte{}, long...), fsstEscape)), "value 0 ends in an escape"},
		{"offsets past the data", &block{n: 1, isVar: true, data: []byte{1}, offsets: []int64{0, 5}}, "offsets 0..5 of 1 bytes"},
		{"offsets going back", &block{n: 2, isVar: true, data: []byte{1, 2}, offsets: []int64{0, 2, 1}}, "offsets 2..1"},
	} {
		err := checkFSSTValues(c.b)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: error %v, want %q", c.name, err, c.err)
		}
	}
}
