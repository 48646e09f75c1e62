//go:build !amd64

package vector

var pqAVX2 = false

func pqNearest16x8AVX2(x, book *float32, blocks int, dist *float32, mins *[8]float32, idx *[8]int32) {
	panic("no AVX2 PQ kernel on this architecture")
}
