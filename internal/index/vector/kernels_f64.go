package vector

import "math"

// float64 arithmetic as lance does it: l2 and dot keep 8 float64 lanes
// (lane k summing elements k, k+8, ...), add the elements past the last
// multiple of 8 first, the lanes in order after them, and round the
// result to float32, which is what an argmin compares (ties: the first).
// Products are never fused with the adds (Rust does not contract them).
// A cosine index normalizes in float64: the squares summed in order, the
// square root, each element divided by it.

// f64Kernel is lance's l2 (sq) or dot (!sq) of two float64 vectors.
func f64Kernel(x, y []float64, sq bool) float32 {
	n := len(x)
	y = y[:n]
	body := n &^ 7
	term := func(i int) float64 {
		if sq {
			d := x[i] - y[i]
			return float64(d * d)
		}
		return float64(x[i] * y[i])
	}
	var tail float64
	for i := body; i < n; i++ {
		tail += term(i)
	}
	var l [8]float64
	for i := 0; i < body; i += 8 {
		for k := range 8 {
			l[k] += term(i + k)
		}
	}
	var lanes float64
	for _, s := range l {
		lanes += s
	}
	return float32(tail + lanes)
}

// l2F64 is lance's squared L2 distance of two float64 vectors.
func l2F64(x, y []float64) float32 { return f64Kernel(x, y, true) }

// dotDistF64 is lance's dot distance (1 − x·y, in float32).
func dotDistF64(x, y []float64) float32 { return 1 - f64Kernel(x, y, false) }

// normalizeF64 is lance's normalize over float64 values.
func normalizeF64(dst, v []float64) []float64 {
	var s float64
	for _, x := range v {
		s += float64(x * x)
	}
	n := math.Sqrt(s)
	for i, x := range v {
		dst[i] = x / n
	}
	return dst
}
