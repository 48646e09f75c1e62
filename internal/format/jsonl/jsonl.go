// Package jsonl parses JSON lines against a Lance schema into file.Arrays,
// with the value conventions `table scan` prints (so its output appends
// back): integers exact (numbers, or decimal strings), floats as numbers or
// "NaN"/"Infinity"/"-Infinity", strings, binaries as base64, dates as days,
// timestamps, times and durations as integers in the column's unit, lists
// and fixed-size lists as arrays, structs as objects, null or a missing
// key for null.
package jsonl

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unsafe"

	"github.com/compactord/compactord/internal/format/file"
)

// Builder accumulates rows of the top-level fields.
type Builder struct {
	fields []*file.Field
	cols   []*column
	index  map[string]int
	// slot is the vals entry of each field: the last field of its name
	// (a duplicate name reads the same key, as a map lookup would).
	slot []int
	rows int
	// Per line: each slot's value, nil when the key is missing.
	vals [][]byte
	key  []byte // a key with escapes, decoded
}

// NewBuilder starts an empty batch of the given top-level fields.
func NewBuilder(fields []*file.Field) (*Builder, error) {
	b := &Builder{fields: fields, index: map[string]int{}}
	for i, f := range fields {
		c, err := newColumn(f)
		if err != nil {
			return nil, err
		}
		b.cols = append(b.cols, c)
		b.index[f.Name] = i
	}
	for _, f := range fields {
		b.slot = append(b.slot, b.index[f.Name])
	}
	b.vals = make([][]byte, len(fields))
	return b, nil
}

// Rows is the number of rows added since the last Flush.
func (b *Builder) Rows() int { return b.rows }

// Bytes estimates the memory the buffered rows hold.
func (b *Builder) Bytes() int {
	n := 0
	for _, c := range b.cols {
		n += c.size()
	}
	return n
}

// AddLine parses one JSON object and adds it as a row. After an error the
// builder may hold part of the line: callers stop at the first error.
//
// One pass over the line checks its syntax and notes where each key's
// value is (the last one of a repeated key wins); then each column parses
// its value's bytes. What it accepts and rejects, and in which order the
// errors come, is what decoding the line with encoding/json into a
// map[string]json.RawMessage did: a syntax error anywhere first, then a
// second value on the line, then a null line, then an unknown key, then
// the columns' values in schema order.
func (b *Builder) AddLine(line []byte) error {
	clear(b.vals)
	i := skipSpace(line, 0)
	if i >= len(line) {
		return fmt.Errorf("not a JSON object: empty line")
	}
	if line[i] != '{' {
		end, err := scanValue(line, i, 0)
		switch {
		case err != nil:
			return fmt.Errorf("not a JSON object: %v", err)
		case line[i] != 'n':
			return fmt.Errorf("not a JSON object: %s", describe(line[i]))
		case more(line, end):
			return errMore
		}
		return fmt.Errorf("not a JSON object: null")
	}
	end, unknown, err := b.scanRow(line, i)
	if err != nil {
		return fmt.Errorf("not a JSON object: %v", err)
	}
	if more(line, end) {
		return errMore
	}
	if unknown != nil {
		return fmt.Errorf("unknown column %q", *unknown)
	}
	for i, c := range b.cols {
		if err := c.add(b.vals[b.slot[i]]); err != nil {
			return fmt.Errorf("column %q: %v", b.fields[i].Name, err)
		}
	}
	b.rows++
	return nil
}

// Flush returns the buffered rows as arrays (one per field) and starts a
// new batch.
func (b *Builder) Flush() *file.Batch {
	out := &file.Batch{NumRows: b.rows, Fields: b.fields, Columns: make([]*file.Array, len(b.cols))}
	for i, c := range b.cols {
		out.Columns[i] = c.finish()
	}
	b.rows = 0
	return out
}

var errMore = errors.New("more than one JSON value on the line")

// more reports anything but white space after the object that ends at
// end: a second value, or stray characters such as a closing bracket
// (which json.Decoder.More let through).
func more(line []byte, end int) bool {
	return skipSpace(line, end) < len(line)
}

// describe names the JSON value that starts with c.
func describe(c byte) string {
	switch c {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	}
	return "a number"
}

// scanRow checks the object at line[i] and notes each known key's value
// in b.vals. It returns the end of the object and the first unknown key
// (nil if none).
func (b *Builder) scanRow(line []byte, i int) (int, *string, error) {
	var unknown *string
	next := 0 // keys usually come in schema order
	i = skipSpace(line, i+1)
	if i < len(line) && line[i] == '}' {
		return i + 1, nil, nil
	}
	for {
		if i >= len(line) || line[i] != '"' {
			return i, nil, errAt(line, i, "looking for beginning of object key string")
		}
		ks := i
		ke, special, err := scanString(line, i)
		if err != nil {
			return ke, nil, err
		}
		key := line[ks+1 : ke-1]
		if special && !plainString(key) {
			b.key = appendUnquoted(b.key[:0], key)
			key = b.key
		}
		f := -1
		if next < len(b.fields) && string(key) == b.fields[next].Name && b.slot[next] == next {
			f = next
		} else if j, ok := b.index[string(key)]; ok {
			f = j
		} else if unknown == nil {
			k := string(key)
			unknown = &k
		}
		if i = skipSpace(line, ke); i >= len(line) || line[i] != ':' {
			return i, nil, errAt(line, i, "after object key")
		}
		vs := skipSpace(line, i+1)
		ve, err := scanValue(line, vs, 1)
		if err != nil {
			return ve, nil, err
		}
		if f >= 0 {
			b.vals[f] = line[vs:ve:ve]
			next = f + 1
		}
		if i = skipSpace(line, ve); i < len(line) && line[i] == ',' {
			i = skipSpace(line, i+1)
			continue
		}
		if i < len(line) && line[i] == '}' {
			return i + 1, unknown, nil
		}
		return i, nil, errAt(line, i, "after object key:value pair")
	}
}

type column struct {
	f        *file.Field
	t        file.DataType
	n        int
	valid    []byte
	nulls    int
	values   []byte
	offsets  []int64
	children []*column
	// Scratch reused value to value: a decoded string; a list's items; a
	// struct's member values (by child slot) and a decoded key.
	text  []byte
	items [][]byte
	slot  []int
	vals  [][]byte
	key   []byte
}

func newColumn(f *file.Field) (*column, error) {
	c := &column{f: f, t: f.Type}
	switch f.Type.Kind {
	case file.KindDecimal128, file.KindDecimal256, file.KindFloat16, file.KindNull:
		return nil, fmt.Errorf("field %q: appending %s values is not supported", f.Name, f.Type)
	case file.KindList, file.KindLargeList, file.KindFixedSizeList, file.KindStruct:
		for _, ch := range f.Children {
			cc, err := newColumn(ch)
			if err != nil {
				return nil, err
			}
			c.children = append(c.children, cc)
		}
	}
	if f.Type.IsVariable() || f.Type.Kind == file.KindList || f.Type.Kind == file.KindLargeList {
		c.offsets = []int64{0}
	}
	return c, nil
}

func (c *column) size() int {
	n := len(c.values) + 8*len(c.offsets) + len(c.valid)
	for _, ch := range c.children {
		n += ch.size()
	}
	return n
}

func (c *column) setValid(ok bool) {
	if c.n>>3 >= len(c.valid) {
		c.valid = append(c.valid, 0)
	}
	if ok {
		c.valid[c.n>>3] |= 1 << (c.n & 7)
	} else {
		c.nulls++
	}
	c.n++
}

// addNull adds a null slot (zero bytes, empty ranges, null children for
// fixed-size lists and structs).
func (c *column) addNull() {
	switch c.t.Kind {
	case file.KindBool:
		if c.n>>3 >= len(c.values) {
			c.values = append(c.values, 0)
		}
	case file.KindList, file.KindLargeList:
		c.offsets = append(c.offsets, c.offsets[len(c.offsets)-1])
	case file.KindFixedSizeList:
		for k := 0; k < c.t.Size; k++ {
			c.children[0].addNull()
		}
	case file.KindStruct:
		for _, ch := range c.children {
			ch.addNull()
		}
	default:
		if c.t.IsVariable() {
			c.offsets = append(c.offsets, int64(len(c.values)))
		} else {
			c.values = append(c.values, make([]byte, c.t.ByteWidth())...)
		}
	}
	c.setValid(false)
}

// add adds one value: v is its JSON text as the scanner checked it, nil
// for a missing key.
func (c *column) add(v []byte) error {
	if len(v) == 0 || string(v) == "null" {
		if !c.f.Nullable {
			return fmt.Errorf("null in a non-nullable field")
		}
		c.addNull()
		return nil
	}
	if err := c.addValue(v); err != nil {
		return err
	}
	c.setValid(true)
	return nil
}

func (c *column) addValue(raw []byte) error {
	t := c.t
	switch t.Kind {
	case file.KindBool:
		var v bool
		switch string(raw) {
		case "true":
			v = true
		case "false":
		default:
			return fmt.Errorf("%s is not a boolean", raw)
		}
		if c.n>>3 >= len(c.values) {
			c.values = append(c.values, 0)
		}
		if v {
			c.values[c.n>>3] |= 1 << (c.n & 7)
		}
	case file.KindInt8, file.KindInt16, file.KindInt32, file.KindInt64, file.KindDate32, file.KindTime32, file.KindTime64, file.KindTimestamp, file.KindDuration:
		bits := 8 * t.ByteWidth()
		v, err := strconv.ParseInt(c.numberText(raw), 10, bits)
		if err != nil {
			return fmt.Errorf("%s is not a %d-bit integer", raw, bits)
		}
		c.putInt(uint64(v))
	case file.KindDate64:
		v, err := strconv.ParseInt(c.numberText(raw), 10, 64)
		if err != nil || v > math.MaxInt64/86_400_000 || v < math.MinInt64/86_400_000 {
			return fmt.Errorf("%s is not a date (days since 1970-01-01)", raw)
		}
		c.putInt(uint64(v * 86_400_000))
	case file.KindUint8, file.KindUint16, file.KindUint32, file.KindUint64:
		bits := 8 * t.ByteWidth()
		v, err := strconv.ParseUint(c.numberText(raw), 10, bits)
		if err != nil {
			return fmt.Errorf("%s is not an unsigned %d-bit integer", raw, bits)
		}
		c.putInt(v)
	case file.KindFloat32, file.KindFloat64:
		f, err := c.parseFloat(raw, 8*t.ByteWidth())
		if err != nil {
			return err
		}
		if t.Kind == file.KindFloat32 {
			c.values = binary.LittleEndian.AppendUint32(c.values, math.Float32bits(float32(f)))
		} else {
			c.values = binary.LittleEndian.AppendUint64(c.values, math.Float64bits(f))
		}
	case file.KindUtf8, file.KindLargeUtf8:
		if raw[0] != '"' {
			return fmt.Errorf("%s is not a string", raw)
		}
		c.values = appendUnquoted(c.values, raw[1:len(raw)-1])
		c.offsets = append(c.offsets, int64(len(c.values)))
	case file.KindBinary, file.KindLargeBinary, file.KindFixedSizeBinary:
		if raw[0] != '"' {
			return fmt.Errorf("%s is not a base64 string", raw)
		}
		s := c.unquote(raw)
		at := len(c.values)
		c.values = slices.Grow(c.values, base64.StdEncoding.DecodedLen(len(s)))
		n, err := base64.StdEncoding.Decode(c.values[at:at+base64.StdEncoding.DecodedLen(len(s))], s)
		if err != nil {
			c.values = c.values[:at]
			return fmt.Errorf("%s is not base64: %v", raw, err)
		}
		c.values = c.values[:at+n]
		if t.Kind == file.KindFixedSizeBinary {
			if n != t.Size {
				c.values = c.values[:at]
				return fmt.Errorf("%d bytes for a %d-byte fixed-size binary", n, t.Size)
			}
			break
		}
		c.offsets = append(c.offsets, int64(len(c.values)))
	case file.KindList, file.KindLargeList, file.KindFixedSizeList:
		if raw[0] != '[' {
			return fmt.Errorf("%s is not an array", raw)
		}
		items, err := appendItems(c.items[:0], raw)
		c.items = items
		if err != nil {
			return fmt.Errorf("%s is not an array: %v", raw, err)
		}
		if t.Kind == file.KindFixedSizeList && len(items) != t.Size {
			return fmt.Errorf("%d items for a fixed-size list of %d", len(items), t.Size)
		}
		for k, it := range items {
			if err := c.children[0].add(it); err != nil {
				return fmt.Errorf("item %d: %v", k, err)
			}
		}
		if t.Kind != file.KindFixedSizeList {
			c.offsets = append(c.offsets, int64(c.children[0].n))
		}
	case file.KindStruct:
		if raw[0] != '{' {
			return fmt.Errorf("%s is not an object", raw)
		}
		unknown, err := c.scanMembers(raw)
		if err != nil {
			return fmt.Errorf("%s is not an object: %v", raw, err)
		}
		if unknown != nil {
			return fmt.Errorf("unknown struct field %q", *unknown)
		}
		for k, ch := range c.children {
			if err := ch.add(c.vals[c.slot[k]]); err != nil {
				return fmt.Errorf("field %q: %v", ch.f.Name, err)
			}
		}
	default:
		return fmt.Errorf("values of type %s are not supported", t)
	}
	return nil
}

// appendItems appends the items of the array raw to items.
func appendItems(items [][]byte, raw []byte) ([][]byte, error) {
	i := skipSpace(raw, 1)
	if i < len(raw) && raw[i] == ']' {
		return items, nil
	}
	for {
		end, err := scanValue(raw, i, 0)
		if err != nil {
			return items, err
		}
		items = append(items, raw[i:end:end])
		if i = skipSpace(raw, end); i < len(raw) && raw[i] == ',' {
			i = skipSpace(raw, i+1)
			continue
		}
		if i < len(raw) && raw[i] == ']' {
			return items, nil
		}
		return items, errAt(raw, i, "after array element")
	}
}

// scanMembers notes the values of the object raw in c.vals by child
// slot, the last of a repeated key winning, and returns the first key no
// child has (nil if none).
func (c *column) scanMembers(raw []byte) (*string, error) {
	if c.vals == nil {
		c.vals = make([][]byte, len(c.children))
		for _, ch := range c.children {
			c.slot = append(c.slot, slices.IndexFunc(c.children, func(o *column) bool { return o.f.Name == ch.f.Name }))
		}
	}
	clear(c.vals)
	var unknown *string
	i := skipSpace(raw, 1)
	if i < len(raw) && raw[i] == '}' {
		return nil, nil
	}
	for {
		if i >= len(raw) || raw[i] != '"' {
			return nil, errAt(raw, i, "looking for beginning of object key string")
		}
		ke, special, err := scanString(raw, i)
		if err != nil {
			return nil, err
		}
		key := raw[i+1 : ke-1]
		if special && !plainString(key) {
			c.key = appendUnquoted(c.key[:0], key)
			key = c.key
		}
		f := -1
		for k, ch := range c.children {
			if ch.f.Name == string(key) {
				f = k
				break
			}
		}
		if f < 0 && unknown == nil {
			k := string(key)
			unknown = &k
		}
		if i = skipSpace(raw, ke); i >= len(raw) || raw[i] != ':' {
			return nil, errAt(raw, i, "after object key")
		}
		vs := skipSpace(raw, i+1)
		ve, err := scanValue(raw, vs, 0)
		if err != nil {
			return nil, err
		}
		if f >= 0 {
			c.vals[f] = raw[vs:ve:ve]
		}
		if i = skipSpace(raw, ve); i < len(raw) && raw[i] == ',' {
			i = skipSpace(raw, i+1)
			continue
		}
		if i < len(raw) && raw[i] == '}' {
			return unknown, nil
		}
		return nil, errAt(raw, i, "after object key:value pair")
	}
}

func (c *column) putInt(v uint64) {
	switch c.t.ByteWidth() {
	case 1:
		c.values = append(c.values, byte(v))
	case 2:
		c.values = binary.LittleEndian.AppendUint16(c.values, uint16(v))
	case 4:
		c.values = binary.LittleEndian.AppendUint32(c.values, uint32(v))
	default:
		c.values = binary.LittleEndian.AppendUint64(c.values, v)
	}
}

// unquote is the decoded content of the JSON string raw, in c.text when
// it has escapes or bytes to coerce.
func (c *column) unquote(raw []byte) []byte {
	s := raw[1 : len(raw)-1]
	if plainString(s) {
		return s
	}
	c.text = appendUnquoted(c.text[:0], s)
	return c.text
}

// numberText is a JSON number's text, or a JSON string's content (64-bit
// integers are often quoted to survive JavaScript). It aliases raw or
// c.text: strconv, which copies what it keeps, may read it.
func (c *column) numberText(raw []byte) string {
	s := raw
	if raw[0] == '"' {
		s = c.unquote(raw)
	}
	return unsafe.String(unsafe.SliceData(s), len(s))
}

func (c *column) parseFloat(raw []byte, bits int) (float64, error) {
	s := c.numberText(raw)
	if raw[0] == '"' {
		switch s {
		case "NaN":
			return math.NaN(), nil
		case "Infinity":
			return math.Inf(1), nil
		case "-Infinity":
			return math.Inf(-1), nil
		}
		return 0, fmt.Errorf("%s is not a number", raw)
	}
	f, err := strconv.ParseFloat(s, bits)
	if err != nil {
		return 0, fmt.Errorf("%s is not a %d-bit float", raw, bits)
	}
	return f, nil
}

// finish returns the column's array and resets the column.
func (c *column) finish() *file.Array {
	a := &file.Array{Type: c.t, Name: c.f.Name, Len: c.n, Values: aligned(c.values), Offsets: c.offsets}
	if c.nulls > 0 {
		a.Valid = c.valid
	}
	if c.t.Kind == file.KindBool && len(a.Values) < (c.n+7)/8 {
		a.Values = append(a.Values, make([]byte, (c.n+7)/8-len(a.Values))...)
	}
	for _, ch := range c.children {
		a.Children = append(a.Children, ch.finish())
	}
	c.n, c.nulls, c.valid, c.values = 0, 0, nil, nil
	if c.offsets != nil {
		c.offsets = []int64{0}
	}
	return a
}

// aligned copies b into 8-byte-aligned memory (typed views need it).
func aligned(b []byte) []byte {
	if len(b) == 0 {
		return []byte{}
	}
	w := make([]uint64, (len(b)+7)/8)
	out := unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), len(w)*8)[:len(b)]
	copy(out, b)
	return out
}
