package vector

import (
	"math"
	"math/rand/v2"
	"testing"
)

// lanceL2 is LanceDB's float32 squared L2 as lance-linalg writes it
// (l2_scalar with 16 lanes): the tail past the last multiple of 16 summed
// first, then 16 lane sums over the chunks, added to it in lane order.
func lanceL2(a, b []float32) float32 {
	const lanes = 16
	body := len(a) / lanes * lanes
	var tail float32
	for i := body; i < len(a); i++ {
		d := a[i] - b[i]
		tail += float32(d * d)
	}
	var sums [lanes]float32
	for i := 0; i < body; i += lanes {
		for k := range lanes {
			d := a[i+k] - b[i+k]
			sums[k] += float32(d * d)
		}
	}
	var total float32
	for _, s := range sums {
		total += s
	}
	return tail + total
}

// wideFloats are values over many magnitudes, so that the order of the
// additions shows in the last bits.
func wideFloats(r *rand.Rand, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(r.NormFloat64() * math.Pow(10, float64(r.IntN(7)-3)))
	}
	return out
}

func TestL2IsLanceDBsSumOrder(t *testing.T) {
	// Both kernels: the scalar one, and the AVX2 one where the CPU has it.
	defer func(v bool) { useAVX2 = v }(useAVX2)
	for _, avx := range []bool{false, useAVX2} {
		useAVX2 = avx
		t.Run(map[bool]string{false: "scalar", true: "avx2"}[avx], testL2Order)
	}
}

func testL2Order(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	differs := 0
	for _, n := range []int{0, 1, 3, 15, 16, 17, 31, 32, 33, 100, 128, 767, 768, 1536} {
		for range 200 {
			a, b := wideFloats(r, n), wideFloats(r, n)
			got, want := l2(a, b), lanceL2(a, b)
			if math.Float32bits(got) != math.Float32bits(want) {
				t.Fatalf("n=%d: l2 = %v (%08x), LanceDB's order gives %v (%08x)", n, got, math.Float32bits(got), want, math.Float32bits(want))
			}
			// A plain serial sum rounds differently often enough on such
			// data: the order is what this test pins.
			var serial float32
			for i := range a {
				d := a[i] - b[i]
				serial += float32(d * d)
			}
			if serial != want {
				differs++
			}
		}
	}
	if differs == 0 {
		t.Fatal("no vector where the addition order matters: the test data cannot tell the orders apart")
	}
}

func TestNearestSub16IsLanceDBsArgmin(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	book := wideFloats(r, 256*16)
	// Duplicate entries: the first of equal distances wins, as in
	// LanceDB's argmin.
	copy(book[200*16:201*16], book[7*16:8*16])
	copy(book[9*16:10*16], book[7*16:8*16])
	for trial := range 2000 {
		x := wideFloats(r, 16)
		if trial%10 == 0 {
			x = append([]float32(nil), book[200*16:201*16]...)
		}
		want, bd := 0, float32(math.Inf(1))
		for c := range 256 {
			if d := lanceL2(x, book[c*16:(c+1)*16]); d < bd {
				want, bd = c, d
			}
		}
		if got := nearestSub16(x, book, 256); got != want {
			t.Fatalf("trial %d: nearest entry %d, LanceDB's argmin %d", trial, got, want)
		}
		if trial%10 == 0 && want != 7 {
			t.Fatalf("trial %d: an entry duplicated at 7, 9 and 200 resolved to %d, not the first", trial, want)
		}
		d0, d1, d2, d3 := l2Sub16x4(x, book[40*16:])
		for k, d := range []float32{d0, d1, d2, d3} {
			if w := lanceL2(x, book[(40+k)*16:(41+k)*16]); math.Float32bits(d) != math.Float32bits(w) {
				t.Fatalf("l2Sub16x4 entry %d: %v, want %v", k, d, w)
			}
		}
	}
}
