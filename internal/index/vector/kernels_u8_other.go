//go:build !amd64

package vector

func l2U8AVX2(a, b *byte, n int) uint32 {
	panic("no AVX2 kernel on this architecture")
}
