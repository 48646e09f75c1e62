//go:build !amd64

package vector

var useAVX2 = false

func lanes16AVX2(a, b *float32, chunks int, out *[16]float32) {
	panic("no AVX2 kernel on this architecture")
}
