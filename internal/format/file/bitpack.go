package file

import "unsafe"

// FastLanes bit packing, the layout Lance's bitpacking encodings use: 1024
// values of a W-bit type are split into 1024/W lanes; lane l holds, in W
// packed words strided 1024/W apart, the values of the rows of a transposed
// order (FL_ORDER), each value's low bits first.

var flOrder = [8]int{0, 4, 2, 6, 1, 5, 3, 7}

// unpackFL decodes one block of 1024 values of a w-bit type (w = 8, 16, 32
// or 64) packed at bw bits from src (bw*1024/8 bytes) into dst (1024
// values of w/8 bytes each, little endian).
func unpackFL(w, bw int, src []byte, dst []byte) {
	switch w {
	case 8:
		unpackT[uint8](bw, src, dst)
	case 16:
		unpackT[uint16](bw, src, dst)
	case 32:
		unpackT[uint32](bw, src, dst)
	default:
		unpackT[uint64](bw, src, dst)
	}
}

type word interface {
	uint8 | uint16 | uint32 | uint64
}

// unpackT works on typed views of the buffers, copying them first when
// they are not aligned for T.
func unpackT[T word](bw int, src, dst []byte) {
	var z T
	w := int(unsafe.Sizeof(z)) * 8
	n := bw * 1024 / 8
	if bw == 0 {
		clear(dst[:1024*w/8])
		return
	}
	if uintptr(unsafe.Pointer(&src[0]))%uintptr(w/8) != 0 {
		src = append([]byte(nil), src[:n]...)
	}
	in := unsafe.Slice((*T)(unsafe.Pointer(&src[0])), n/(w/8))
	var out []T
	if uintptr(unsafe.Pointer(&dst[0]))%uintptr(w/8) == 0 {
		out = unsafe.Slice((*T)(unsafe.Pointer(&dst[0])), 1024)
	} else {
		tmp := make([]T, 1024)
		defer func() {
			copy(dst, unsafe.Slice((*byte)(unsafe.Pointer(&tmp[0])), 1024*w/8))
		}()
		out = tmp
	}
	lanes := 1024 / w
	var mask T = ^T(0)
	if bw < w {
		mask = T(1)<<uint(bw) - 1
	}
	// Row by row, every lane at once: a row's lanes are adjacent in the
	// packed words and in the output, so the inner loops run over
	// contiguous slices.
	for row := 0; row < w; row++ {
		bit := row * bw
		k, off := bit/w, uint(bit%w)
		base := flOrder[row/8]*16 + (row%8)*128
		o := out[base : base+lanes]
		lo := in[lanes*k : lanes*k+lanes]
		if int(off)+bw > w {
			hi := in[lanes*(k+1) : lanes*(k+1)+lanes]
			hi = hi[:len(o)]
			lo = lo[:len(o)]
			for l := range o {
				o[l] = (lo[l]>>off | hi[l]<<(uint(w)-off)) & mask
			}
			continue
		}
		lo = lo[:len(o)]
		for l := range o {
			o[l] = lo[l] >> off & mask
		}
	}
}
