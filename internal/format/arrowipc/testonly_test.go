package arrowipc

// What only tests use: kept out of the product binary, still checked by the
// tests that exercise it.

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

// TTime is time32 (seconds, milliseconds) or time64 (micro-, nanoseconds).
func TTime(u TimeUnit) DataType {
	if u <= Millisecond {
		return DataType{ID: Time, BitWidth: 32, Unit: u}
	}
	return DataType{ID: Time, BitWidth: 64, Unit: u}
}

// Str returns value i of a string array as a string (a copy).
func (a *Array) Str(i int) string { return string(a.Bytes(i)) }

// ListRange returns the range of child positions of list value i.
func (a *Array) ListRange(i int) (start, end int) {
	switch {
	case a.Offsets != nil:
		return int(a.Offsets[i]), int(a.Offsets[i+1])
	case a.LargeOffsets != nil:
		return int(a.LargeOffsets[i]), int(a.LargeOffsets[i+1])
	case a.Type.ID == FixedSizeList:
		n := int(a.Type.Size)
		return i * n, (i + 1) * n
	}
	return 0, 0
}

func (a *Array) Int16s() []int16 { return view[int16](a.Values, a.Len) }

func (a *Array) Int32s() []int32 { return view[int32](a.Values, a.Len) }

func (a *Array) Int64s() []int64 { return view[int64](a.Values, a.Len) }

func (a *Array) Float32s() []float32 { return view[float32](a.Values, a.Len) }

func (a *Array) Float64s() []float64 { return view[float64](a.Values, a.Len) }
