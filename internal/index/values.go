package index

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/format/file"
)

var le = binary.LittleEndian

// Indexable reports whether btree and bitmap segments over a column of
// this type can be built: fixed-width scalars, bools, strings and
// binaries.
func Indexable(t file.DataType) error {
	if t.DictIndex != file.KindNull {
		// LanceDB 0.39 builds no scalar index (btree, bitmap, FTS) on a
		// dictionary column, so none can exist to maintain; an index
		// compactord built would hold a type LanceDB never reads there.
		return fmt.Errorf("compactord cannot index columns of type %s", t)
	}
	switch t.Kind {
	case file.KindBool, file.KindInt8, file.KindInt16, file.KindInt32, file.KindInt64,
		file.KindUint8, file.KindUint16, file.KindUint32, file.KindUint64,
		file.KindFloat16, file.KindFloat32, file.KindFloat64,
		file.KindUtf8, file.KindLargeUtf8, file.KindBinary, file.KindLargeBinary, file.KindFixedSizeBinary,
		file.KindDate32, file.KindDate64, file.KindTime32, file.KindTime64, file.KindDuration, file.KindTimestamp:
		return nil
	}
	return fmt.Errorf("compactord cannot index columns of type %s", t)
}

// compareAt orders values i and j of a: nulls first, then Arrow's
// ascending order (floats by IEEE total order, as Arrow's sort kernels).
func compareAt(a *file.Array, i, j int) int {
	vi, vj := a.IsValid(i), a.IsValid(j)
	switch {
	case !vi && !vj:
		return 0
	case !vi:
		return -1
	case !vj:
		return 1
	}
	return compareValues(a, i, a, j)
}

// compareValues orders two valid values of arrays of one type.
func compareValues(a *file.Array, i int, b *file.Array, j int) int {
	switch a.Type.Kind {
	case file.KindBool:
		return cmp.Compare(b2i(a.Bool(i)), b2i(b.Bool(j)))
	case file.KindInt8:
		return cmp.Compare(int8(a.Values[i]), int8(b.Values[j]))
	case file.KindUint8:
		return cmp.Compare(a.Values[i], b.Values[j])
	case file.KindInt16:
		return cmp.Compare(int16(le.Uint16(a.Values[2*i:])), int16(le.Uint16(b.Values[2*j:])))
	case file.KindUint16:
		return cmp.Compare(le.Uint16(a.Values[2*i:]), le.Uint16(b.Values[2*j:]))
	case file.KindInt32, file.KindDate32, file.KindTime32:
		return cmp.Compare(int32(le.Uint32(a.Values[4*i:])), int32(le.Uint32(b.Values[4*j:])))
	case file.KindUint32:
		return cmp.Compare(le.Uint32(a.Values[4*i:]), le.Uint32(b.Values[4*j:]))
	case file.KindInt64, file.KindDate64, file.KindTime64, file.KindDuration, file.KindTimestamp:
		return cmp.Compare(int64(le.Uint64(a.Values[8*i:])), int64(le.Uint64(b.Values[8*j:])))
	case file.KindUint64:
		return cmp.Compare(le.Uint64(a.Values[8*i:]), le.Uint64(b.Values[8*j:]))
	case file.KindFloat16:
		return totalCmp32(file.Float16(le.Uint16(a.Values[2*i:])), file.Float16(le.Uint16(b.Values[2*j:])))
	case file.KindFloat32:
		return totalCmp32(math.Float32frombits(le.Uint32(a.Values[4*i:])), math.Float32frombits(le.Uint32(b.Values[4*j:])))
	case file.KindFloat64:
		return totalCmp64(math.Float64frombits(le.Uint64(a.Values[8*i:])), math.Float64frombits(le.Uint64(b.Values[8*j:])))
	}
	return bytes.Compare(a.Bytes(i), b.Bytes(j))
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// totalCmp64 is IEEE 754 totalOrder (Rust's f64::total_cmp).
func totalCmp64(x, y float64) int {
	a, b := int64(math.Float64bits(x)), int64(math.Float64bits(y))
	a ^= int64(uint64(a>>63) >> 1)
	b ^= int64(uint64(b>>63) >> 1)
	return cmp.Compare(a, b)
}

func totalCmp32(x, y float32) int {
	a, b := int32(math.Float32bits(x)), int32(math.Float32bits(y))
	a ^= int32(uint32(a>>31) >> 1)
	b ^= int32(uint32(b>>31) >> 1)
	return cmp.Compare(a, b)
}

// valueKey is a map key equal for equal values (bitmap grouping): the
// value's bytes, or "" with null=true.
func valueKey(a *file.Array, i int) (key string, null bool) {
	if !a.IsValid(i) {
		return "", true
	}
	switch {
	case a.Type.Kind == file.KindBool:
		if a.Bool(i) {
			return "\x01", false
		}
		return "\x00", false
	case a.Type.IsVariable() || a.Type.Kind == file.KindFixedSizeBinary:
		return string(a.Bytes(i)), false
	}
	w := a.Type.ByteWidth()
	return string(a.Values[i*w : (i+1)*w]), false
}

// nullArray is n nulls of type t.
func nullArray(t file.DataType, n int) *file.Array {
	a := &file.Array{Type: t, Len: n, Valid: make([]byte, (n+7)/8)}
	switch {
	case t.Kind == file.KindBool:
		a.Values = make([]byte, (n+7)/8)
	case t.IsVariable():
		a.Offsets = make([]int64, n+1)
	default:
		a.Values = make([]byte, n*t.ByteWidth())
	}
	return a
}

// concat joins scalar arrays of one type.
func concat(t file.DataType, as []*file.Array) *file.Array {
	n := 0
	nulls := false
	for _, a := range as {
		n += a.Len
		nulls = nulls || a.Valid != nil
	}
	out := &file.Array{Type: t, Len: n}
	if nulls {
		out.Valid = make([]byte, (n+7)/8)
	}
	if t.Kind == file.KindBool {
		out.Values = make([]byte, (n+7)/8)
	}
	if t.IsVariable() {
		out.Offsets = make([]int64, 1, n+1)
	}
	pos := 0
	w := t.ByteWidth()
	for _, a := range as {
		for i := 0; i < a.Len; i++ {
			if nulls && a.IsValid(i) {
				out.Valid[(pos+i)>>3] |= 1 << ((pos + i) & 7)
			}
			if t.Kind == file.KindBool && a.Bool(i) {
				out.Values[(pos+i)>>3] |= 1 << ((pos + i) & 7)
			}
		}
		switch {
		case t.Kind == file.KindBool:
		case t.IsVariable():
			base := int64(len(out.Values))
			start := a.Offsets[0]
			out.Values = append(out.Values, a.Values[start:a.Offsets[a.Len]]...)
			for i := 1; i <= a.Len; i++ {
				out.Offsets = append(out.Offsets, base+a.Offsets[i]-start)
			}
		default:
			out.Values = append(out.Values, a.Values[:a.Len*w]...)
		}
		pos += a.Len
	}
	return out
}

// Entries are the (value, row address) pairs a segment holds: Values is
// a scalar column of len(Addrs) values.
type Entries struct {
	Values *file.Array
	Addrs  []uint64
	// ListNulls (label lists only) are the rows whose list is null: they
	// have no entry but the segment records them.
	ListNulls []uint64
	// Keys (label lists only) is the list's item field, the keys' type.
	Keys *pb.Field
}

// Len is the number of entries.
func (e *Entries) Len() int { return len(e.Addrs) }

// Sorted returns the entries in btree order: nulls first, values
// ascending, ties by row address.
func (e *Entries) Sorted() *Entries {
	perm := make([]int, e.Len())
	for i := range perm {
		perm[i] = i
	}
	slicesSortFunc(perm, func(i, j int) int {
		if c := compareAt(e.Values, i, j); c != 0 {
			return c
		}
		return cmp.Compare(e.Addrs[i], e.Addrs[j])
	})
	addrs := make([]uint64, len(perm))
	for k, i := range perm {
		addrs[k] = e.Addrs[i]
	}
	return &Entries{Values: e.Values.Take(perm), Addrs: addrs, ListNulls: e.ListNulls, Keys: e.Keys}
}

func slicesSortFunc(s []int, f func(i, j int) int) { slices.SortStableFunc(s, f) }
