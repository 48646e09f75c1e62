package vector

import "math"

// Distance kernels. LanceDB's float32 L2 (lance-linalg's l2_scalar with
// 16 lanes) sums the tail of a vector past the last multiple of 16 first,
// then keeps 16 running sums, lane k holding the squares of elements
// k, k+16, k+32, ..., and adds the lanes in order 0..15 to the tail's sum.
// The kernels here add in exactly that order, so a distance compactord
// computes is bit for bit LanceDB's, and an argmin over centroids or
// codebook entries (partition assignment, PQ encoding) picks what LanceDB
// picks even on near ties. Each product goes through an explicit float32
// conversion: it forbids the compiler to fuse the multiply and the add
// (GOAMD64=v3, arm64), which would round differently from LanceDB.
//
// Go has no portable SIMD. On amd64 with AVX2, l2's 16 lanes are two
// 8-float registers (kernels_amd64.s): the same lanes, each summed in the
// same order with a separate multiply and add, so the same bits. Elsewhere
// the speed comes from independent chains. A
// single L2 of 768 floats has 16 of them (the lanes). PQ encoding's 16-
// float sub-vectors are one chunk each, so each distance is one serial
// chain of 16 adds: l2Sub16x4 computes four codebook entries at once to
// have four chains in flight.

// l2 is LanceDB's squared L2 distance of a and b (len(b) ≥ len(a)).
func l2(a, b []float32) float32 {
	n := len(a)
	b = b[:n]
	body := n &^ 15
	var tail float32
	for i := body; i < n; i++ {
		d := a[i] - b[i]
		tail += float32(d * d)
	}
	if useAVX2 && body > 0 {
		var l [16]float32
		lanes16AVX2(&a[0], &b[0], body/16, &l)
		lanes := l[0] + l[1] + l[2] + l[3] + l[4] + l[5] + l[6] + l[7] + l[8] + l[9] + l[10] + l[11] + l[12] + l[13] + l[14] + l[15]
		return tail + lanes
	}
	// Four passes of four lanes each: sixteen accumulators and their
	// operands do not fit amd64's sixteen float registers (the compiler
	// spills them), and a lane's sum is the same whichever pass computes it.
	s0, s1, s2, s3 := lanes4(a, b, 0, body)
	s4, s5, s6, s7 := lanes4(a, b, 4, body)
	s8, s9, s10, s11 := lanes4(a, b, 8, body)
	s12, s13, s14, s15 := lanes4(a, b, 12, body)
	lanes := s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7 + s8 + s9 + s10 + s11 + s12 + s13 + s14 + s15
	return tail + lanes
}

// lanes4 are lanes off..off+3 of l2's 16 over a[:body] and b[:body].
func lanes4(a, b []float32, off, body int) (s0, s1, s2, s3 float32) {
	for i := off; i < body; i += 16 {
		x, y := a[i:i+4:i+4], b[i:i+4:i+4]
		d0, d1, d2, d3 := x[0]-y[0], x[1]-y[1], x[2]-y[2], x[3]-y[3]
		s0 += float32(d0 * d0)
		s1 += float32(d1 * d1)
		s2 += float32(d2 * d2)
		s3 += float32(d3 * d3)
	}
	return
}

// l2Sub16x4 is l2 of the 16-float sub-vector x against each of the four
// consecutive 16-float entries of c (64 floats): one chunk, so the lanes
// are the 16 squares, added in order, as four interleaved chains.
func l2Sub16x4(x, c []float32) (r0, r1, r2, r3 float32) {
	x, c = x[:16:16], c[:64:64]
	for k := range 16 {
		xk := x[k]
		d0, d1, d2, d3 := xk-c[k], xk-c[16+k], xk-c[32+k], xk-c[48+k]
		r0 += float32(d0 * d0)
		r1 += float32(d1 * d1)
		r2 += float32(d2 * d2)
		r3 += float32(d3 * d3)
	}
	return
}

// nearestSub16 is the nearest of the n (a multiple of 4) 16-float entries
// of book to x: the first of the smallest distances, as LanceDB's argmin.
func nearestSub16(x, book []float32, n int) int {
	best, bd := 0, float32(math.Inf(1))
	for c := 0; c+4 <= n; c += 4 {
		d0, d1, d2, d3 := l2Sub16x4(x, book[c*16:])
		if d0 < bd {
			best, bd = c, d0
		}
		if d1 < bd {
			best, bd = c+1, d1
		}
		if d2 < bd {
			best, bd = c+2, d2
		}
		if d3 < bd {
			best, bd = c+3, d3
		}
	}
	return best
}
