package jsonl

import (
	"bytes"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/format/file"
)

func leaf(name string, k file.Kind, nullable bool) *file.Field {
	return &file.Field{Name: name, Type: file.DataType{Kind: k}, Nullable: nullable, Column: -1}
}

func nested(name string, t file.DataType, nullable bool, children ...*file.Field) *file.Field {
	return &file.Field{Name: name, Type: t, Nullable: nullable, Children: children, Column: -1}
}

// testFields has a field of every type the builder takes, nested ones
// included, a non-nullable struct child and names that need escaping.
func testFields() []*file.Field {
	ts := leaf("ts", file.KindTimestamp, true)
	ts.Type.Unit = "us"
	fb := leaf("fb", file.KindFixedSizeBinary, true)
	fb.Type.Size = 3
	return []*file.Field{
		leaf("b", file.KindBool, true),
		leaf("i8", file.KindInt8, true),
		leaf("i16", file.KindInt16, true),
		leaf("i32", file.KindInt32, true),
		leaf("i64", file.KindInt64, true),
		leaf("u8", file.KindUint8, true),
		leaf("u16", file.KindUint16, true),
		leaf("u32", file.KindUint32, true),
		leaf("u64", file.KindUint64, true),
		leaf("f32", file.KindFloat32, true),
		leaf("f64", file.KindFloat64, true),
		leaf("s", file.KindUtf8, true),
		leaf("lu", file.KindLargeUtf8, true),
		leaf("bin", file.KindBinary, true),
		leaf("lbin", file.KindLargeBinary, true),
		fb,
		leaf("d32", file.KindDate32, true),
		leaf("d64", file.KindDate64, true),
		leaf("t32", file.KindTime32, true),
		leaf("t64", file.KindTime64, true),
		leaf("dur", file.KindDuration, true),
		ts,
		nested("l", file.DataType{Kind: file.KindList}, true, leaf("item", file.KindInt32, true)),
		nested("ll", file.DataType{Kind: file.KindLargeList}, true, leaf("item", file.KindUtf8, false)),
		nested("fl", file.DataType{Kind: file.KindFixedSizeList, Size: 2}, true, leaf("item", file.KindFloat64, true)),
		nested("st", file.DataType{Kind: file.KindStruct}, true,
			leaf("a", file.KindInt64, true), leaf("b", file.KindUtf8, false), leaf("é", file.KindBool, true)),
		nested("ls", file.DataType{Kind: file.KindList}, true,
			nested("item", file.DataType{Kind: file.KindStruct}, true,
				leaf("x", file.KindBool, true),
				nested("y", file.DataType{Kind: file.KindList}, true, leaf("item", file.KindInt8, true)))),
		leaf(`k"q`, file.KindUtf8, true),
		leaf("\uFFFD", file.KindUtf8, true), // what a key of invalid UTF-8 decodes to
		leaf("nn", file.KindInt16, false),
	}
}

// seedLines are edge cases of the JSON grammar, of string decoding and of
// each column type's conventions, accepted and rejected.
var seedLines = []string{
	`{"nn":1}`,
	` {"nn" : 1 } ` + "\r\n",
	`{"nn":1,"b":true,"i8":-128,"i16":32767,"i32":-2147483648,"i64":9223372036854775807,"u8":255,"u16":65535,"u32":4294967295,"u64":18446744073709551615}`,
	`{"nn":1,"i8":128}`,
	`{"nn":1,"u8":-1}`,
	`{"nn":1,"u64":"18446744073709551615","i64":"-9223372036854775808"}`,
	`{"nn":1,"i64":"+5","u8":"007"}`,
	`{"nn":1,"i64":"\u0031\u0032"}`,
	`{"nn":1,"i64":1.0}`,
	`{"nn":1,"i64":1e3}`,
	`{"nn":1,"i64":-0}`,
	`{"nn":1,"u32":-0}`,
	`{"nn":1,"i64":" 1"}`,
	`{"nn":1,"i64":""}`,
	`{"nn":1,"i64":true}`,
	`{"nn":1,"i64":[1]}`,
	`{"nn":1,"f64":1.5e300,"f32":-0.25}`,
	`{"nn":1,"f64":1e400}`,
	`{"nn":1,"f32":1e39}`,
	`{"nn":1,"f64":1e-400}`,
	`{"nn":1,"f64":"NaN","f32":"-Infinity"}`,
	`{"nn":1,"f64":"Infinity"}`,
	`{"nn":1,"f64":"nan"}`,
	`{"nn":1,"f64":"1.5"}`,
	`{"nn":1,"f64":"\u004eaN"}`,
	`{"nn":1,"f64":true}`,
	`{"nn":1,"b":false}`,
	`{"nn":1,"b":"true"}`,
	`{"nn":1,"b":1}`,
	`{"nn":1,"s":"plain","lu":""}`,
	`{"nn":1,"s":"a\"b\\c\/d\be\ff\ng\rh\ti"}`,
	`{"nn":1,"s":"\u00e9\u4e2d\uD83D\uDE00"}`,
	`{"nn":1,"s":"\uD83D"}`,
	`{"nn":1,"s":"\uDE00\uD83D"}`,
	`{"nn":1,"s":"\uD83D\u0041"}`,
	`{"nn":1,"s":"\uD83Dx"}`,
	`{"nn":1,"s":"\uD83D\uD83D\uDE00"}`,
	`{"nn":1,"s":"\uD83D\\uDE00"}`,
	`{"nn":1,"s":"é中😀"}`,
	"{\"nn\":1,\"s\":\"\xff\xfe bad \xc3\"}",
	"{\"nn\":1,\"s\":\"\xed\xa0\x80 surrogate in UTF-8\"}",
	"{\"nn\":1,\"s\":\"tab\tinside\"}",
	`{"nn":1,"s":"\x"}`,
	`{"nn":1,"s":"\u12"}`,
	`{"nn":1,"s":"\u12G4"}`,
	`{"nn":1,"s":"\'"}`,
	`{"nn":1,"s":1}`,
	`{"nn":1,"s":null}`,
	`{"nn":1,"bin":"aGVsbG8=","lbin":"","fb":"AQID"}`,
	`{"nn":1,"bin":"aGVsbG8"}`,
	`{"nn":1,"bin":"aGVs\nbG8="}`,
	`{"nn":1,"bin":"aGVs\r\nbG8="}`,
	`{"nn":1,"fb":"AQIDBA=="}`,
	`{"nn":1,"fb":"AQ=="}`,
	`{"nn":1,"bin":5}`,
	`{"nn":1,"d32":19000,"d64":-1,"t32":1000,"t64":5,"dur":-7,"ts":1700000000000000}`,
	`{"nn":1,"d64":106751991167301}`,
	`{"nn":1,"d64":106751991167300}`,
	`{"nn":1,"d32":2147483648}`,
	`{"nn":1,"l":[1,null,3],"ll":["a","b"],"fl":[1.5,null]}`,
	`{"nn":1,"l":[ ],"ll":[],"fl":null}`,
	`{"nn":1,"l":[ 1 , 2 ]}`,
	`{"nn":1,"l":[1,"x"]}`,
	`{"nn":1,"l":{"a":1}}`,
	`{"nn":1,"ll":[null]}`,
	`{"nn":1,"fl":[1]}`,
	`{"nn":1,"fl":[1,2,3]}`,
	`{"nn":1,"fl":[1,"x",3]}`,
	`{"nn":1,"st":{"a":1,"b":"x","é":true}}`,
	`{"nn":1,"st":{"b":"x","\u00e9":false}}`,
	`{"nn":1,"st":{"a":1}}`,
	`{"nn":1,"st":{}}`,
	`{"nn":1,"st":{"b":"x","zz":1}}`,
	`{"nn":1,"st":{"b":"x","b":null}}`,
	`{"nn":1,"st":{"b":null,"b":"x"}}`,
	`{"nn":1,"st":[1]}`,
	`{"nn":1,"st":null}`,
	`{"nn":1,"ls":[{"x":true,"y":[1,2]},null,{"y":null},{}]}`,
	`{"nn":1,"ls":[{"y":[1,200]}]}`,
	`{"nn":1,"ls":[{"y":[1,2],"z":0}]}`,
	`{"nn":1,"k\"q":"quoted key"}`,
	`{"nn":1,"k\u0022q":"escaped key"}`,
	`{"\u006en":1}`,
	`{"nn":1,"nn":2}`,
	`{"nn":null,"nn":2}`,
	`{"nn":1,"nn":null}`,
	`{"nn":1,"s":"a","s":"b"}`,
	`{"nn":1,"zz":1}`,
	`{"":1,"nn":1}`,
	`{"nn":1,"st":{"":1,"b":"x"}}`,
	`{"nn":1,"zz":1,"yy":2}`,
	`{"nn":1,"zz":[}`,
	`{"nn":1,"i8":999,"zz":1}`,
	`{"i8":999}`,
	`{"nn":null}`,
	`{}`,
	``,
	"   \t\r\n",
	`null`,
	` null `,
	`null x`,
	`nullx`,
	`null}`,
	`nul`,
	`[1]`,
	`[1] x`,
	`[1,`,
	`"x"`,
	`1`,
	`true`,
	`-`,
	`{"nn":1}x`,
	`{"nn":1} {"nn":2}`,
	`{"nn":1}}`,
	`{"nn":1} ]`,
	`{"nn":1}]}x`,
	`{"nn":1`,
	`{"nn":1,}`,
	`{"nn":1,,"b":true}`,
	`{"nn" 1}`,
	`{nn:1}`,
	`{'nn':1}`,
	`{"nn":01}`,
	`{"nn":1.}`,
	`{"nn":.5}`,
	`{"nn":+1}`,
	`{"nn":1e}`,
	`{"nn":1e+}`,
	`{"nn":-}`,
	`{"nn":1true}`,
	`{"nn":tru}`,
	`{"nn":truex}`,
	`{"nn":nulL}`,
	`{"nn":1,"s":"unterminated}`,
	"{\"nn\":1,\"s\":\"nul\x00\"}",
	"{\"nn\":1}\x00",
	"\xef\xbb\xbf{\"nn\":1}",
	"{\"nn\":1,\xff:1}",
	"{\"nn\":1,\"\xff\":\"invalid UTF-8 key\"}",
	"{\"nn\":1,\"\xfe\xff\":\"two bytes\"}",
	"\v{\"nn\":1}",
	"{\"nn\":1}\f",
	`{"nn":[[[[[[[[[[]]]]]]]]]]}`,
	`{"nn":{"a":{"b":[{"c":null}]}}}`,
	`{"nn":"1"}`,
	`{"nn":"١"}`,
}

// normalizeErr leaves out what the two implementations may word apart:
// encoding/json's syntax messages, and which unknown key of several is
// named (a map's iteration order picked it).
var (
	reNotObject = regexp.MustCompile(`not a JSON object.*$`)
	reUnknown   = regexp.MustCompile(`unknown (column|struct field) .*$`)
)

func normalizeErr(err error) string {
	if err == nil {
		return "<nil>"
	}
	s := reNotObject.ReplaceAllString(err.Error(), "not a JSON object")
	return reUnknown.ReplaceAllString(s, "unknown $1")
}

// firstRow is a row of testFields added before the line checked, so that
// the line's values land after others in each column.
var firstRow = []byte(`{"nn":7,"s":"first","l":[9],"st":{"b":"x"},"b":true}`)

// checkLine adds first (unless nil) and then line to the new builder and
// to the reference, and fails unless both accept or both reject line
// (with the same error up to normalizeErr) and, accepted, build identical
// columns.
func checkLine(t testing.TB, fields []*file.Field, first, line []byte) {
	t.Helper()
	nb, err := NewBuilder(fields)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := newRefBuilder(fields)
	if err != nil {
		t.Fatal(err)
	}
	if first != nil {
		if err := nb.AddLine(first); err != nil {
			t.Fatalf("first row: %v", err)
		}
		if err := rb.AddLine(first); err != nil {
			t.Fatalf("first row (reference): %v", err)
		}
	}
	nerr := nb.AddLine(bytes.Clone(line))
	rerr := rb.AddLine(bytes.Clone(line))
	if (nerr == nil) != (rerr == nil) || normalizeErr(nerr) != normalizeErr(rerr) {
		t.Fatalf("line %s:\n  scanner:       %.300v\n  encoding/json: %.300v", short(line), nerr, rerr)
	}
	if nerr != nil {
		if strings.HasPrefix(nerr.Error(), "not a JSON object") && !strings.HasPrefix(rerr.Error(), "not a JSON object") {
			t.Fatalf("line %s: %v vs %v", short(line), nerr, rerr)
		}
		return
	}
	if nb.Rows() != rb.Rows() {
		t.Fatalf("line %s: %d rows, reference %d", short(line), nb.Rows(), rb.Rows())
	}
	if got, want := nb.Flush(), rb.Flush(); !reflect.DeepEqual(got, want) {
		t.Fatalf("line %s: columns differ\n  scanner:       %s\n  encoding/json: %s", short(line), dumpBatch(got), dumpBatch(want))
	}
}

// short quotes line, cut to 200 bytes.
func short(line []byte) string {
	if len(line) > 200 {
		return fmt.Sprintf("%q... (%d bytes)", line[:200], len(line))
	}
	return fmt.Sprintf("%q", line)
}

func dumpBatch(b *file.Batch) string {
	var sb strings.Builder
	var dump func(a *file.Array)
	dump = func(a *file.Array) {
		fmt.Fprintf(&sb, "%s{len %d valid %x values %x offsets %v", a.Name, a.Len, a.Valid, a.Values, a.Offsets)
		for _, ch := range a.Children {
			sb.WriteString(" ")
			dump(ch)
		}
		sb.WriteString("} ")
	}
	for _, a := range b.Columns {
		dump(a)
	}
	return sb.String()
}

// TestAddLineMatchesEncodingJSON runs the seed lines through the scanner
// and through the encoding/json decoder it replaced.
func TestAddLineMatchesEncodingJSON(t *testing.T) {
	fields := testFields()
	for _, l := range seedLines {
		checkLine(t, fields, firstRow, []byte(l))
	}
	// Each seed also with its last byte cut off and with a newline.
	for _, l := range seedLines {
		if len(l) > 0 {
			checkLine(t, fields, firstRow, []byte(l[:len(l)-1]))
		}
		checkLine(t, fields, firstRow, []byte(l+"\n"))
	}
}

// TestAddLineMatchesEncodingJSONDepth: encoding/json rejects a line
// nesting more than 10 000 objects and arrays; so must the scanner, at
// the same depth (the unknown key is reported only for a line it accepts).
func TestAddLineMatchesEncodingJSONDepth(t *testing.T) {
	fields := testFields()
	for _, d := range []int{9999, 10000} {
		line := `{"zz":` + strings.Repeat("[", d) + strings.Repeat("]", d) + `}`
		checkLine(t, fields, firstRow, []byte(line))
		nb, _ := NewBuilder(fields)
		err := nb.AddLine([]byte(line))
		want := "unknown column"
		if d == 10000 {
			want = "not a JSON object"
		}
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Fatalf("depth %d: %v, want %s", d+1, err, want)
		}
	}
}

// TestAddLineMatchesEncodingJSONDuplicateFields: a schema naming a field
// twice reads the one key into both, as the map lookup did.
func TestAddLineMatchesEncodingJSONDuplicateFields(t *testing.T) {
	fields := []*file.Field{leaf("nn", file.KindInt16, false), leaf("x", file.KindInt64, true), leaf("x", file.KindUtf8, true),
		nested("st", file.DataType{Kind: file.KindStruct}, true, leaf("a", file.KindInt64, true), leaf("a", file.KindInt8, true))}
	for _, l := range []string{`{"nn":1,"x":5}`, `{"nn":1,"x":"5"}`, `{"nn":1}`, `{"nn":1,"st":{"a":3}}`, `{"nn":1,"st":{"a":300}}`} {
		checkLine(t, fields, nil, []byte(l))
	}
}

// TestAddLineValues pins values and messages that matter to users of
// `table append`, independently of the reference.
func TestAddLineValues(t *testing.T) {
	fields := testFields()
	b, err := NewBuilder(fields)
	if err != nil {
		t.Fatal(err)
	}
	lines := []string{
		`{"nn":1,"s":"\uD83D\uDE00 \u00e9\n","i64":"-12","k\u0022q":"v"}`,
		"{\"nn\":2,\"s\":\"a\xffb\",\"nn\":3}",
		`{"nn":4,"s":"\uDE00x"}`,
	}
	for _, l := range lines {
		if err := b.AddLine([]byte(l)); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
	}
	batch := b.Flush()
	col := func(name string) *file.Array {
		for i, f := range batch.Fields {
			if f.Name == name {
				return batch.Columns[i]
			}
		}
		t.Fatalf("no column %s", name)
		return nil
	}
	s := col("s")
	if got, want := string(s.Values), "😀 é\na\uFFFDb\uFFFDx"; got != want {
		t.Fatalf("strings %q, want %q", got, want)
	}
	if got := s.Offsets; !reflect.DeepEqual(got, []int64{0, 8, 13, 17}) {
		t.Fatalf("string offsets %v", got)
	}
	if nn := col("nn").Values; nn[2] != 3 || nn[4] != 4 {
		t.Fatalf("the last of a repeated key wins: %v", nn)
	}
	if q := col(`k"q`); string(q.Values) != "v" {
		t.Fatalf(`escaped key: %q`, q.Values)
	}
	for _, tc := range []struct{ line, want string }{
		{`{"nn":1,"zz":2}`, `unknown column "zz"`},
		{`{"nn":null}`, `column "nn": null in a non-nullable field`},
		{`{}`, `column "nn": null in a non-nullable field`},
		{`{"nn":1.5}`, `column "nn": 1.5 is not a 16-bit integer`},
		{`{"nn":1,"st":{"b":"x","q":1}}`, `column "st": unknown struct field "q"`},
		{`{"nn":1,"l":[1,"x"]}`, `column "l": item 1: "x" is not a 32-bit integer`},
		{`{"nn":1} {"nn":2}`, `more than one JSON value on the line`},
		{`null`, `not a JSON object: null`},
		{`[1]`, `not a JSON object: an array`},
		{`{"nn":1`, `not a JSON object: unexpected end of line at byte 7`},
		{`{"nn":1,}`, `not a JSON object: invalid character '}' looking for beginning of object key string at byte 8`},
		{"{\"nn\":\"a\x01\"}", `not a JSON object: invalid character '\x01' in string literal at byte 8`},
	} {
		b, _ := NewBuilder(fields)
		err := b.AddLine([]byte(tc.line))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: %v, want %s", tc.line, err, tc.want)
		}
	}
}

// TestAddLineTrailingCloseBracket: stray '}' or ']' after the object,
// which json.Decoder.More let through, are an error like any other text
// after it.
func TestAddLineTrailingCloseBracket(t *testing.T) {
	for _, l := range []string{`{"nn":1}}`, `{"nn":1} ]`, `{"nn":1}}x`, `{"nn":1} x}`} {
		b, _ := NewBuilder(testFields())
		if err := b.AddLine([]byte(l)); err != errMore {
			t.Errorf("%s: %v, want %v", l, err, errMore)
		}
	}
	b, _ := NewBuilder(testFields())
	if err := b.AddLine([]byte("{\"nn\":1} \t\r")); err != nil {
		t.Errorf("trailing white space: %v", err)
	}
}

// FuzzAddLine requires the scanner and the encoding/json decoder it
// replaced to accept and reject the same lines, with the same errors up
// to normalizeErr and the same columns.
func FuzzAddLine(f *testing.F) {
	for _, l := range seedLines {
		f.Add([]byte(l))
	}
	fields := testFields()
	f.Fuzz(func(t *testing.T, line []byte) {
		checkLine(t, fields, firstRow, line)
	})
}

// benchLines are rows like the append benchmark's (docs/benchmarks.md,
// "table append into a growing table").
func benchLines(n int) ([]*file.Field, [][]byte) {
	ts := leaf("at", file.KindTimestamp, true)
	ts.Type.Unit = "us"
	fields := []*file.Field{leaf("id", file.KindInt64, false), leaf("cat", file.KindUtf8, true), leaf("val", file.KindFloat64, true), ts}
	lines := make([][]byte, n)
	for i := range lines {
		lines[i] = fmt.Appendf(nil, `{"id":%d,"cat":"c%d","val":%d.25,"at":%d}`+"\n", i, i%97, i, 1_700_000_000_000_000+int64(i))
	}
	return fields, lines
}

// TestAddLineAllocs: a row of ints, floats, bools, strings (escaped ones
// too) and timestamps allocates nothing beyond the columns' amortised
// growth.
func TestAddLineAllocs(t *testing.T) {
	fields, _ := benchLines(0)
	fields = append(fields, leaf("ok", file.KindBool, true), leaf("n", file.KindUint8, true))
	b, err := NewBuilder(fields)
	if err != nil {
		t.Fatal(err)
	}
	lines := [][]byte{
		[]byte(`{"id":1,"cat":"c1","val":1.25,"at":1700000000000000,"ok":true,"n":"7"}` + "\n"),
		[]byte(`{ "at" : 5, "val" : "NaN", "cat" : "tab\tand \u00e9", "id" : "-3", "ok":null }`),
	}
	i := 0
	allocs := testing.AllocsPerRun(2000, func() {
		if err := b.AddLine(lines[i%2]); err != nil {
			t.Fatal(err)
		}
		i++
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per row", allocs)
	}
}

// BenchmarkAddLine is the cost per row of the scanner and, for
// comparison, of the encoding/json decoder it replaced. Flushes every
// 64 Ki rows as `table append` batches.
//
//	go test ./internal/format/jsonl -run '^$' -bench BenchmarkAddLine -benchmem
func BenchmarkAddLine(b *testing.B) {
	fields, lines := benchLines(1 << 16)
	type adder interface {
		AddLine([]byte) error
		Rows() int
	}
	run := func(b *testing.B, a adder, flush func()) {
		b.ReportAllocs()
		var n int64
		for _, l := range lines {
			n += int64(len(l))
		}
		b.SetBytes(n / int64(len(lines)))
		i := 0
		for b.Loop() {
			if err := a.AddLine(lines[i]); err != nil {
				b.Fatal(err)
			}
			if i++; i == len(lines) {
				flush()
				i = 0
			}
		}
	}
	b.Run("scanner", func(b *testing.B) {
		nb, err := NewBuilder(fields)
		if err != nil {
			b.Fatal(err)
		}
		run(b, nb, func() { nb.Flush() })
	})
	b.Run("encoding-json", func(b *testing.B) {
		rb, err := newRefBuilder(fields)
		if err != nil {
			b.Fatal(err)
		}
		run(b, rb, func() { rb.Flush() })
	})
}
