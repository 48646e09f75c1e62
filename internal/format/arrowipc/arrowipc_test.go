package arrowipc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

type walExpected struct {
	Shard       string `json:"shard"`
	Generations []struct {
		G   int   `json:"g"`
		IDs []int `json:"ids"`
	} `json:"generations"`
	Entries []struct {
		File     string            `json:"file"`
		Position int               `json:"position"`
		Metadata map[string]string `json:"metadata"`
		Columns  []string          `json:"columns"`
		Rows     int               `json:"rows"`
	} `json:"entries"`
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func mdMap(md Metadata) map[string]string {
	m := map[string]string{}
	for _, kv := range md {
		m[kv.Key] = kv.Value
	}
	return m
}

// TestRealWALEntries decodes the WAL entries LanceDB wrote (make_wal.mjs) and
// checks every value against the generator's row function.
func TestRealWALEntries(t *testing.T) {
	var exp walExpected
	readJSON(t, "testdata/wal_expected.json", &exp)
	if len(exp.Entries) != 5 {
		t.Fatalf("%d entries in wal_expected.json, want 5", len(exp.Entries))
	}
	gen := 0
	for _, e := range exp.Entries {
		data, err := os.ReadFile(filepath.Join("testdata", e.File))
		if err != nil {
			t.Fatal(err)
		}
		st, err := ReadStream(data, nil)
		if err != nil {
			t.Fatalf("%s: %v", e.File, err)
		}
		if got := mdMap(st.Schema.Metadata); !reflect.DeepEqual(got, e.Metadata) {
			t.Errorf("%s: metadata %v, want %v", e.File, got, e.Metadata)
		}
		if e.Metadata["fence_sentinel"] == "true" {
			if len(st.Schema.Fields) != 0 || len(st.Batches) != 0 {
				t.Errorf("%s: sentinel with %d fields and %d batches", e.File, len(st.Schema.Fields), len(st.Batches))
			}
			continue
		}
		g := exp.Generations[gen]
		gen++
		if e.Metadata["writer_epoch"] != fmt.Sprint(g.G) {
			t.Errorf("%s: epoch %s, want %d", e.File, e.Metadata["writer_epoch"], g.G)
		}
		if len(st.Batches) != 1 || st.Batches[0].Len != e.Rows {
			t.Fatalf("%s: %d batches, want one of %d rows", e.File, len(st.Batches), e.Rows)
		}
		var names []string
		for _, f := range st.Schema.Fields {
			names = append(names, f.Name)
		}
		if want := "id s v n ok ts vec tags _tombstone"; strings.Join(names, " ") != want {
			t.Fatalf("%s: columns %v, want %s", e.File, names, want)
		}
		if v, _ := st.Schema.Fields[0].Metadata.Get("lance-schema:unenforced-primary-key:position"); v != "1" {
			t.Errorf("%s: id field metadata %v", e.File, st.Schema.Fields[0].Metadata)
		}
		checkWALBatch(t, e.File, st.Schema, st.Batches[0], g.G, g.IDs)
	}
}

// checkWALBatch checks b against make_wal.mjs's row(i, g).
func checkWALBatch(t *testing.T, name string, s *Schema, b *Batch, g int, ids []int) {
	t.Helper()
	col := func(n string) *Array { return b.Column(s, n) }
	id, str, v, n, ok, ts := col("id").Int64s(), col("s"), col("v").Float64s(), col("n"), col("ok"), col("ts").Int64s()
	vec, tags, tomb := col("vec"), col("tags"), col("_tombstone")
	nv, vecv := n.Int32s(), vec.Children[0].Float32s()
	for r, i := range ids {
		where := fmt.Sprintf("%s row %d (id %d)", name, r, i)
		if id[r] != int64(i) {
			t.Errorf("%s: id %d", where, id[r])
		}
		if (i%7 == 3) == str.IsValid(r) || (str.IsValid(r) && str.Str(r) != fmt.Sprintf("g%d-%d", g, i)) {
			t.Errorf("%s: s valid=%v %q", where, str.IsValid(r), str.Str(r))
		}
		if v[r] != float64(i)*0.5+float64(g) {
			t.Errorf("%s: v %v", where, v[r])
		}
		if (i%5 == 0) == n.IsValid(r) || (n.IsValid(r) && nv[r] != int32(i*10+g)) {
			t.Errorf("%s: n valid=%v %d", where, n.IsValid(r), nv[r])
		}
		if !ok.IsValid(r) || ok.Bool(r) != ((i+g)%2 == 0) {
			t.Errorf("%s: ok %v", where, ok.Bool(r))
		}
		// makeArrowTable takes a JS number for a timestamp as milliseconds,
		// so LanceDB stored the double 1000× the number, rounded.
		if want := int64(float64(1700000000000000+i*1000+g) * 1000); ts[r] != want {
			t.Errorf("%s: ts %d", where, ts[r])
		}
		if (i%11 == 4) == vec.IsValid(r) {
			t.Errorf("%s: vec valid=%v", where, vec.IsValid(r))
		} else if vec.IsValid(r) {
			lo, hi := vec.ListRange(r)
			if want := []float32{float32(i), float32(i) + 0.25, float32(g), -float32(i)}; !reflect.DeepEqual(vecv[lo:hi], want) {
				t.Errorf("%s: vec %v, want %v", where, vecv[lo:hi], want)
			}
		}
		if (i%6 == 1) == tags.IsValid(r) {
			t.Errorf("%s: tags valid=%v", where, tags.IsValid(r))
		} else if tags.IsValid(r) {
			lo, hi := tags.ListRange(r)
			var got []string
			for k := lo; k < hi; k++ {
				got = append(got, tags.Children[0].Str(k))
			}
			var want []string
			for k := 0; k < i%3; k++ {
				want = append(want, fmt.Sprintf("t%d", k))
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s: tags %q, want %q", where, got, want)
			}
		}
		if tomb.Bool(r) || !tomb.IsValid(r) {
			t.Errorf("%s: _tombstone set", where)
		}
	}
}

// TestRealWALMatchesArrowJS compares the raw layout apache-arrow sees in the
// real WAL entries with ours.
func TestRealWALMatchesArrowJS(t *testing.T) {
	files, _ := filepath.Glob("testdata/wal_*.arrow")
	files = append(files, "testdata/js_dict.arrow", "testdata/js_dict.file.arrow")
	var js []jsFile
	if err := json.Unmarshal(runArrowJS(t, append([]string{"dump"}, files...)...), &js); err != nil {
		t.Fatal(err)
	}
	for i, f := range files {
		data, _ := os.ReadFile(f)
		read := ReadStream
		if strings.HasSuffix(f, ".file.arrow") {
			read = ReadFile
		}
		st, err := read(data, nil)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		compareJS(t, f, st, js[i])
	}
}

func compareJS(t *testing.T, name string, st *Stream, js jsFile) {
	t.Helper()
	if got := mdMap(st.Schema.Metadata); !reflect.DeepEqual(got, js.Metadata) {
		t.Errorf("%s: schema metadata %v, JS %v", name, got, js.Metadata)
	}
	if len(js.Fields) != len(st.Schema.Fields) {
		t.Fatalf("%s: %d fields, JS %d", name, len(st.Schema.Fields), len(js.Fields))
	}
	for i, f := range st.Schema.Fields {
		jf := js.Fields[i]
		if f.Name != jf.Name || f.Nullable != jf.Nullable || !reflect.DeepEqual(mdMap(f.Metadata), jf.Metadata) {
			t.Errorf("%s: field %d %q nullable=%v md=%v, JS %q %v %v", name, i, f.Name, f.Nullable, f.Metadata, jf.Name, jf.Nullable, jf.Metadata)
		}
	}
	// JS shows an empty batch for a schema-only stream.
	jb := js.Batches
	if len(st.Batches) == 0 && len(jb) == 1 && len(jb[0]) == 0 {
		jb = nil
	}
	if len(jb) != len(st.Batches) {
		t.Fatalf("%s: %d batches, JS %d", name, len(st.Batches), len(jb))
	}
	for bi, b := range st.Batches {
		for ci, c := range b.Columns {
			got, want := dumpArray(c), stripTypes(jb[bi][ci])
			if !reflect.DeepEqual(got, want) {
				g, _ := json.Marshal(got)
				w, _ := json.Marshal(want)
				t.Errorf("%s: batch %d column %q:\n ours %s\n JS   %s", name, bi, st.Schema.Fields[ci].Name, g, w)
			}
		}
	}
}

// TestJSDictionary decodes a dictionary-encoded stream and file that
// apache-arrow wrote (arrowjs.mjs dict).
func TestJSDictionary(t *testing.T) {
	for _, f := range []string{"testdata/js_dict.arrow", "testdata/js_dict.file.arrow"} {
		data, _ := os.ReadFile(f)
		read := ReadStream
		if strings.HasSuffix(f, ".file.arrow") {
			read = ReadFile
		}
		st, err := read(data, nil)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		fd := st.Schema.Fields[0]
		if fd.Dict == nil || fd.Type != TUtf8 || fd.Dict.IndexType != TInt16 {
			t.Fatalf("%s: field %v dict %+v", f, fd, fd.Dict)
		}
		c := st.Batches[0].Columns[0]
		idx := c.Int16s()
		var got []string
		for i := 0; i < c.Len; i++ {
			if !c.IsValid(i) {
				got = append(got, "<null>")
				continue
			}
			got = append(got, c.Dict.Str(int(idx[i])))
		}
		if want := []string{"a", "bb", "<null>", "a", "ccc", "bb", "a"}; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %q, want %q", f, got, want)
		}
	}
}

// allTypes builds a schema and batch covering every supported type, with
// nulls at every level, and rows rows.
func allTypes(rng *rand.Rand, rows int) (*Schema, *Batch) { return someTypes(rng, rows, true) }

// someTypes is allTypes, without LargeList unless large (apache-arrow 18
// does not know LargeList).
func someTypes(rng *rand.Rand, rows int, large bool) (*Schema, *Batch) {
	valid := func(n int) []bool {
		v := make([]bool, n)
		for i := range v {
			v[i] = rng.IntN(4) != 0
		}
		return v
	}
	fill := func(n, w int) []byte {
		b := make([]byte, n*w)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	strs := func(n int) []string {
		s := make([]string, n)
		for i := range s {
			s[i] = strings.Repeat(string(rune('a'+rng.IntN(26))), rng.IntN(5))
		}
		return s
	}
	var fields []Field
	var cols []*Array
	add := func(name string, a *Array, children ...Field) {
		fields = append(fields, Field{Name: name, Type: a.Type, Nullable: true, Children: children, Metadata: Metadata{{"k", name}}})
		cols = append(cols, a)
	}
	fixed := func(t DataType) *Array {
		v := valid(rows)
		return &Array{Type: t, Len: rows, Values: fill(rows, t.ByteWidth()), Validity: Bitmap(v), NullCount: nullCount(v)}
	}
	for _, t := range []DataType{TInt8, TInt16, TInt32, TInt64, TUint8, TUint16, TUint32, TUint64,
		TFloat16, TFloat32, TFloat64, TDate32, TDate64,
		TTimestamp(Second, ""), TTimestamp(Millisecond, "UTC"), TTimestamp(Microsecond, ""), TTimestamp(Nanosecond, "Europe/Paris"),
		TTime(Second), TTime(Millisecond), TTime(Microsecond), TTime(Nanosecond),
		{ID: Decimal, BitWidth: 128, Precision: 38, Scale: 9}, {ID: FixedSizeBinary, Size: 5}} {
		add(t.String(), fixed(t))
	}
	bv := make([]bool, rows)
	for i := range bv {
		bv[i] = rng.IntN(2) == 0
	}
	add("bool", BoolArray(bv, valid(rows)))
	add("utf8", StringArray(TUtf8, strs(rows), valid(rows)))
	add("large_utf8", StringArray(DataType{ID: LargeUtf8}, strs(rows), valid(rows)))
	add("binary", StringArray(TBinary, strs(rows), valid(rows)))
	add("large_binary", StringArray(DataType{ID: LargeBinary}, strs(rows), valid(rows)))
	add("null", &Array{Type: TNull, Len: rows, NullCount: rows})
	// fixed_size_list<int32>[3]
	item := Field{Name: "item", Type: TInt32, Nullable: true}
	add("fsl", FixedSizeListArray(3, rows, fixed(TInt32).resize(3*rows), valid(rows)), item)
	// list<utf8>, large_list<float64>
	lens := make([]int, rows)
	tot := 0
	for i := range lens {
		lens[i] = rng.IntN(4)
		tot += lens[i]
	}
	add("list", ListArray(DataType{ID: List}, lens, StringArray(TUtf8, strs(tot), valid(tot)), valid(rows)), Field{Name: "item", Type: TUtf8, Nullable: true})
	if large {
		add("large_list", ListArray(DataType{ID: LargeList}, lens, fixed(TFloat64).resize(tot), valid(rows)), Field{Name: "item", Type: TFloat64, Nullable: true})
	}
	// struct<a: int64, b: list<bool>>
	blist := ListArray(DataType{ID: List}, lens, BoolArray(make([]bool, tot), valid(tot)), valid(rows))
	add("struct", StructArray(rows, []*Array{fixed(TInt64), blist}, valid(rows)),
		Field{Name: "a", Type: TInt64, Nullable: true},
		Field{Name: "b", Type: DataType{ID: List}, Nullable: true, Children: []Field{{Name: "item", Type: TBool, Nullable: true}}})
	return &Schema{Fields: fields, Metadata: Metadata{{"writer_epoch", "7"}, {"x", ""}}}, &Batch{Len: rows, Columns: cols}
}

// resize gives a fixed-width test array n random values.
func (a *Array) resize(n int) *Array {
	w := a.Type.ByteWidth()
	v := make([]byte, n*w)
	for i := range v {
		v[i] = byte(i*7 + 3)
	}
	var valid []bool
	for i := 0; i < n; i++ {
		valid = append(valid, i%5 != 2)
	}
	return &Array{Type: a.Type, Len: n, Values: v, Validity: Bitmap(valid), NullCount: nullCount(valid)}
}

func dumpBatch(b *Batch) []jsData {
	var out []jsData
	for _, c := range b.Columns {
		out = append(out, dumpArray(c))
	}
	return out
}

// TestRoundTrip writes every type with each codec as stream and file and
// reads it back.
func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, rows := range []int{0, 1, 7, 300} {
		s, b := allTypes(rng, rows)
		for _, codec := range []Compression{None, ZSTD, LZ4Frame} {
			for _, file := range []bool{false, true} {
				name := fmt.Sprintf("rows=%d/%s/file=%v", rows, codec, file)
				write, read := WriteStream, ReadStream
				if file {
					write, read = WriteFile, ReadFile
				}
				data, err := write(s, []*Batch{b, b}, codec)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				st, err := read(data, nil)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if !reflect.DeepEqual(st.Schema, s) {
					t.Errorf("%s: schema\n got %v\nwant %v", name, st.Schema, s)
				}
				if len(st.Batches) != 2 {
					t.Fatalf("%s: %d batches", name, len(st.Batches))
				}
				for _, got := range st.Batches {
					g, w := dumpBatch(got), dumpBatch(b)
					for i := range w {
						if !reflect.DeepEqual(g[i], w[i]) {
							t.Errorf("%s: column %s differs:\n got %+v\nwant %+v", name, s.Fields[i].Name, g[i], w[i])
						}
					}
				}
			}
		}
	}
}

// TestArrowJSReadsOurs has apache-arrow read what we write (uncompressed:
// apache-arrow 18 cannot read compressed bodies) and compares its view.
func TestArrowJSReadsOurs(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	s, b := someTypes(rng, 50, false)
	dir := t.TempDir()
	var files []string
	for _, file := range []bool{false, true} {
		write := WriteStream
		if file {
			write = WriteFile
		}
		data, err := write(s, []*Batch{b}, None)
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(dir, fmt.Sprintf("ours_%v.arrow", file))
		if err := os.WriteFile(f, data, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	var js []jsFile
	if err := json.Unmarshal(runArrowJS(t, append([]string{"dump"}, files...)...), &js); err != nil {
		t.Fatal(err)
	}
	wantTypes := map[string]string{
		"int8": "Int8", "uint64": "Uint64", "float16": "Float16", "float64": "Float64",
		"date32": "Date32<DAY>", "date64": "Date64<MILLISECOND>",
		`timestamp[ms,"UTC"]`: "Timestamp<MILLISECOND, UTC>", `timestamp[ns,"Europe/Paris"]`: "Timestamp<NANOSECOND, Europe/Paris>",
		"time32[s]": "Time32<SECOND>", "time64[ns]": "Time64<NANOSECOND>",
		"decimal128(38,9)": "Decimal[38e+9]", "fixed_size_binary[5]": "FixedSizeBinary[5]",
		"bool": "Bool", "utf8": "Utf8", "large_utf8": "LargeUtf8", "binary": "Binary", "large_binary": "LargeBinary",
		"null": "Null", "fsl": "FixedSizeList[3]<Int32>", "list": "List<Utf8>", "large_list": "LargeList<Float64>",
		"struct": "Struct<{a:Int64, b:List<Bool>}>",
	}
	for i := range files {
		st := &Stream{Schema: s, Batches: []*Batch{b}}
		compareJS(t, files[i], st, js[i])
		for fi, f := range js[i].Fields {
			if w, ok := wantTypes[f.Name]; ok && f.Type != w {
				t.Errorf("field %s: JS type %s, want %s", f.Name, f.Type, w)
			}
			if want := s.Fields[fi].Name; f.Name != want {
				t.Errorf("field %d: JS name %s", fi, f.Name)
			}
		}
	}
}

// TestProperty round-trips random batches and checks that every truncation
// and many corruptions of the encoding are rejected without panics.
func TestProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for iter := 0; iter < 30; iter++ {
		s, b := allTypes(rng, rng.IntN(40))
		codec := []Compression{None, ZSTD, LZ4Frame}[iter%3]
		data, err := WriteStream(s, []*Batch{b}, codec)
		if err != nil {
			t.Fatal(err)
		}
		st, err := ReadStream(data, nil)
		if err != nil || !reflect.DeepEqual(dumpBatch(st.Batches[0]), dumpBatch(b)) {
			t.Fatalf("iteration %d: round trip failed: %v", iter, err)
		}
		for cut := 0; cut < len(data)-8; cut += 1 + rng.IntN(16) {
			// A cut at a message boundary is a valid shorter stream.
			if _, err := ReadStream(data[:cut], nil); err == nil && cut > 0 && !boundary(data, cut) {
				t.Errorf("iteration %d: stream cut at %d of %d decoded", iter, cut, len(data))
			}
		}
		for k := 0; k < 200; k++ {
			c := bytes.Clone(data)
			c[rng.IntN(len(c))] ^= byte(1 + rng.IntN(255))
			ReadStream(c, nil) // must not panic
		}
	}
}

// boundary reports whether cut ends a message of the stream in data.
func boundary(data []byte, cut int) bool {
	d := newDecoder(data, nil)
	for off := 0; off < len(data); {
		m, _, n, err := d.next(off)
		if err != nil || m == nil {
			return false
		}
		off += n
		if off == cut {
			return true
		}
	}
	return false
}

// TestHostile covers inputs a reader must refuse with a one-line error.
func TestHostile(t *testing.T) {
	s, b := allTypes(rand.New(rand.NewPCG(7, 8)), 10)
	good, err := WriteStream(s, []*Batch{b}, ZSTD)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string][]byte{
		"empty":     nil,
		"eos only":  {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0},
		"huge meta": {0xff, 0xff, 0xff, 0xff, 0xf0, 0xff, 0xff, 0x7f},
		"neg meta":  {0xff, 0xff, 0xff, 0xff, 0xf0, 0xff, 0xff, 0xff},
		"junk":      bytes.Repeat([]byte{0x41}, 64),
	}
	for name, data := range cases {
		_, err := ReadStream(data, nil)
		if err == nil {
			t.Errorf("%s: decoded", name)
		} else if strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: multi-line error %q", name, err)
		}
	}
	for _, f := range [][]byte{nil, []byte("ARROW1"), append([]byte("ARROW1\x00\x00\xff\xff\xff\x7f"), "ARROW1"...)} {
		if _, err := ReadFile(f, nil); err == nil {
			t.Errorf("file %q decoded", f)
		}
	}
	// A tiny budget refuses the compressed buffers.
	if _, err := ReadStream(good, &ReadOptions{MaxDecompressed: 16}); err == nil || !strings.Contains(err.Error(), "budget") {
		t.Errorf("budget of 16 bytes: %v", err)
	}
}

// TestZstdBomb: a buffer whose prefix claims more than the column needs is
// refused before decompression allocates it.
func TestZstdBomb(t *testing.T) {
	s := &Schema{Fields: []Field{{Name: "x", Type: TUint32}}}
	vals := make([]uint32, 1000)
	b := &Batch{Len: 1000, Columns: []*Array{FixedArray(TUint32, vals, nil)}}
	data, err := WriteFile(s, []*Batch{b}, ZSTD)
	if err != nil {
		t.Fatal(err)
	}
	// The values buffer's prefix is the first 4000 (0xa00f) in the body.
	i := bytes.Index(data, []byte{0xa0, 0x0f, 0, 0, 0, 0, 0, 0})
	if i < 0 {
		t.Fatal("no length prefix found")
	}
	data[i+6] = 0x10 // claims 2^52+4000 bytes
	if _, err := ReadFile(data, nil); err == nil || !strings.Contains(err.Error(), "needs") {
		t.Errorf("inflated prefix: %v", err)
	}
	_ = math.MaxInt
}
