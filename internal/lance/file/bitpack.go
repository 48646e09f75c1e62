package file

// FastLanes bit packing, the layout Lance's bitpacking encodings use: 1024
// values of a W-bit type are split into 1024/W lanes; lane l holds, in W
// packed words strided 1024/W apart, the values of the rows of a transposed
// order (FL_ORDER), each value's low bits first.

var flOrder = [8]int{0, 4, 2, 6, 1, 5, 3, 7}

// flIndex is the position in the 1024-value block of the value that row r
// of lane l packs.
func flIndex(row, lane int) int { return flOrder[row/8]*16 + (row%8)*128 + lane }

// unpackFL decodes one block of 1024 values of a w-bit type (w = 8, 16, 32
// or 64) packed at bw bits from src (bw*1024/8 bytes) into dst (1024
// values of w/8 bytes each, little endian).
func unpackFL(w, bw int, src []byte, dst []byte) {
	lanes := 1024 / w
	bpv := w / 8
	if bw == 0 {
		clear(dst[:1024*bpv])
		return
	}
	word := func(k int) uint64 {
		switch w {
		case 8:
			return uint64(src[k])
		case 16:
			return uint64(le.Uint16(src[2*k:]))
		case 32:
			return uint64(le.Uint32(src[4*k:]))
		}
		return le.Uint64(src[8*k:])
	}
	put := func(i int, v uint64) {
		switch w {
		case 8:
			dst[i] = byte(v)
		case 16:
			le.PutUint16(dst[2*i:], uint16(v))
		case 32:
			le.PutUint32(dst[4*i:], uint32(v))
		default:
			le.PutUint64(dst[8*i:], v)
		}
	}
	var mask uint64 = 1<<uint(bw) - 1
	if bw == 64 {
		mask = ^uint64(0)
	}
	for lane := 0; lane < lanes; lane++ {
		bit := 0
		for row := 0; row < w; row++ {
			k, off := bit/w, bit%w
			v := word(lanes*k+lane) >> uint(off)
			if off+bw > w {
				v |= word(lanes*(k+1)+lane) << uint(w-off)
			}
			put(flIndex(row, lane), v&mask)
			bit += bw
		}
	}
}
