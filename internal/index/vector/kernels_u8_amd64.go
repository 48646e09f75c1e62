package vector

// l2U8AVX2 is l2U8 over the first n bytes of a and b (n a positive
// multiple of 32), in kernels_u8_amd64.s.
//
//go:noescape
func l2U8AVX2(a, b *byte, n int) uint32
