//go:build !amd64

package vector

func l2U8AVX2(a, b *byte, n int) uint32 {
	panic("no AVX2 kernel on this architecture")
}

func l2U8Rows(q, base *byte, dim int, rows *uint32, n int, out *uint32) {
	panic("no AVX2 kernel on this architecture")
}

func prefetchRow(p *byte, n int) {}
