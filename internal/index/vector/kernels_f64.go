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
	var tail float64
	for i := body; i < n; i++ {
		if sq {
			d := x[i] - y[i]
			tail += float64(d * d)
		} else {
			tail += float64(x[i] * y[i])
		}
	}
	var l0, l1, l2, l3, l4, l5, l6, l7 float64
	for i := 0; i < body; i += 8 {
		a, b := x[i:i+8:i+8], y[i:i+8:i+8]
		if sq {
			d0, d1, d2, d3, d4, d5, d6, d7 := a[0]-b[0], a[1]-b[1], a[2]-b[2], a[3]-b[3], a[4]-b[4], a[5]-b[5], a[6]-b[6], a[7]-b[7]
			l0 += float64(d0 * d0)
			l1 += float64(d1 * d1)
			l2 += float64(d2 * d2)
			l3 += float64(d3 * d3)
			l4 += float64(d4 * d4)
			l5 += float64(d5 * d5)
			l6 += float64(d6 * d6)
			l7 += float64(d7 * d7)
		} else {
			l0 += float64(a[0] * b[0])
			l1 += float64(a[1] * b[1])
			l2 += float64(a[2] * b[2])
			l3 += float64(a[3] * b[3])
			l4 += float64(a[4] * b[4])
			l5 += float64(a[5] * b[5])
			l6 += float64(a[6] * b[6])
			l7 += float64(a[7] * b[7])
		}
	}
	return float32(tail + (l0 + l1 + l2 + l3 + l4 + l5 + l6 + l7))
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
