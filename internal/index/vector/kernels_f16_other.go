//go:build !amd64

package vector

var useFMA16 = false

func l2F16FMA(x, y *float32, n int) float32 {
	panic("no FMA kernel on this architecture")
}

func dotF16FMA(x, y *float32, n int) float32 {
	panic("no FMA kernel on this architecture")
}
