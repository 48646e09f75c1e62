package lancewal

import "unsafe"

func unsafeBytes(u []uint64) []byte {
	if len(u) == 0 {
		return []byte{}
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&u[0])), 8*len(u))
}
