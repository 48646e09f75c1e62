package arrowipc

// Constructors for arrays, mainly for writers and tests. valid may be nil
// (no nulls); otherwise it has one entry per value.

// Bitmap packs bs LSB-first, or returns nil when every entry is true, which
// is how arrays say "no nulls".
func Bitmap(bs []bool) []byte {
	all := true
	for _, b := range bs {
		all = all && b
	}
	if all {
		return nil
	}
	return packBits(bs)
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

func nullCount(valid []bool) int {
	n := 0
	for _, v := range valid {
		if !v {
			n++
		}
	}
	return n
}

// FixedArray makes an array of a fixed-width type t from values.
func FixedArray[T number](t DataType, values []T, valid []bool) *Array {
	return &Array{Type: t, Len: len(values), Values: bytesOf(values), Validity: Bitmap(valid), NullCount: nullCount(valid)}
}

// BoolArray makes a Bool array.
func BoolArray(values []bool, valid []bool) *Array {
	return &Array{Type: TBool, Len: len(values), Values: packBits(values), Validity: Bitmap(valid), NullCount: nullCount(valid)}
}

// StringArray makes a Utf8 array (or Binary, with t = TBinary).
func StringArray(t DataType, values []string, valid []bool) *Array {
	a := &Array{Type: t, Len: len(values), Validity: Bitmap(valid), NullCount: nullCount(valid)}
	n := 0
	for _, v := range values {
		n += len(v)
	}
	data := make([]byte, 0, n)
	if t.ID == LargeUtf8 || t.ID == LargeBinary {
		a.LargeOffsets = make([]int64, 1, len(values)+1)
		for _, v := range values {
			data = append(data, v...)
			a.LargeOffsets = append(a.LargeOffsets, int64(len(data)))
		}
	} else {
		a.Offsets = make([]int32, 1, len(values)+1)
		for _, v := range values {
			data = append(data, v...)
			a.Offsets = append(a.Offsets, int32(len(data)))
		}
	}
	a.Values = data
	return a
}

// ListArray makes a List (or LargeList) array from per-row lengths over child.
func ListArray(t DataType, lengths []int, child *Array, valid []bool) *Array {
	a := &Array{Type: t, Len: len(lengths), Children: []*Array{child}, Validity: Bitmap(valid), NullCount: nullCount(valid)}
	if t.ID == LargeList {
		a.LargeOffsets = make([]int64, 1, len(lengths)+1)
		for _, l := range lengths {
			a.LargeOffsets = append(a.LargeOffsets, a.LargeOffsets[len(a.LargeOffsets)-1]+int64(l))
		}
	} else {
		a.Offsets = make([]int32, 1, len(lengths)+1)
		for _, l := range lengths {
			a.Offsets = append(a.Offsets, a.Offsets[len(a.Offsets)-1]+int32(l))
		}
	}
	return a
}

// StructArray makes a Struct array of n rows over children.
func StructArray(n int, children []*Array, valid []bool) *Array {
	return &Array{Type: DataType{ID: Struct}, Len: n, Children: children, Validity: Bitmap(valid), NullCount: nullCount(valid)}
}

// FixedSizeListArray makes a FixedSizeList array of n rows of size values.
func FixedSizeListArray(size int32, n int, child *Array, valid []bool) *Array {
	return &Array{Type: DataType{ID: FixedSizeList, Size: size}, Len: n, Children: []*Array{child}, Validity: Bitmap(valid), NullCount: nullCount(valid)}
}
