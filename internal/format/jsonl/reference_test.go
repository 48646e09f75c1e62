package jsonl

// refBuilder is the row decoder Builder replaced, kept verbatim as the
// reference the scanner must agree with: encoding/json into a
// map[string]json.RawMessage per row, then each value decoded again.
// The differential test and the fuzzer run every line through both.

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/compactord/compactord/internal/format/file"
)

// refBuilder accumulates rows of the top-level fields.
type refBuilder struct {
	fields []*file.Field
	cols   []*refColumn
	index  map[string]int
	rows   int
}

// newRefBuilder starts an empty batch of the given top-level fields.
func newRefBuilder(fields []*file.Field) (*refBuilder, error) {
	b := &refBuilder{fields: fields, index: map[string]int{}}
	for i, f := range fields {
		c, err := newRefColumn(f)
		if err != nil {
			return nil, err
		}
		b.cols = append(b.cols, c)
		b.index[f.Name] = i
	}
	return b, nil
}

// Rows is the number of rows added since the last Flush.
func (b *refBuilder) Rows() int { return b.rows }

// Bytes estimates the memory the buffered rows hold.
func (b *refBuilder) Bytes() int {
	n := 0
	for _, c := range b.cols {
		n += c.size()
	}
	return n
}

// AddLine parses one JSON object and adds it as a row. After an error the
// builder may hold part of the line: callers stop at the first error.
func (b *refBuilder) AddLine(line []byte) error {
	d := json.NewDecoder(bytes.NewReader(line))
	d.UseNumber()
	var m map[string]json.RawMessage
	if err := d.Decode(&m); err != nil {
		return fmt.Errorf("not a JSON object: %v", err)
	}
	// Unlike json.Decoder.More, stray closing brackets after the object
	// are not let through either: anything but white space is an error.
	if len(bytes.TrimLeft(line[d.InputOffset():], " \t\r\n")) > 0 {
		return fmt.Errorf("more than one JSON value on the line")
	}
	if m == nil {
		return fmt.Errorf("not a JSON object: null")
	}
	for k := range m {
		if _, ok := b.index[k]; !ok {
			return fmt.Errorf("unknown column %q", k)
		}
	}
	for i, f := range b.fields {
		raw, ok := m[f.Name]
		if !ok {
			raw = nil
		}
		if err := b.cols[i].add(raw); err != nil {
			return fmt.Errorf("column %q: %v", f.Name, err)
		}
	}
	b.rows++
	return nil
}

// Flush returns the buffered rows as arrays (one per field) and starts a
// new batch.
func (b *refBuilder) Flush() *file.Batch {
	out := &file.Batch{NumRows: b.rows, Fields: b.fields, Columns: make([]*file.Array, len(b.cols))}
	for i, c := range b.cols {
		out.Columns[i] = c.finish()
	}
	b.rows = 0
	return out
}

type refColumn struct {
	f        *file.Field
	t        file.DataType
	n        int
	valid    []byte
	nulls    int
	values   []byte
	offsets  []int64
	children []*refColumn
}

func newRefColumn(f *file.Field) (*refColumn, error) {
	c := &refColumn{f: f, t: f.Type}
	switch f.Type.Kind {
	case file.KindDecimal128, file.KindDecimal256, file.KindFloat16, file.KindNull:
		return nil, fmt.Errorf("field %q: appending %s values is not supported", f.Name, f.Type)
	case file.KindList, file.KindLargeList, file.KindFixedSizeList, file.KindStruct:
		for _, ch := range f.Children {
			cc, err := newRefColumn(ch)
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

func (c *refColumn) size() int {
	n := len(c.values) + 8*len(c.offsets) + len(c.valid)
	for _, ch := range c.children {
		n += ch.size()
	}
	return n
}

func (c *refColumn) setValid(ok bool) {
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

func refIsNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(bytes.TrimSpace(raw)) == "null"
}

// addNull adds a null slot (zero bytes, empty ranges, null children for
// fixed-size lists and structs).
func (c *refColumn) addNull() {
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

func (c *refColumn) add(raw json.RawMessage) error {
	if refIsNull(raw) {
		if !c.f.Nullable {
			return fmt.Errorf("null in a non-nullable field")
		}
		c.addNull()
		return nil
	}
	if err := c.addValue(raw); err != nil {
		return err
	}
	c.setValid(true)
	return nil
}

func (c *refColumn) addValue(raw json.RawMessage) error {
	t := c.t
	switch t.Kind {
	case file.KindBool:
		var v bool
		if err := json.Unmarshal(raw, &v); err != nil {
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
		v, err := strconv.ParseInt(refNumberText(raw), 10, bits)
		if err != nil {
			return fmt.Errorf("%s is not a %d-bit integer", raw, bits)
		}
		c.putInt(uint64(v))
	case file.KindDate64:
		v, err := strconv.ParseInt(refNumberText(raw), 10, 64)
		if err != nil || v > math.MaxInt64/86_400_000 || v < math.MinInt64/86_400_000 {
			return fmt.Errorf("%s is not a date (days since 1970-01-01)", raw)
		}
		c.putInt(uint64(v * 86_400_000))
	case file.KindUint8, file.KindUint16, file.KindUint32, file.KindUint64:
		bits := 8 * t.ByteWidth()
		v, err := strconv.ParseUint(refNumberText(raw), 10, bits)
		if err != nil {
			return fmt.Errorf("%s is not an unsigned %d-bit integer", raw, bits)
		}
		c.putInt(v)
	case file.KindFloat32, file.KindFloat64:
		f, err := refParseFloat(raw, 8*t.ByteWidth())
		if err != nil {
			return err
		}
		if t.Kind == file.KindFloat32 {
			c.values = binary.LittleEndian.AppendUint32(c.values, math.Float32bits(float32(f)))
		} else {
			c.values = binary.LittleEndian.AppendUint64(c.values, math.Float64bits(f))
		}
	case file.KindUtf8, file.KindLargeUtf8:
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return fmt.Errorf("%s is not a string", raw)
		}
		c.values = append(c.values, s...)
		c.offsets = append(c.offsets, int64(len(c.values)))
	case file.KindBinary, file.KindLargeBinary, file.KindFixedSizeBinary:
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return fmt.Errorf("%s is not a base64 string", raw)
		}
		v, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return fmt.Errorf("%s is not base64: %v", raw, err)
		}
		if t.Kind == file.KindFixedSizeBinary {
			if len(v) != t.Size {
				return fmt.Errorf("%d bytes for a %d-byte fixed-size binary", len(v), t.Size)
			}
			c.values = append(c.values, v...)
			break
		}
		c.values = append(c.values, v...)
		c.offsets = append(c.offsets, int64(len(c.values)))
	case file.KindList, file.KindLargeList, file.KindFixedSizeList:
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return fmt.Errorf("%s is not an array", raw)
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
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil || m == nil {
			return fmt.Errorf("%s is not an object", raw)
		}
		for k := range m {
			found := false
			for _, ch := range c.children {
				found = found || ch.f.Name == k
			}
			if !found {
				return fmt.Errorf("unknown struct field %q", k)
			}
		}
		for _, ch := range c.children {
			if err := ch.add(m[ch.f.Name]); err != nil {
				return fmt.Errorf("field %q: %v", ch.f.Name, err)
			}
		}
	default:
		return fmt.Errorf("values of type %s are not supported", t)
	}
	return nil
}

func (c *refColumn) putInt(v uint64) {
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

// refNumberText is a JSON number's text, or a JSON string's content (64-bit
// integers are often quoted to survive JavaScript).
func refNumberText(raw json.RawMessage) string {
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	}
	return string(raw)
}

func refParseFloat(raw json.RawMessage, bits int) (float64, error) {
	s := refNumberText(raw)
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

// finish returns the refColumn's array and resets the refColumn.
func (c *refColumn) finish() *file.Array {
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
