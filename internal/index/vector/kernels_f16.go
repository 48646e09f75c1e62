package vector

import (
	"math"

	"github.com/compactord/compactord/internal/format/file"
)

// float16 arithmetic as LanceDB 0.39 does it on x86-64 with AVX2 (its
// binary carries lance-linalg's fp16 C kernels, picked at run time by the
// CPU's features). l2_f16_avx2 and dot_f16_avx2 (read from the binary's
// machine code) widen each element to float32 and, for a vector of 16 or
// more elements, keep 16 float32 lanes in four 4-wide registers, lane k
// accumulating element k, k+16, ... with a fused multiply-add; the lanes
// are then added as registers (r1+r0, r3+r2, then those two), the four
// sums of the result pairwise ((s0+s2)+(s1+s3)), and the elements past
// the last multiple of 16 are added one by one, again fused. A vector of
// fewer than 16 elements (a PQ sub-vector) is one fused chain from 0.
// On a CPU with AVX-512 FP16 LanceDB runs other kernels, whose sums this
// does not reproduce.
//
// Element-wise float16 operations (a PQ residual, a cosine index's
// normalization) widen to float32, operate and round to float16
// (nearest, ties to even), as the half crate does.

// f16Bits rounds f to the nearest float16 (ties to even) and returns its
// bits.
func f16Bits(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	a := math.Abs(float64(f))
	switch {
	case math.IsNaN(a):
		return sign | 0x7e00
	case a >= 65520: // the midpoint of 65504 (the largest) and 2^16
		return sign | 0x7c00
	case a < 1.0/16384: // below the smallest normal: multiples of 2^-24
		return sign | uint16(math.RoundToEven(a*(1<<24)))
	}
	exp := int(b>>23&0xff) - 127
	m := b & 0x7fffff
	r, rem := m>>13, m&0x1fff
	if rem > 0x1000 || (rem == 0x1000 && r&1 == 1) {
		r++
	}
	// A carry out of the mantissa moves the exponent up, as it should.
	return sign | uint16(uint32(exp+15)<<10+r)
}

// f16r is f rounded to float16 (as float32, exactly).
func f16r(f float32) float32 { return file.Float16(f16Bits(f)) }

// fma32 is a·b + c rounded once to float32 (vfmadd's result).
func fma32(a, b, c float32) float32 {
	p := float64(a) * float64(b) // exact: 48 significant bits at most
	s := p + float64(c)
	// Rounding s to float32 after rounding p+c to float64 can differ from
	// rounding p+c once only when s fell exactly on the midpoint of two
	// normal float32s (the 29 bits float32 drops are 1 then zeros) or in
	// float32's subnormal range: elsewhere s's rounding is p+c's.
	if bits := math.Float64bits(s); bits&(1<<29-1) != 1<<28 && bits&(0x7ff<<52) >= (1023-126)<<52 {
		return float32(s)
	}
	return fma32Exact(a, b, c)
}

// fma32Exact is fma32 for a sum that may have been rounded onto a
// float32 midpoint.
func fma32Exact(a, b, c float32) float32 {
	p := float64(a) * float64(b)
	s := p + float64(c)
	// Knuth's two-sum: s + e is p + c exactly.
	bb := s - p
	e := (p - (s - bb)) + (float64(c) - bb)
	r := float32(s)
	if e == 0 || float64(r) == s {
		return r
	}
	// Rounding s to float32 after rounding p+c to float64 is wrong only
	// when s fell exactly on the midpoint of two float32s: then p+c lies
	// on e's side of it.
	lo, hi := r, r
	if float64(r) < s {
		hi = math.Nextafter32(r, float32(math.Inf(1)))
	} else {
		lo = math.Nextafter32(r, float32(math.Inf(-1)))
	}
	if (float64(lo)+float64(hi))/2 != s {
		return r
	}
	if e > 0 {
		return hi
	}
	return lo
}

// f16Kernel is l2_f16_avx2 (sq) or dot_f16_avx2 (!sq) over float16
// values held exactly in float32.
func f16Kernel(x, y []float32, sq bool) float32 {
	n := len(x)
	y = y[:n]
	var s float32
	body := n &^ 15
	if body > 0 {
		var l [16]float32
		for i := 0; i < body; i += 16 {
			xs, ys := x[i:i+16:i+16], y[i:i+16:i+16]
			// fma32 by hand (the call is not inlined): the hot loop.
			for k := range 16 {
				a, b := xs[k], ys[k]
				if sq {
					a = a - b
					b = a
				}
				sum := float64(a)*float64(b) + float64(l[k])
				if bits := math.Float64bits(sum); bits&(1<<29-1) != 1<<28 && bits&(0x7ff<<52) >= (1023-126)<<52 {
					l[k] = float32(sum)
				} else {
					l[k] = fma32Exact(a, b, l[k])
				}
			}
		}
		var v [4]float32
		for k := range 4 {
			v[k] = (l[12+k] + l[8+k]) + (l[4+k] + l[k])
		}
		s = (v[0] + v[2]) + (v[1] + v[3])
	}
	for i := body; i < n; i++ {
		if sq {
			d := x[i] - y[i]
			s = fma32(d, d, s)
		} else {
			s = fma32(x[i], y[i], s)
		}
	}
	return s
}

// l2F16 is LanceDB's squared L2 distance of two float16 vectors.
func l2F16(x, y []float32) float32 {
	if useFMA16 && len(x) > 0 {
		y = y[:len(x)]
		return l2F16FMA(&x[0], &y[0], len(x))
	}
	return f16Kernel(x, y, true)
}

// dotDistF16 is LanceDB's dot distance (1 − x·y) of two float16 vectors.
func dotDistF16(x, y []float32) float32 {
	if useFMA16 && len(x) > 0 {
		y = y[:len(x)]
		return 1 - dotF16FMA(&x[0], &y[0], len(x))
	}
	return 1 - f16Kernel(x, y, false)
}

// normalizeF16 is lance 12's normalize over float16 values: the squares
// summed in order in float32, its square root, each element divided by it
// in float32 and rounded to float16 (checked against LanceDB's stored
// vectors; the half crate's float16 sums of lance's generic code give
// other bits).
func normalizeF16(dst, v []float32) []float32 {
	var sum float32
	for _, x := range v {
		sum += float32(x * x)
	}
	n := float32(math.Sqrt(float64(sum)))
	for i, x := range v {
		dst[i] = f16r(x / n)
	}
	return dst
}
