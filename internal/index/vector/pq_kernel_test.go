package vector

import (
	"math"
	"math/rand/v2"
	"testing"
)

// sub16Serial is LanceDB's L2 of two 16-float sub-vectors: one chunk of
// its 16 lanes, so the 16 squares added in element order.
func sub16Serial(x, c []float32) float32 {
	var s float32
	for k := range 16 {
		d := x[k] - c[k]
		s += float32(d * d)
	}
	return s
}

// pqKernelBook is a codebook of n 16-float entries over many magnitudes
// (the last bits then depend on the addition order) with near ties
// planted around x's neighbourhood: exact duplicates (the first must win),
// copies one ulp off in one element, and entries that are x itself
// nudged, so that the smallest distances often differ in the last bit or
// round to the same value.
func pqKernelBook(r *rand.Rand, n int, x []float32) []float32 {
	book := make([]float32, n*16)
	for i := range book {
		book[i] = float32(r.NormFloat64() * math.Pow(10, float64(r.IntN(5)-2)))
	}
	if n < 8 {
		return book
	}
	near := r.IntN(n - 3)
	for k := range 16 {
		book[near*16+k] = x[k] + float32(r.NormFloat64()*1e-3)
	}
	ent := func(c int) []float32 { return book[c*16 : (c+1)*16] }
	// A copy one ulp off, a duplicate, and (sometimes before the original)
	// another duplicate.
	one, dup := (near+1+r.IntN(n-1))%n, (near+1+r.IntN(n-1))%n
	copy(ent(one), ent(near))
	k := r.IntN(16)
	ent(one)[k] = math.Nextafter32(ent(one)[k], float32(math.Inf(1-2*r.IntN(2))))
	copy(ent(dup), ent(near))
	copy(ent(r.IntN(n)), ent(near))
	return book
}

func TestPQKernelEqualsScalarBitForBit(t *testing.T) {
	if !pqAVX2 {
		t.Skip("no AVX2 on this CPU: the encoder runs the scalar nearestSub16")
	}
	r := rand.New(rand.NewPCG(29, 6))
	ties, ulps := 0, 0
	// 8 and 16: only single blocks; 72 and 200: groups of eight blocks
	// and a remainder; 256: PQ's 8-bit codebook.
	for _, n := range []int{8, 16, 72, 200, 256} {
		for trial := range 400 {
			x := make([]float32, 16)
			for i := range x {
				x[i] = float32(r.NormFloat64() * math.Pow(10, float64(r.IntN(5)-2)))
			}
			book := pqKernelBook(r, n, x)
			// NaN distances: one entry's, or every entry's (x), are never
			// the smallest.
			switch trial % 50 {
			case 1:
				book[r.IntN(n)*16+r.IntN(16)] = float32(math.NaN())
			case 2:
				x[r.IntN(16)] = float32(math.NaN())
			}
			tb := transposeBook16(book)
			var d [256]float32
			var mins [8]float32
			var idx [8]int32
			pqNearest16x8AVX2(&x[0], &tb[0], n/8, &d[0], &mins, &idx)
			want, bd, second := 0, float32(math.Inf(1)), float32(math.Inf(1))
			for c := range n {
				w := sub16Serial(x, book[c*16:(c+1)*16])
				if math.Float32bits(d[c]) != math.Float32bits(w) && !(w != w && d[c] != d[c]) {
					t.Fatalf("n=%d trial %d entry %d: AVX2 distance %v (%08x), serial %v (%08x)", n, trial, c, d[c], math.Float32bits(d[c]), w, math.Float32bits(w))
				}
				// second: the smallest distance of the other entries.
				if w < bd {
					want, second, bd = c, bd, w
				} else if w < second {
					second = w
				}
			}
			switch {
			case second == bd:
				ties++
			case math.Nextafter32(bd, second) == second:
				ulps++
			}
			if got := nearestSub16T(x, tb, n); got != want {
				t.Fatalf("n=%d trial %d: AVX2 nearest %d, serial argmin %d", n, trial, got, want)
			}
			if n%4 == 0 {
				if got := nearestSub16(x, book, n); got != want {
					t.Fatalf("n=%d trial %d: scalar nearestSub16 %d, serial argmin %d", n, trial, got, want)
				}
			}
		}
	}
	// The planted near ties must have happened, or the test cannot tell a
	// kernel that breaks them differently.
	if ties == 0 || ulps == 0 {
		t.Fatalf("%d exact ties and %d one-ulp gaps at the minimum: the data does not exercise near ties", ties, ulps)
	}
	t.Logf("%d exact ties, %d one-ulp gaps at the minimum", ties, ulps)
}

func TestPQEncodeTransposedEqualsScalar(t *testing.T) {
	if !pqAVX2 {
		t.Skip("no AVX2 on this CPU")
	}
	r := rand.New(rand.NewPCG(29, 7))
	const m, dim = 48, 768
	p := &PQParams{NumSubVectors: m, NBits: 8, Codebook: make([]float32, m*256*16)}
	for i := range p.Codebook {
		p.Codebook[i] = float32(r.NormFloat64())
	}
	book16 := pqBook16(p)
	if book16 == nil {
		t.Fatal("pqBook16 refused an 8-bit PQ of 16-float sub-vectors")
	}
	x := make([]float32, dim)
	got, want := make([]byte, m), make([]byte, m)
	for trial := range 300 {
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		if trial%3 == 0 {
			// Sub-vectors that are codebook entries (distance 0, exact).
			j := r.IntN(m)
			copy(x[j*16:(j+1)*16], p.Codebook[(j*256+r.IntN(256))*16:])
		}
		pqEncodeInto(got, p, x, false, book16)
		pqEncodeInto(want, p, x, false, nil)
		if string(got) != string(want) {
			t.Fatalf("trial %d: codes %v with the transposed kernel, %v with the scalar one", trial, got, want)
		}
	}
	// Layouts the kernel does not cover keep the scalar path.
	for _, q := range []*PQParams{{NumSubVectors: m, NBits: 4, Codebook: make([]float32, m*16*16)}, {NumSubVectors: m, NBits: 8, Codebook: make([]float32, 10)}} {
		if pqBook16(q) != nil {
			t.Fatalf("pqBook16 transposed a codebook of %d bits and %d floats", q.NBits, len(q.Codebook))
		}
	}
}

// BenchmarkNearestSub16Transposed is BenchmarkNearestSub16 with the AVX2
// kernel on the transposed codebook, as the PQ encoder runs it.
func BenchmarkNearestSub16Transposed(b *testing.B) {
	if !pqAVX2 {
		b.Skip("no AVX2")
	}
	r := rand.New(rand.NewPCG(9, 9))
	book := make([]float32, 256*16)
	for i := range book {
		book[i] = float32(r.NormFloat64())
	}
	x := book[100*16 : 101*16]
	tb := transposeBook16(book)
	b.SetBytes(256 * 16 * 4)
	var sink int
	for b.Loop() {
		sink += nearestSub16T(x, tb, 256)
	}
	_ = sink
}
