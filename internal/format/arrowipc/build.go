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
