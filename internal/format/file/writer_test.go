package file

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/compactord/compactord/gen/lancefilepb"
	"github.com/compactord/compactord/gen/lancepb"
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

// arrowDictFile writes n rows of an Arrow dictionary field of the given
// logical type (values from words, every seventh row null) at version v.
func arrowDictFile(t testing.TB, v Version, logical string, words []string, n int) ([]byte, error) {
	t.Helper()
	fields := []*lancepb.Field{{Name: "d", Id: 0, ParentId: -1, LogicalType: logical, Nullable: true}}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, fields, WriterOptions{Version: v})
	if err != nil {
		t.Fatal(err)
	}
	typ, err := ParseType(logical)
	if err != nil {
		t.Fatal(err)
	}
	a := &Array{Type: typ, Name: "d", Len: n, Offsets: []int64{0}, Valid: make([]byte, bitmapLen(n))}
	for i := 0; i < n; i++ {
		if i%7 != 0 {
			setBit(a.Valid, i)
			a.Values = append(a.Values, words[i%len(words)]...)
		}
		a.Offsets = append(a.Offsets, int64(len(a.Values)))
	}
	if err := w.Write(&Batch{NumRows: n, Columns: []*Array{a}}); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// TestWriteArrowDict: an Arrow dictionary field reads back as written at
// every version, keeps its logical type, and in 2.1+ is a mini-block
// page with a dictionary whose indices are packed at the key's width
// (LanceDB refuses any other width).
func TestWriteArrowDict(t *testing.T) {
	words := []string{"alpha", "beta", "", "gamma ünï"}
	for _, v := range []Version{V2_0, V2_1, V2_2} {
		for logical, bits := range map[string]uint64{"dict:string:int32:false": 32, "dict:string:int8:false": 8,
			"dict:large_string:int16:false": 16, "dict:binary:uint8:false": 8} {
			b, err := arrowDictFile(t, v, logical, words, 300)
			if err != nil {
				t.Fatalf("%s %s: %v", v, logical, err)
			}
			f, err := Open(bytes.NewReader(b), int64(len(b)))
			if err != nil {
				t.Fatalf("%s %s: %v", v, logical, err)
			}
			if got := f.Desc.GetSchema().GetFields()[0].GetLogicalType(); got != logical {
				t.Errorf("%s: logical type %q, want %q", v, got, logical)
			}
			r, err := f.ReadAll(nil)
			if err != nil {
				t.Fatalf("%s %s: %v", v, logical, err)
			}
			d := r.Columns[0]
			for i := 0; i < 300; i++ {
				if d.IsValid(i) != (i%7 != 0) || i%7 != 0 && string(d.Bytes(i)) != words[i%len(words)] {
					t.Fatalf("%s %s: row %d: valid %v %q", v, logical, i, d.IsValid(i), d.Bytes(i))
				}
			}
			if v == V2_0 {
				continue
			}
			pl := &lancefilepb.PageLayout{}
			if err := unwrapEncoding(f.Columns[0].Pages[0].Encoding, "PageLayout", pl); err != nil {
				t.Fatal(err)
			}
			ml := pl.GetMiniBlockLayout()
			if ml.GetDictionary() == nil || ml.GetValueCompression().GetInlineBitpacking().GetUncompressedBitsPerValue() != bits {
				t.Errorf("%s %s: page %v, want a dictionary with %d-bit indices", v, logical, pl, bits)
			}
		}
	}
}

// TestWriteArrowDictTooManyValues: more distinct values than the key type
// addresses is a one-line error, not a wrapped index.
func TestWriteArrowDictTooManyValues(t *testing.T) {
	words := make([]string, 200)
	for i := range words {
		words[i] = fmt.Sprint("w", i)
	}
	for _, v := range []Version{V2_0, V2_1, V2_2} {
		_, err := arrowDictFile(t, v, "dict:string:int8:false", words, 400)
		if err == nil || !strings.Contains(err.Error(), "do not fit a int8 dictionary index") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v", v, err)
		}
		if _, err := arrowDictFile(t, v, "dict:string:int16:false", words, 400); err != nil {
			t.Errorf("%s: int16 keys: %v", v, err)
		}
	}
}

// numDictFile writes one nullable field of a dictionary-of-numbers type:
// n rows cycling through vals (each the little-endian bytes of one
// value), null where null(i).
func numDictFile(t testing.TB, v Version, logical string, vals [][]byte, n int, null func(int) bool) ([]byte, error) {
	t.Helper()
	fields := []*lancepb.Field{{Name: "d", Id: 0, ParentId: -1, LogicalType: logical, Nullable: true}}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, fields, WriterOptions{Version: v})
	if err != nil {
		t.Fatal(err)
	}
	typ, err := ParseType(logical)
	if err != nil {
		t.Fatal(err)
	}
	a := &Array{Type: typ, Name: "d", Len: n, Valid: make([]byte, bitmapLen(n))}
	for i := 0; i < n; i++ {
		if null(i) {
			// A null row's placeholder differs from every value.
			a.Values = append(a.Values, bytes.Repeat([]byte{0xee}, typ.ByteWidth())...)
			continue
		}
		setBit(a.Valid, i)
		a.Values = append(a.Values, vals[i%len(vals)]...)
	}
	if err := w.Write(&Batch{NumRows: n, Columns: []*Array{a}}); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// leBytes is the w low bytes of x, little-endian.
func leBytes(x uint64, w int) []byte {
	b := make([]byte, 8)
	le.PutUint64(b, x)
	return b[:w]
}

// TestWriteArrowDictNumbers: a dictionary of numbers reads back as
// written at every version and keeps its logical type; its page is laid
// out as LanceDB 0.39 writes one (2.0: flat items at the value width and a
// trailing null item; 2.1+: mini-block with a flat dictionary of the
// distinct values, null slots adding none, indices at the key's width).
func TestWriteArrowDictNumbers(t *testing.T) {
	cases := []struct {
		logical string
		w, key  int
	}{
		{"dict:int32:int32:false", 4, 32}, {"dict:double:int8:false", 8, 8}, {"dict:int64:uint8:false", 8, 8},
		{"dict:float:int16:false", 4, 16}, {"dict:int8:uint16:false", 1, 16}, {"dict:uint64:int64:false", 8, 64},
		{"dict:halffloat:uint32:false", 2, 32}, {"dict:uint16:int32:true", 2, 32},
	}
	null := func(i int) bool { return i%7 == 0 }
	for _, v := range []Version{V2_0, V2_1, V2_2} {
		for _, c := range cases {
			vals := [][]byte{leBytes(0, c.w), leBytes(1, c.w), leBytes(^uint64(0), c.w), leBytes(0x8000000000000042, c.w)}
			b, err := numDictFile(t, v, c.logical, vals, 300, null)
			if err != nil {
				t.Fatalf("%s %s: %v", v, c.logical, err)
			}
			f, err := Open(bytes.NewReader(b), int64(len(b)))
			if err != nil {
				t.Fatalf("%s %s: %v", v, c.logical, err)
			}
			if got := f.Desc.GetSchema().GetFields()[0].GetLogicalType(); got != c.logical {
				t.Errorf("%s: logical type %q, want %q", v, got, c.logical)
			}
			r, err := f.ReadAll(nil)
			if err != nil {
				t.Fatalf("%s %s: %v", v, c.logical, err)
			}
			d := r.Columns[0]
			for i := 0; i < 300; i++ {
				if d.IsValid(i) == null(i) || !null(i) && !bytes.Equal(d.Values[i*c.w:(i+1)*c.w], vals[i%len(vals)]) {
					t.Fatalf("%s %s: row %d: valid %v % x", v, c.logical, i, d.IsValid(i), d.Values[i*c.w:(i+1)*c.w])
				}
			}
			distinct := map[string]bool{}
			for _, x := range vals {
				distinct[string(x)] = true
			}
			if v == V2_0 {
				ae := &lancefilepb.ArrayEncoding{}
				if err := unwrapEncoding(f.Columns[0].Pages[0].Encoding, "ArrayEncoding", ae); err != nil {
					t.Fatal(err)
				}
				dict := ae.GetDictionary()
				if dict == nil {
					// The writer wraps every 2.0 page in a nullable layer.
					dict = ae.GetNullable().GetNoNulls().GetValues().GetDictionary()
				}
				items := dict.GetItems().GetNullable().GetSomeNulls().GetValues().GetFlat()
				if dict.GetNumDictionaryItems() != uint32(len(distinct)+1) || items.GetBitsPerValue() != uint64(8*c.w) ||
					dict.GetIndices().GetNullable().GetNoNulls().GetValues().GetFlat().GetBitsPerValue() != uint64(c.key) {
					t.Errorf("%s %s: page %v, want %d flat %d-bit items and a null one, %d-bit indices", v, c.logical, ae, len(distinct), 8*c.w, c.key)
				}
				continue
			}
			pl := &lancefilepb.PageLayout{}
			if err := unwrapEncoding(f.Columns[0].Pages[0].Encoding, "PageLayout", pl); err != nil {
				t.Fatal(err)
			}
			ml := pl.GetMiniBlockLayout()
			if ml.GetDictionary().GetFlat().GetBitsPerValue() != uint64(8*c.w) || ml.GetNumDictionaryItems() != uint64(len(distinct)) ||
				ml.GetValueCompression().GetInlineBitpacking().GetUncompressedBitsPerValue() != uint64(c.key) {
				t.Errorf("%s %s: page %v, want a flat %d-bit dictionary of %d items, %d-bit indices", v, c.logical, pl, 8*c.w, len(distinct), c.key)
			}
		}
	}
}

// TestWriteArrowDictNumbersKeyRoom: int8 keys address 128 values; at
// 2.1+ null rows take no dictionary item, so 128 distinct values with
// nulls fit, while 2.0 needs one more item for the nulls (as LanceDB's
// own 2.0 layout does). One more distinct value is a one-line error at
// every version; an all-null column writes and reads back as nulls.
func TestWriteArrowDictNumbersKeyRoom(t *testing.T) {
	vals := func(k int) [][]byte {
		out := make([][]byte, k)
		for i := range out {
			out[i] = leBytes(uint64(i)*3+1, 8)
		}
		return out
	}
	null := func(i int) bool { return i%5 == 0 }
	for _, v := range []Version{V2_0, V2_1, V2_2} {
		_, err := numDictFile(t, v, "dict:double:int8:false", vals(128), 1000, null)
		if v == V2_0 {
			if err == nil || !strings.Contains(err.Error(), "129 distinct values do not fit a int8 dictionary index") {
				t.Errorf("%s: 128 values and nulls: %v", v, err)
			}
		} else if err != nil {
			t.Errorf("%s: 128 values and nulls: %v", v, err)
		}
		_, err = numDictFile(t, v, "dict:double:int8:false", vals(129), 1000, func(int) bool { return false })
		if err == nil || !strings.Contains(err.Error(), "do not fit a int8 dictionary index") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: 129 values: %v", v, err)
		}
		b, err := numDictFile(t, v, "dict:int32:int16:false", nil, 50, func(int) bool { return true })
		if err != nil {
			t.Fatalf("%s: all null: %v", v, err)
		}
		f, err := Open(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatalf("%s: all null: %v", v, err)
		}
		r, err := f.ReadAll(nil)
		if err != nil {
			t.Fatalf("%s: all null: %v", v, err)
		}
		if d := r.Columns[0]; d.Len != 50 || d.NullCount() != 50 {
			t.Errorf("%s: all null reads back %d rows, %d null", v, d.Len, d.NullCount())
		}
	}
}

// TestWriteArrowDictNumbersPageSize: a dictionary of numbers is paged by
// its key's width, not its values' (LanceDB concatenates the pages a
// batch spans, and fails when their dictionaries together fill the key's
// range), so 3000 float64 rows
// under int8 keys stay one 4 KiB page (3000 key bytes) where plain
// float64 rows take five; written through Write and through WriteRows.
func TestWriteArrowDictNumbersPageSize(t *testing.T) {
	const n = 3000
	for _, v := range []Version{V2_0, V2_1, V2_2} {
		for _, c := range []struct {
			logical string
			pages   int
		}{{"dict:double:int8:false", 1}, {"double", 5}} {
			for _, rows := range [][]int{nil, {0}} {
				fields := []*lancepb.Field{{Name: "d", Id: 0, ParentId: -1, LogicalType: c.logical, Nullable: true}}
				var buf bytes.Buffer
				w, err := NewWriter(&buf, fields, WriterOptions{Version: v, PageBytes: 4096})
				if err != nil {
					t.Fatal(err)
				}
				typ, err := ParseType(c.logical)
				if err != nil {
					t.Fatal(err)
				}
				// Batches of 100 rows, as compaction writes them.
				for lo := 0; lo < n; lo += 100 {
					a := &Array{Type: typ, Name: "d", Len: 100}
					for i := lo; i < lo+100; i++ {
						a.Values = append(a.Values, leBytes(uint64(i%100), 8)...)
					}
					b := &Batch{NumRows: 100, Columns: []*Array{a}}
					if rows == nil {
						err = w.Write(b)
					} else {
						all := make([]int, 100)
						for i := range all {
							all[i] = i
						}
						err = w.WriteRows(b, all)
					}
					if err != nil {
						t.Fatal(err)
					}
				}
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				f, err := Open(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
				if err != nil {
					t.Fatal(err)
				}
				if got := len(f.Columns[0].Pages); got != c.pages {
					t.Errorf("%s %s (WriteRows %v): %d pages, want %d", v, c.logical, rows != nil, got, c.pages)
				}
			}
		}
	}
}

// TestWriteArrowDictBools: a dictionary of booleans (LanceDB's
// dict:bool:KEY) reads back as written at every version with one-bit
// items: 2.0 two items and a null one, 2.1+ a flat one-bit dictionary of
// the two values.
func TestWriteArrowDictBools(t *testing.T) {
	const n = 200
	logical := "dict:bool:int8:false"
	val := func(i int) bool { return i%3 == 1 }
	null := func(i int) bool { return i%5 == 0 }
	for _, v := range []Version{V2_0, V2_1, V2_2} {
		fields := []*lancepb.Field{{Name: "d", Id: 0, ParentId: -1, LogicalType: logical, Nullable: true}}
		var buf bytes.Buffer
		w, err := NewWriter(&buf, fields, WriterOptions{Version: v})
		if err != nil {
			t.Fatal(err)
		}
		typ, err := ParseType(logical)
		if err != nil {
			t.Fatal(err)
		}
		a := &Array{Type: typ, Name: "d", Len: n, Valid: make([]byte, bitmapLen(n)), Values: make([]byte, bitmapLen(n))}
		for i := 0; i < n; i++ {
			if !null(i) {
				setBit(a.Valid, i)
			}
			if val(i) {
				setBit(a.Values, i)
			}
		}
		if err := w.Write(&Batch{NumRows: n, Columns: []*Array{a}}); err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		f, err := Open(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		if err != nil {
			t.Fatal(err)
		}
		r, err := f.ReadAll(nil)
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		d := r.Columns[0]
		for i := 0; i < n; i++ {
			if d.IsValid(i) == null(i) || !null(i) && getBit(d.Values, i) != val(i) {
				t.Fatalf("%s: row %d: valid %v value %v", v, i, d.IsValid(i), getBit(d.Values, i))
			}
		}
		if v == V2_0 {
			ae := &lancefilepb.ArrayEncoding{}
			if err := unwrapEncoding(f.Columns[0].Pages[0].Encoding, "ArrayEncoding", ae); err != nil {
				t.Fatal(err)
			}
			dict := ae.GetNullable().GetNoNulls().GetValues().GetDictionary()
			if dict.GetNumDictionaryItems() != 3 || dict.GetItems().GetNullable().GetSomeNulls().GetValues().GetFlat().GetBitsPerValue() != 1 {
				t.Errorf("%s: page %v, want two one-bit items and a null one", v, ae)
			}
			continue
		}
		pl := &lancefilepb.PageLayout{}
		if err := unwrapEncoding(f.Columns[0].Pages[0].Encoding, "PageLayout", pl); err != nil {
			t.Fatal(err)
		}
		if ml := pl.GetMiniBlockLayout(); ml.GetDictionary().GetFlat().GetBitsPerValue() != 1 || ml.GetNumDictionaryItems() != 2 {
			t.Errorf("%s: page %v, want a flat one-bit dictionary of 2 items", v, pl)
		}
	}
}
