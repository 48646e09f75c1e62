package file

import (
	"encoding/binary"
	"math"
	"unsafe"
)

// Array is a decoded column (or part of one), laid out like Arrow so that
// consumers can use it without per-value boxing:
//
//   - fixed-width types: Values holds Len values of Type.ByteWidth() bytes,
//     little endian; bool: Values is a bitmap (bit i, LSB first);
//   - strings and binaries: Offsets has Len+1 entries into Values;
//   - lists: Offsets has Len+1 entries into Children[0];
//   - fixed-size lists: Children[0] holds Len*Type.Size items;
//   - structs: Children are the fields, each of length Len.
//
// Valid is a bitmap (1 = valid) or nil when every value is valid. Null
// slots hold zero bytes (fixed width) or empty ranges.
type Array struct {
	Type     DataType
	Name     string
	Len      int
	Valid    []byte
	Values   []byte
	Offsets  []int64
	Children []*Array
	// fsst (string and binary arrays of a Stream with KeepFSST only): the
	// values are still FSST-compressed, rows from each segment's row on
	// with its symbol table. Slice and Take expand them; WriteRows writes
	// them as they are.
	fsst []fsstSeg
}

// fsstSeg is a run of an array's rows compressed with one symbol table
// (tab serialized, t parsed).
type fsstSeg struct {
	row int
	tab []byte
	t   *fsstTable
}

// segEnd is the row after segment k of a.
func (a *Array) segEnd(k int) int {
	if k+1 < len(a.fsst) {
		return a.fsst[k+1].row
	}
	return a.Len
}

// expandFSST is a with its FSST-compressed values decoded (a itself when
// they are not compressed). The reader checked the values when it kept
// them compressed (checkFSSTValues), so none ends in a dangling escape;
// were one to, the escape would expand to nothing.
func (a *Array) expandFSST() *Array {
	if a.fsst == nil {
		return a
	}
	out := &Array{Type: a.Type, Name: a.Name, Len: a.Len, Valid: a.Valid, Offsets: make([]int64, a.Len+1)}
	var vals []byte
	for k, sg := range a.fsst {
		for i := sg.row; i < a.segEnd(k); i++ {
			v := a.Values[a.Offsets[i]:a.Offsets[i+1]]
			n, err := sg.t.expandedLen(v)
			if err != nil {
				v = v[:len(v)-1]
				n, _ = sg.t.expandedLen(v)
			}
			pos := len(vals)
			vals = append(vals, make([]byte, n)...)
			sg.t.expand(vals, pos, v)
			out.Offsets[i+1] = int64(len(vals))
		}
	}
	out.Values = vals
	return out
}

// IsValid reports whether value i is not null.
func (a *Array) IsValid(i int) bool { return a.Valid == nil || a.Valid[i>>3]>>(i&7)&1 == 1 }

// NullCount counts null values.
func (a *Array) NullCount() int {
	if a.Valid == nil {
		return 0
	}
	n := 0
	for i := 0; i < a.Len; i++ {
		if !a.IsValid(i) {
			n++
		}
	}
	return n
}

// Bytes returns value i of a string, binary or fixed-size binary array.
func (a *Array) Bytes(i int) []byte {
	if a.Type.Kind == KindFixedSizeBinary {
		w := a.Type.Size
		return a.Values[i*w : (i+1)*w]
	}
	return a.Values[a.Offsets[i]:a.Offsets[i+1]]
}

// Bool returns value i of a bool array.
func (a *Array) Bool(i int) bool { return a.Values[i>>3]>>(i&7)&1 == 1 }

// Int64s views the values of an int64, uint64, timestamp, date64 or
// other 8-byte array without copying.
func (a *Array) Int64s() []int64 { return viewAs[int64](a.Values, a.Len) }

// Int32s views 4-byte values (int32, uint32, date32, ...).
func (a *Array) Int32s() []int32 { return viewAs[int32](a.Values, a.Len) }

// viewAs reinterprets little-endian bytes as a slice of T. Values buffers
// are allocated 8-byte aligned (alloc), so the view is aligned.
func viewAs[T any](b []byte, n int) []T {
	var z T
	if n == 0 || len(b) < n*int(unsafe.Sizeof(z)) {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n)
}

// alloc returns n zeroed bytes backed by 8-byte words, so typed views of
// the buffer are aligned.
func alloc(n int) []byte {
	if n == 0 {
		return []byte{}
	}
	w := make([]uint64, (n+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), len(w)*8)[:n]
}

func bitmapLen(n int) int { return (n + 7) / 8 }

func setBit(b []byte, i int) { b[i>>3] |= 1 << (i & 7) }

func getBit(b []byte, i int) bool { return b[i>>3]>>(i&7)&1 == 1 }

// copyBits copies n bits from src at si to dst at di.
func copyBits(dst []byte, di int, src []byte, si int, n int) {
	if di&7 == 0 && si&7 == 0 {
		copy(dst[di>>3:], src[si>>3:(si+n)>>3])
		for k := n &^ 7; k < n; k++ {
			if getBit(src, si+k) {
				setBit(dst, di+k)
			}
		}
		return
	}
	for k := 0; k < n; k++ {
		if getBit(src, si+k) {
			setBit(dst, di+k)
		}
	}
}

// Slice copies rows [from, to) into a new array.
func (a *Array) Slice(from, to int) *Array {
	if a.fsst != nil {
		return a.expandFSST().Slice(from, to)
	}
	n := to - from
	out := &Array{Type: a.Type, Name: a.Name, Len: n}
	if a.Valid != nil {
		out.Valid = make([]byte, bitmapLen(n))
		copyBits(out.Valid, 0, a.Valid, from, n)
	}
	switch {
	case a.Type.Kind == KindBool:
		out.Values = make([]byte, bitmapLen(n))
		copyBits(out.Values, 0, a.Values, from, n)
	case a.Type.IsVariable():
		out.Offsets = make([]int64, n+1)
		base := a.Offsets[from]
		for i := 0; i <= n; i++ {
			out.Offsets[i] = a.Offsets[from+i] - base
		}
		out.Values = alloc(int(a.Offsets[to] - base))
		copy(out.Values, a.Values[base:a.Offsets[to]])
	case a.Type.Kind == KindList || a.Type.Kind == KindLargeList:
		out.Offsets = make([]int64, n+1)
		base := a.Offsets[from]
		for i := 0; i <= n; i++ {
			out.Offsets[i] = a.Offsets[from+i] - base
		}
		out.Children = []*Array{a.Children[0].Slice(int(base), int(a.Offsets[to]))}
	case a.Type.Kind == KindFixedSizeList:
		d := a.Type.Size
		out.Children = []*Array{a.Children[0].Slice(from*d, to*d)}
	case a.Type.Kind == KindStruct:
		out.Children = make([]*Array, len(a.Children))
		for i, c := range a.Children {
			out.Children[i] = c.Slice(from, to)
		}
	case a.Type.Kind == KindNull:
	default:
		w := a.Type.ByteWidth()
		out.Values = alloc(n * w)
		copy(out.Values, a.Values[from*w:to*w])
	}
	return out
}

// Take gathers the given rows (any order, repeats allowed) into a new array.
func (a *Array) Take(rows []int) *Array {
	if a.fsst != nil {
		return a.expandFSST().Take(rows)
	}
	n := len(rows)
	out := &Array{Type: a.Type, Name: a.Name, Len: n}
	if a.Valid != nil {
		out.Valid = make([]byte, bitmapLen(n))
		for i, r := range rows {
			if getBit(a.Valid, r) {
				setBit(out.Valid, i)
			}
		}
	}
	switch {
	case a.Type.Kind == KindBool:
		out.Values = make([]byte, bitmapLen(n))
		for i, r := range rows {
			if getBit(a.Values, r) {
				setBit(out.Values, i)
			}
		}
	case a.Type.IsVariable():
		out.Offsets = make([]int64, n+1)
		var total int64
		for i, r := range rows {
			total += a.Offsets[r+1] - a.Offsets[r]
			out.Offsets[i+1] = total
		}
		out.Values = alloc(int(total))
		for i, r := range rows {
			copy(out.Values[out.Offsets[i]:], a.Values[a.Offsets[r]:a.Offsets[r+1]])
		}
	case a.Type.Kind == KindList || a.Type.Kind == KindLargeList:
		out.Offsets = make([]int64, n+1)
		var child []int
		for i, r := range rows {
			for k := a.Offsets[r]; k < a.Offsets[r+1]; k++ {
				child = append(child, int(k))
			}
			out.Offsets[i+1] = int64(len(child))
		}
		out.Children = []*Array{a.Children[0].Take(child)}
	case a.Type.Kind == KindFixedSizeList:
		d := a.Type.Size
		child := make([]int, 0, n*d)
		for _, r := range rows {
			for k := 0; k < d; k++ {
				child = append(child, r*d+k)
			}
		}
		out.Children = []*Array{a.Children[0].Take(child)}
	case a.Type.Kind == KindStruct:
		out.Children = make([]*Array, len(a.Children))
		for i, c := range a.Children {
			out.Children[i] = c.Take(rows)
		}
	case a.Type.Kind == KindNull:
	default:
		w := a.Type.ByteWidth()
		out.Values = alloc(n * w)
		for i, r := range rows {
			copy(out.Values[i*w:(i+1)*w], a.Values[r*w:(r+1)*w])
		}
	}
	return out
}

// Float16 converts IEEE half-precision bits to float32.
func Float16(bits uint16) float32 {
	sign := uint32(bits>>15) << 31
	exp := uint32(bits>>10) & 0x1f
	frac := uint32(bits) & 0x3ff
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0xff<<23 | frac<<13)
	case exp == 0:
		if frac == 0 {
			return math.Float32frombits(sign)
		}
		f := float32(frac) / 1024 / 16384
		if sign != 0 {
			f = -f
		}
		return f
	}
	return math.Float32frombits(sign | (exp+112)<<23 | frac<<13)
}

var le = binary.LittleEndian

func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }
