// Package arrowipc reads and writes the Arrow IPC stream and file formats,
// the two containers Lance uses for deletion files and MemWAL WAL entries.
//
// It is hand-written rather than built on apache/arrow-go because compactord
// needs only flat and simply nested columns, and a small codec is both smaller
// in the binary and faster to decode (see the package benchmarks). Input is
// treated as hostile: every FlatBuffers access is bounds-checked, every buffer
// is checked against the lengths its field nodes imply, and decompression is
// capped by what the batch needs and by a budget proportional to the input.
//
// Decoded arrays alias the input for uncompressed buffers, so callers must
// not modify the input while they use the arrays.
package arrowipc

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"strings"
	"unsafe"
)

// TypeID names an Arrow logical type by its position in Schema.fbs's Type
// union, so parsing and writing need no translation table.
type TypeID uint8

// The supported types. Values equal the FlatBuffers union tags.
const (
	Null            TypeID = 1
	Int             TypeID = 2
	Float           TypeID = 3
	Binary          TypeID = 4
	Utf8            TypeID = 5
	Bool            TypeID = 6
	Decimal         TypeID = 7
	Date            TypeID = 8
	Time            TypeID = 9
	Timestamp       TypeID = 10
	List            TypeID = 12
	Struct          TypeID = 13
	FixedSizeBinary TypeID = 15
	FixedSizeList   TypeID = 16
	LargeBinary     TypeID = 19
	LargeUtf8       TypeID = 20
	LargeList       TypeID = 21
)

var typeNames = map[TypeID]string{
	Null: "null", Int: "int", Float: "float", Binary: "binary", Utf8: "utf8",
	Bool: "bool", Decimal: "decimal", Date: "date", Time: "time",
	Timestamp: "timestamp", List: "list", Struct: "struct",
	FixedSizeBinary: "fixed_size_binary", FixedSizeList: "fixed_size_list",
	LargeBinary: "large_binary", LargeUtf8: "large_utf8", LargeList: "large_list",
}

// TimeUnit is the unit of Time and Timestamp values (and, for Date,
// Second means days and Millisecond milliseconds, as in Schema.fbs's DateUnit).
type TimeUnit uint8

// Time units, numbered as in Schema.fbs.
const (
	Second TimeUnit = iota
	Millisecond
	Microsecond
	Nanosecond
)

// DateDay and DateMillisecond are the Date units (Schema.fbs DateUnit).
const (
	DateDay         = Second
	DateMillisecond = Millisecond
)

// DataType is an Arrow type. Only the parameters of its ID are meaningful.
type DataType struct {
	ID TypeID
	// BitWidth: Int 8/16/32/64, Float 16/32/64, Time 32/64, Decimal 128/256,
	// Date 32 (days) or 64 (milliseconds).
	BitWidth int
	Signed   bool     // Int
	Unit     TimeUnit // Date, Time, Timestamp
	TZ       string   // Timestamp; empty means no time zone
	// Size is FixedSizeBinary's byte width or FixedSizeList's list size.
	Size      int32
	Precision int32 // Decimal
	Scale     int32 // Decimal
}

// Convenience constructors for common types.
var (
	TInt8    = DataType{ID: Int, BitWidth: 8, Signed: true}
	TInt16   = DataType{ID: Int, BitWidth: 16, Signed: true}
	TInt32   = DataType{ID: Int, BitWidth: 32, Signed: true}
	TInt64   = DataType{ID: Int, BitWidth: 64, Signed: true}
	TUint8   = DataType{ID: Int, BitWidth: 8}
	TUint16  = DataType{ID: Int, BitWidth: 16}
	TUint32  = DataType{ID: Int, BitWidth: 32}
	TUint64  = DataType{ID: Int, BitWidth: 64}
	TFloat16 = DataType{ID: Float, BitWidth: 16}
	TFloat32 = DataType{ID: Float, BitWidth: 32}
	TFloat64 = DataType{ID: Float, BitWidth: 64}
	TBool    = DataType{ID: Bool}
	TUtf8    = DataType{ID: Utf8}
	TBinary  = DataType{ID: Binary}
	TDate32  = DataType{ID: Date, BitWidth: 32, Unit: DateDay}
	TDate64  = DataType{ID: Date, BitWidth: 64, Unit: DateMillisecond}
	TNull    = DataType{ID: Null}
)

// TTimestamp is a timestamp type of the given unit and zone ("" for none).
func TTimestamp(u TimeUnit, tz string) DataType {
	return DataType{ID: Timestamp, BitWidth: 64, Unit: u, TZ: tz}
}

// ByteWidth is the width of one value of a fixed-width type, 0 for others
// (and for Bool, whose values are bits).
func (t DataType) ByteWidth() int {
	switch t.ID {
	case Int, Float, Time, Decimal, Date:
		return t.BitWidth / 8
	case Timestamp:
		return 8
	case FixedSizeBinary:
		return int(t.Size)
	}
	return 0
}

func (t DataType) String() string {
	n := typeNames[t.ID]
	switch t.ID {
	case Int:
		if t.Signed {
			return fmt.Sprintf("int%d", t.BitWidth)
		}
		return fmt.Sprintf("uint%d", t.BitWidth)
	case Float:
		return fmt.Sprintf("float%d", t.BitWidth)
	case Date:
		return fmt.Sprintf("date%d", t.BitWidth)
	case Time:
		return fmt.Sprintf("time%d[%s]", t.BitWidth, unitNames[t.Unit])
	case Timestamp:
		return fmt.Sprintf("timestamp[%s,%q]", unitNames[t.Unit], t.TZ)
	case Decimal:
		return fmt.Sprintf("decimal%d(%d,%d)", t.BitWidth, t.Precision, t.Scale)
	case FixedSizeBinary, FixedSizeList:
		return fmt.Sprintf("%s[%d]", n, t.Size)
	case 0:
		return "none"
	}
	if n == "" {
		return fmt.Sprintf("type#%d", t.ID)
	}
	return n
}

var unitNames = [...]string{"s", "ms", "us", "ns"}

// KeyValue is one entry of schema or field metadata. Metadata is a slice, not
// a map, so that order and duplicates survive a round trip.
type KeyValue struct{ Key, Value string }

// Metadata is Arrow custom metadata.
type Metadata []KeyValue

// Get returns the value of key and whether it is present.
func (m Metadata) Get(key string) (string, bool) {
	for _, kv := range m {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return "", false
}

// Field is a schema field. Children are the child fields of List, LargeList,
// FixedSizeList (one) and Struct (any number).
type Field struct {
	Name     string
	Type     DataType
	Nullable bool
	Children []Field
	Metadata Metadata
	// Dict is set for dictionary-encoded fields; Type is then the type of
	// the dictionary's values.
	Dict *DictEncoding
}

// DictEncoding describes a dictionary-encoded field.
type DictEncoding struct {
	ID        int64
	IndexType DataType // a signed or unsigned Int
	Ordered   bool
}

// Schema is an Arrow schema.
type Schema struct {
	Fields   []Field
	Metadata Metadata
}

// Index returns the position of the top-level field named name, or -1.
func (s *Schema) Index(name string) int {
	for i := range s.Fields {
		if s.Fields[i].Name == name {
			return i
		}
	}
	return -1
}

// Array is one column's data in Arrow's columnar layout.
//
//   - Validity is the LSB-first validity bitmap, nil when there are no nulls.
//   - Values holds fixed-width values (little-endian), Bool's value bits,
//     or the bytes of Utf8/Binary and their large variants.
//   - Offsets (Utf8, Binary, List) or LargeOffsets (the large variants) hold
//     Len+1 offsets into Values or into Children[0].
//   - Children holds the child of lists and the fields of a Struct.
//   - For a dictionary-encoded column, Type is the index type
//     (Field.Dict.IndexType), Values holds the indices, and Dict the
//     dictionary's values (of the field's Type); indices are checked to be
//     within Dict.
type Array struct {
	Type         DataType
	Len          int
	NullCount    int
	Validity     []byte
	Values       []byte
	Offsets      []int32
	LargeOffsets []int64
	Children     []*Array
	Dict         *Array
}

// IsValid reports whether value i is not null.
func (a *Array) IsValid(i int) bool {
	if a.Type.ID == Null {
		return false
	}
	return a.Validity == nil || a.Validity[i>>3]&(1<<(i&7)) != 0
}

// Bool returns Bool value i (false for nulls only if the writer zeroed it).
func (a *Array) Bool(i int) bool { return a.Values[i>>3]&(1<<(i&7)) != 0 }

// Bytes returns value i of a Utf8, Binary, large variant or FixedSizeBinary
// array, aliasing the array's data.
func (a *Array) Bytes(i int) []byte {
	switch {
	case a.Offsets != nil:
		return a.Values[a.Offsets[i]:a.Offsets[i+1]]
	case a.LargeOffsets != nil:
		return a.Values[a.LargeOffsets[i]:a.LargeOffsets[i+1]]
	case a.Type.ID == FixedSizeBinary:
		w := int(a.Type.Size)
		return a.Values[i*w : (i+1)*w]
	}
	return nil
}

func (a *Array) Uint32s() []uint32 { return view[uint32](a.Values, a.Len) }

type number interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~float32 | ~float64
}

var littleEndian = func() bool { x := uint16(1); return *(*byte)(unsafe.Pointer(&x)) == 1 }()

// view reinterprets the first n values of b as []T.
func view[T number](b []byte, n int) []T {
	var z T
	w := int(unsafe.Sizeof(z))
	if n <= 0 {
		return nil
	}
	b = b[:n*w]
	if littleEndian && uintptr(unsafe.Pointer(&b[0]))%uintptr(w) == 0 {
		return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n)
	}
	out := make([]T, n)
	ob := unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), n*w)
	copy(ob, b)
	if !littleEndian {
		for i := 0; i < len(ob); i += w {
			for j := 0; j < w/2; j++ {
				ob[i+j], ob[i+w-1-j] = ob[i+w-1-j], ob[i+j]
			}
		}
	}
	return out
}

// bytesOf is the little-endian byte image of vs (aliasing on little-endian
// machines).
func bytesOf[T number](vs []T) []byte {
	if len(vs) == 0 {
		return nil
	}
	var z T
	w := int(unsafe.Sizeof(z))
	if littleEndian {
		return unsafe.Slice((*byte)(unsafe.Pointer(&vs[0])), len(vs)*w)
	}
	out := make([]byte, 0, len(vs)*w)
	for _, v := range vs {
		var u uint64
		switch w {
		case 1:
			u = uint64(*(*uint8)(unsafe.Pointer(&v)))
		case 2:
			u = uint64(*(*uint16)(unsafe.Pointer(&v)))
		case 4:
			u = uint64(*(*uint32)(unsafe.Pointer(&v)))
		case 8:
			u = *(*uint64)(unsafe.Pointer(&v))
		}
		out = binary.LittleEndian.AppendUint64(out, u)[:len(out)+w]
	}
	return out
}

// Batch is a record batch: one Array per schema field, all of length Len.
type Batch struct {
	Len     int
	Columns []*Array
}

// Column returns the column of the top-level field named name, or nil.
func (b *Batch) Column(s *Schema, name string) *Array {
	if i := s.Index(name); i >= 0 && i < len(b.Columns) {
		return b.Columns[i]
	}
	return nil
}

func (f Field) String() string {
	var sb strings.Builder
	f.format(&sb)
	return sb.String()
}

func (f Field) format(sb *strings.Builder) {
	sb.WriteString(f.Name)
	sb.WriteString(":")
	sb.WriteString(f.Type.String())
	if len(f.Children) > 0 {
		sb.WriteString("<")
		for i, c := range f.Children {
			if i > 0 {
				sb.WriteString(",")
			}
			c.format(sb)
		}
		sb.WriteString(">")
	}
	if f.Nullable {
		sb.WriteString("?")
	}
}

// countNulls counts the zero bits among the first n bits of bm.
func countNulls(bm []byte, n int) int {
	set := 0
	full := n / 8
	for _, b := range bm[:full] {
		set += bits.OnesCount8(b)
	}
	if r := n % 8; r != 0 {
		set += bits.OnesCount8(bm[full] & byte(1<<r-1))
	}
	return n - set
}
