package vector

// l2U8AVX2 is l2U8 over the first n bytes of a and b (n a positive
// multiple of 32), in kernels_u8_amd64.s.
//
//go:noescape
func l2U8AVX2(a, b *byte, n int) uint32

// l2U8Rows sets out[k] to l2U8(q, base[rows[k]*dim:][:dim]) for every k
// (dim a positive multiple of 32, len(q) = dim), prefetching each next
// row, in kernels_u8_amd64.s.
//
//go:noescape
func l2U8Rows(q, base *byte, dim int, rows *uint32, n int, out *uint32)

// prefetchRow asks for the n bytes (n > 0) from p into the cache.
//
//go:noescape
func prefetchRow(p *byte, n int)
