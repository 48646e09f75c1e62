package vector

import "math"

// PQ encoding's nearest-codeword step on amd64 with AVX2. A 16-float
// sub-vector is one chunk of LanceDB's 16-lane L2, so its distance to a
// codebook entry is one serial chain of 16 adds (kernels.go): no SIMD
// within an entry keeps that order. Across entries it does: with the
// codebook transposed per eight entries (row k of a block holds element k
// of its eight entries), one 8-float register carries eight entries'
// chains, each lane adding its squares in element order 0..15 with a
// separate multiply and add, so every distance, and so every code, is bit
// for bit the scalar nearestSub16's and LanceDB's. Without AVX2 the
// encoder keeps nearestSub16 on the codebook as stored.

// transposeBook16 lays out a codebook of 16-float entries (n a multiple
// of 8 per sub-vector, any number of sub-vectors back to back) for
// pqNearest16x8AVX2: per block of eight entries, 16 rows of eight floats.
func transposeBook16(book []float32) []float32 {
	t := make([]float32, len(book))
	for b := 0; b+128 <= len(book); b += 128 {
		for e := range 8 {
			for k := range 16 {
				t[b+k*8+e] = book[b+e*16+k]
			}
		}
	}
	return t
}

// pqBook16 is the transposed codebook of an 8-bit PQ quantizer of
// 16-float sub-vectors when the AVX2 kernel can run, else nil.
func pqBook16(p *PQParams) []float32 {
	if !pqAVX2 || p == nil || p.NBits != 8 || p.entries() != 256 || p.NumSubVectors <= 0 ||
		len(p.Codebook) != p.NumSubVectors*256*16 {
		return nil
	}
	return transposeBook16(p.Codebook)
}

// nearestSub16T is nearestSub16 over the transposed codebook t of n
// entries (n a multiple of 8): the first of the smallest distances; a NaN
// distance is never the smallest.
func nearestSub16T(x, t []float32, n int) int {
	x, t = x[:16:16], t[:n*16:n*16]
	if n < 8 {
		return 0
	}
	var mins [8]float32
	var idx [8]int32
	pqNearest16x8AVX2(&x[0], &t[0], n/8, nil, &mins, &idx)
	// Each lane holds its first smallest entry; the smallest distance's
	// lowest entry across the lanes is the first overall.
	best, bd := 0, float32(math.Inf(1))
	for l, d := range mins {
		if e := int(idx[l]); d < bd || (d == bd && e < best) {
			best, bd = e, d
		}
	}
	return best
}
