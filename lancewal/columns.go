package lancewal

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"time"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/format/arrowipc"
	"github.com/compactord/compactord/internal/format/file"
)

// TombstoneColumn is the column a WAL entry and a generation carry beside
// the table's columns: true marks a row as the delete of its key.
const TombstoneColumn = "_tombstone"

// column is one top-level field of the table the writer handles.
type column struct {
	field *pb.Field
	t     file.DataType
	// width is a fixed-width type's byte width; 0 for bool and variable.
	width int
}

// kinds the writer accepts: the scalar types LanceDB's MemWAL path takes
// whole (nested types are refused rather than written half-right).
var logicalKinds = map[string]file.DataType{
	"bool": {Kind: file.KindBool},
	"int8": {Kind: file.KindInt8}, "int16": {Kind: file.KindInt16}, "int32": {Kind: file.KindInt32}, "int64": {Kind: file.KindInt64},
	"uint8": {Kind: file.KindUint8}, "uint16": {Kind: file.KindUint16}, "uint32": {Kind: file.KindUint32}, "uint64": {Kind: file.KindUint64},
	"float": {Kind: file.KindFloat32}, "double": {Kind: file.KindFloat64},
	"string": {Kind: file.KindUtf8}, "large_string": {Kind: file.KindLargeUtf8},
	"binary": {Kind: file.KindBinary}, "large_binary": {Kind: file.KindLargeBinary},
	"date32:day": {Kind: file.KindDate32},
}

func newColumn(f *pb.Field) (column, error) {
	lt := f.GetLogicalType()
	t, ok := logicalKinds[lt]
	if !ok && strings.HasPrefix(lt, "timestamp:") {
		parts := strings.SplitN(lt, ":", 3)
		if len(parts) == 3 {
			switch parts[1] {
			case "s", "ms", "us", "ns":
				tz := parts[2]
				if tz == "-" {
					tz = ""
				}
				t, ok = file.DataType{Kind: file.KindTimestamp, Unit: parts[1], TZ: tz}, true
			}
		}
	}
	if !ok {
		if c, vec, err := vectorColumn(f); vec {
			return c, err
		}
		return column{}, fmt.Errorf("column %q has type %q; the MemWAL writer handles booleans, integers, floats, strings, binaries, dates, timestamps and float32 vectors", f.GetName(), lt)
	}
	return column{field: f, t: t, width: t.ByteWidth()}, nil
}

// arrowType is the Arrow type of a column in a WAL entry.
func (c column) arrowType() arrowipc.DataType {
	switch c.t.Kind {
	case file.KindBool:
		return arrowipc.TBool
	case file.KindInt8, file.KindInt16, file.KindInt32, file.KindInt64:
		return arrowipc.DataType{ID: arrowipc.Int, BitWidth: 8 * c.width, Signed: true}
	case file.KindUint8, file.KindUint16, file.KindUint32, file.KindUint64:
		return arrowipc.DataType{ID: arrowipc.Int, BitWidth: 8 * c.width}
	case file.KindFloat32:
		return arrowipc.TFloat32
	case file.KindFloat64:
		return arrowipc.TFloat64
	case file.KindUtf8:
		return arrowipc.TUtf8
	case file.KindLargeUtf8:
		return arrowipc.DataType{ID: arrowipc.LargeUtf8}
	case file.KindBinary:
		return arrowipc.TBinary
	case file.KindLargeBinary:
		return arrowipc.DataType{ID: arrowipc.LargeBinary}
	case file.KindDate32:
		return arrowipc.TDate32
	case file.KindFixedSizeList:
		return arrowipc.DataType{ID: arrowipc.FixedSizeList, Size: int32(c.t.Size)}
	case file.KindTimestamp:
		u := map[string]arrowipc.TimeUnit{"s": arrowipc.Second, "ms": arrowipc.Millisecond, "us": arrowipc.Microsecond, "ns": arrowipc.Nanosecond}[c.t.Unit]
		return arrowipc.TTimestamp(u, c.t.TZ)
	}
	return arrowipc.TNull
}

func (c column) variable() bool { return c.t.IsVariable() }

// cell is one value held in a column chunk: fixed-width values as their
// little-endian bytes, variable ones as their bytes.
type chunk struct {
	col    column
	n      int
	valid  []bool
	fixed  []byte // width bytes per row (bool: one byte per row)
	offs   []int64
	varbuf []byte
}

func newChunk(c column, capRows int) *chunk {
	ch := &chunk{col: c, valid: make([]bool, 0, capRows)}
	if c.variable() {
		ch.offs = append(make([]int64, 0, capRows+1), 0)
	}
	return ch
}

// add appends v (nil for null) converted to the column's type.
func (ch *chunk) add(v any) error {
	c := ch.col
	if v == nil {
		if !c.field.GetNullable() {
			return fmt.Errorf("column %q is not nullable", c.field.GetName())
		}
		ch.addZero(false)
		return nil
	}
	switch {
	case c.isVector():
		return ch.addVector(v)
	case c.variable():
		var b []byte
		switch x := v.(type) {
		case string:
			b = []byte(x)
		case []byte:
			b = x
		default:
			return fmt.Errorf("column %q (%s): got %T, want a string or []byte", c.field.GetName(), c.t, v)
		}
		ch.varbuf = append(ch.varbuf, b...)
		ch.offs = append(ch.offs, int64(len(ch.varbuf)))
	case c.t.Kind == file.KindBool:
		b, ok := v.(bool)
		if !ok {
			return fmt.Errorf("column %q (bool): got %T", c.field.GetName(), v)
		}
		x := byte(0)
		if b {
			x = 1
		}
		ch.fixed = append(ch.fixed, x)
	case c.t.Kind == file.KindFloat32 || c.t.Kind == file.KindFloat64:
		f, err := toFloat(v)
		if err != nil {
			return fmt.Errorf("column %q (%s): %w", c.field.GetName(), c.t, err)
		}
		if c.t.Kind == file.KindFloat32 {
			ch.fixed = binary.LittleEndian.AppendUint32(ch.fixed, math.Float32bits(float32(f)))
		} else {
			ch.fixed = binary.LittleEndian.AppendUint64(ch.fixed, math.Float64bits(f))
		}
	default:
		x, err := c.toInt(v)
		if err != nil {
			return fmt.Errorf("column %q (%s): %w", c.field.GetName(), c.t, err)
		}
		var buf [8]byte
		binary.LittleEndian.PutUint64(buf[:], x)
		ch.fixed = append(ch.fixed, buf[:c.width]...)
	}
	ch.valid = append(ch.valid, true)
	ch.n++
	return nil
}

// addZero appends a zero value, valid or null: the filler a tombstone row
// carries in its value columns.
func (ch *chunk) addZero(valid bool) {
	if ch.col.variable() {
		ch.offs = append(ch.offs, int64(len(ch.varbuf)))
	} else if ch.col.t.Kind == file.KindBool {
		ch.fixed = append(ch.fixed, 0)
	} else {
		ch.fixed = append(ch.fixed, make([]byte, ch.col.width)...)
	}
	ch.valid = append(ch.valid, valid)
	ch.n++
}

func toFloat(v any) (float64, error) {
	switch x := v.(type) {
	case float64:
		return x, nil
	case float32:
		return float64(x), nil
	case int:
		return float64(x), nil
	case int64:
		return float64(x), nil
	case int32:
		return float64(x), nil
	}
	return 0, fmt.Errorf("got %T, want a number", v)
}

// toInt converts v to the column's integer representation, checking range.
func (c column) toInt(v any) (uint64, error) {
	if c.t.Kind == file.KindTimestamp {
		if tm, ok := v.(time.Time); ok {
			switch c.t.Unit {
			case "s":
				return uint64(tm.Unix()), nil
			case "ms":
				return uint64(tm.UnixMilli()), nil
			case "us":
				return uint64(tm.UnixMicro()), nil
			default:
				return uint64(tm.UnixNano()), nil
			}
		}
	}
	var i int64
	var u uint64
	neg := false
	switch x := v.(type) {
	case int:
		i = int64(x)
	case int8:
		i = int64(x)
	case int16:
		i = int64(x)
	case int32:
		i = int64(x)
	case int64:
		i = x
	case uint:
		u = uint64(x)
	case uint8:
		u = uint64(x)
	case uint16:
		u = uint64(x)
	case uint32:
		u = uint64(x)
	case uint64:
		u = x
	default:
		return 0, fmt.Errorf("got %T, want an integer", v)
	}
	switch v.(type) {
	case int, int8, int16, int32, int64:
		neg = i < 0
		u = uint64(i)
	}
	bitsN := 8 * c.width
	switch c.t.Kind {
	case file.KindUint8, file.KindUint16, file.KindUint32, file.KindUint64:
		if neg || (bitsN < 64 && u >= 1<<bitsN) {
			return 0, fmt.Errorf("%v is out of range", v)
		}
	default:
		if !neg && u > math.MaxInt64 {
			return 0, fmt.Errorf("%v is out of range", v)
		}
		if bitsN < 64 {
			lo, hi := -(int64(1) << (bitsN - 1)), int64(1)<<(bitsN-1)-1
			if int64(u) < lo || int64(u) > hi {
				return 0, fmt.Errorf("%v is out of range", v)
			}
		}
	}
	return u, nil
}

// value returns row i as a comparable Go value (for keys): int64, uint64,
// float64, bool or string.
func (ch *chunk) value(i int) any {
	c := ch.col
	if !ch.valid[i] {
		return nil
	}
	if c.variable() {
		return string(ch.varbuf[ch.offs[i]:ch.offs[i+1]])
	}
	b := ch.fixed[i*max(c.width, 1):]
	switch c.t.Kind {
	case file.KindBool:
		return b[0] == 1
	case file.KindFloat32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
	case file.KindFloat64:
		return math.Float64frombits(binary.LittleEndian.Uint64(b))
	case file.KindUint8, file.KindUint16, file.KindUint32, file.KindUint64:
		var buf [8]byte
		copy(buf[:], b[:c.width])
		return binary.LittleEndian.Uint64(buf[:])
	}
	var buf [8]byte
	copy(buf[:], b[:c.width])
	if b[c.width-1]&0x80 != 0 {
		for j := c.width; j < 8; j++ {
			buf[j] = 0xff
		}
	}
	return int64(binary.LittleEndian.Uint64(buf[:]))
}

// take returns the rows idx of the chunk as a new chunk.
func (ch *chunk) take(idx []int) *chunk {
	out := newChunk(ch.col, len(idx))
	w := max(ch.col.width, 1)
	for _, i := range idx {
		if ch.col.variable() {
			out.varbuf = append(out.varbuf, ch.varbuf[ch.offs[i]:ch.offs[i+1]]...)
			out.offs = append(out.offs, int64(len(out.varbuf)))
		} else {
			out.fixed = append(out.fixed, ch.fixed[i*w:(i+1)*w]...)
		}
		out.valid = append(out.valid, ch.valid[i])
		out.n++
	}
	return out
}

func packBits(bs []bool) []byte {
	out := make([]byte, (len(bs)+7)/8)
	for i, b := range bs {
		if b {
			out[i>>3] |= 1 << (i & 7)
		}
	}
	return out
}

func allTrue(bs []bool) bool {
	for _, b := range bs {
		if !b {
			return false
		}
	}
	return true
}

// aligned copies b into 8-byte-aligned memory: the file package views
// fixed-width values in place.
func aligned(b []byte) []byte {
	u := make([]uint64, (len(b)+7)/8)
	out := unsafeBytes(u)[:len(b)]
	copy(out, b)
	return out
}

// fileArray is the chunk as a Lance file array.
func (ch *chunk) fileArray() *file.Array {
	a := &file.Array{Type: ch.col.t, Name: ch.col.field.GetName(), Len: ch.n}
	if !allTrue(ch.valid) {
		a.Valid = packBits(ch.valid)
	}
	switch {
	case ch.col.variable():
		a.Values = ch.varbuf
		if a.Values == nil {
			a.Values = []byte{}
		}
		a.Offsets = append([]int64(nil), ch.offs...)
	case ch.col.t.Kind == file.KindBool:
		bs := make([]bool, ch.n)
		for i := range bs {
			bs[i] = ch.fixed[i] == 1
		}
		a.Values = packBits(bs)
	case ch.col.isVector():
		return ch.vectorFileArray(a)
	default:
		a.Values = aligned(ch.fixed)
	}
	return a
}

// arrowArray is the chunk as an Arrow array for a WAL entry.
func (ch *chunk) arrowArray() *arrowipc.Array {
	t := ch.col.arrowType()
	a := &arrowipc.Array{Type: t, Len: ch.n}
	if !allTrue(ch.valid) {
		a.Validity = packBits(ch.valid)
		for _, v := range ch.valid {
			if !v {
				a.NullCount++
			}
		}
	}
	switch {
	case ch.col.variable():
		a.Values = ch.varbuf
		if t.ID == arrowipc.LargeUtf8 || t.ID == arrowipc.LargeBinary {
			a.LargeOffsets = append([]int64(nil), ch.offs...)
		} else {
			a.Offsets = make([]int32, len(ch.offs))
			for i, o := range ch.offs {
				a.Offsets[i] = int32(o)
			}
		}
	case ch.col.t.Kind == file.KindBool:
		bs := make([]bool, ch.n)
		for i := range bs {
			bs[i] = ch.fixed[i] == 1
		}
		a.Values = packBits(bs)
	case ch.col.isVector():
		return ch.vectorArrowArray(a)
	default:
		a.Values = aligned(ch.fixed)
	}
	return a
}
