package file

import (
	"math/bits"
	"unsafe"
)

// packFL packs one block of 1024 values of a w-bit type (little endian in
// src, w/8 bytes each) at bw bits in FastLanes order, appending bw*1024/8
// bytes to dst. It is the inverse of unpackFL.
func packFL(dst []byte, w, bw int, src []byte) []byte {
	switch w {
	case 8:
		return packT[uint8](dst, bw, src)
	case 16:
		return packT[uint16](dst, bw, src)
	case 32:
		return packT[uint32](dst, bw, src)
	}
	return packT[uint64](dst, bw, src)
}

func packT[T word](dst []byte, bw int, src []byte) []byte {
	var z T
	w := int(unsafe.Sizeof(z)) * 8
	n := bw * 1024 / 8
	if bw == 0 {
		return dst
	}
	at := len(dst)
	dst = append(dst, make([]byte, n)...)
	var words [1024]T
	outWords := words[:n/(w/8)]
	var in []T
	if uintptr(unsafe.Pointer(&src[0]))%uintptr(w/8) == 0 {
		in = unsafe.Slice((*T)(unsafe.Pointer(&src[0])), 1024)
	} else {
		in = make([]T, 1024)
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&in[0])), 1024*w/8), src)
	}
	lanes := 1024 / w
	var mask T = ^T(0)
	if bw < w {
		mask = T(1)<<uint(bw) - 1
	}
	// Row by row, every lane at once (see unpackT).
	for row := 0; row < w; row++ {
		bit := row * bw
		k, off := bit/w, uint(bit%w)
		base := flOrder[row/8]*16 + (row%8)*128
		v := in[base : base+lanes]
		lo := outWords[lanes*k : lanes*k+lanes]
		lo = lo[:len(v)]
		for l := range v {
			lo[l] |= (v[l] & mask) << off
		}
		if int(off)+bw > w {
			hi := outWords[lanes*(k+1) : lanes*(k+1)+lanes]
			hi = hi[:len(v)]
			for l := range v {
				hi[l] |= (v[l] & mask) >> (uint(w) - off)
			}
		}
	}
	copy(dst[at:], unsafe.Slice((*byte)(unsafe.Pointer(&outWords[0])), n))
	return dst
}

// blockWidth is the bit width the values of one block need (unsigned).
func blockWidth(w int, src []byte, n int) int {
	// Four independent accumulators over 8-byte words: the OR of all
	// values is the OR of their bytes' words whatever the value width,
	// so the narrow widths share the wide loop and only its tail differs.
	b := src[:n*w/8]
	var o0, o1, o2, o3 uint64
	for len(b) >= 32 {
		o0 |= le.Uint64(b)
		o1 |= le.Uint64(b[8:])
		o2 |= le.Uint64(b[16:])
		o3 |= le.Uint64(b[24:])
		b = b[32:]
	}
	for len(b) >= 8 {
		o0 |= le.Uint64(b)
		b = b[8:]
	}
	for i, v := range b {
		o1 |= uint64(v) << (8 * i)
	}
	or := o0 | o1 | o2 | o3
	// Fold the word's lanes onto one value of w bits.
	switch w {
	case 8:
		or |= or >> 32
		or |= or >> 16
		or |= or >> 8
		or &= 0xff
	case 16:
		or |= or >> 32
		or |= or >> 16
		or &= 0xffff
	case 32:
		or |= or >> 32
		or &= 0xffffffff
	}
	return bits.Len64(or)
}

// packInline writes inline bitpacking of n w-bit values: per 1024 values
// (the last block zero padded) a header word holding the bit width, then
// the packed block.
func packInline(dst []byte, w int, src []byte, n int) []byte {
	bpv := w / 8
	var pad []byte
	for k := 0; k*1024 < n; k++ {
		m := min(1024, n-k*1024)
		blk := src[k*1024*bpv : (k*1024+m)*bpv]
		if m < 1024 {
			if pad == nil {
				pad = alloc(1024 * bpv)
			}
			clear(pad)
			copy(pad, blk)
			blk = pad
		}
		bw := blockWidth(w, blk, 1024)
		var hdr [8]byte
		le.PutUint64(hdr[:], uint64(bw))
		dst = append(dst, hdr[:bpv]...)
		dst = packFL(dst, w, bw, blk)
	}
	return dst
}

// inlineSize is the size packInline would write.
func inlineSize(w int, src []byte, n int) int {
	bpv := w / 8
	total := 0
	for k := 0; k*1024 < n; k++ {
		m := min(1024, n-k*1024)
		bw := blockWidth(w, src[k*1024*bpv:], m)
		total += bpv + bw*128
	}
	return total
}
