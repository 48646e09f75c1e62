package vector

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/compactord/compactord/internal/format/file"
)

// TestF16BitsRoundsToNearestEven: every finite float16 converts back to
// its own bits, a value halfway between two float16s goes to the one of
// even mantissa, and a value just off halfway to the nearer one.
func TestF16BitsRoundsToNearestEven(t *testing.T) {
	for h := range uint32(1 << 16) {
		if h&0x7c00 == 0x7c00 {
			continue // infinities and NaNs
		}
		f := file.Float16(uint16(h))
		if got := f16Bits(f); got != uint16(h) && !(f == 0 && got&0x7fff == 0) {
			t.Fatalf("float16 %#04x (%v) rounds to %#04x", h, f, got)
		}
		next := uint16(h) + 1
		if h&0x7fff == 0x7bff || h&0x8000 != 0 {
			continue
		}
		lo, hi := float64(f), float64(file.Float16(next))
		mid := float32((lo + hi) / 2)
		want := uint16(h)
		if h&1 == 1 {
			want = next
		}
		if got := f16Bits(mid); got != want {
			t.Fatalf("halfway between %#04x and %#04x (%v): %#04x, want %#04x", h, next, mid, got, want)
		}
		if up := math.Nextafter32(mid, float32(math.Inf(1))); float64(up) < hi && f16Bits(up) != next {
			t.Fatalf("just above halfway between %#04x and %#04x: %#04x", h, next, f16Bits(up))
		}
	}
	if f16Bits(65519) != 0x7bff || f16Bits(65520) != 0x7c00 || f16Bits(-1e9) != 0xfc00 {
		t.Fatalf("overflow: %#04x %#04x %#04x", f16Bits(65519), f16Bits(65520), f16Bits(-1e9))
	}
}

// TestFMA32IsRoundedOnce: fma32 equals a·b + c computed exactly and
// rounded once to float32, over operands of wide exponent ranges (where
// rounding through float64 first would differ).
func TestFMA32IsRoundedOnce(t *testing.T) {
	// a·b = 2^-24 + 2^-60 exactly; plus 1 it
	// rounds in float64 to 1 + 2^-24, the midpoint of 1 and 1 + 2^-23,
	// while the exact sum lies above it.
	a, b := float32(0x1p-24*(1+0x1p-12)), float32(1-0x1p-12+0x1p-24)
	if got := fma32(a, b, 1); got != 1+0x1p-23 {
		t.Fatalf("fma32 just above a midpoint: %v, want 1+2^-23", got)
	}
	if got := fma32(-a, b, -1); got != -1-0x1p-23 {
		t.Fatalf("fma32 just below a negative midpoint: %v, want -1-2^-23", got)
	}
	r := rand.New(rand.NewPCG(3, 4))
	f := func() float32 {
		return float32(math.Ldexp(r.Float64()+1, r.IntN(60)-30)) * float32(1-2*r.IntN(2))
	}
	for i := range 200000 {
		a, b, c := f(), f(), f()
		if i%3 == 0 {
			c = -float32(float64(a)*float64(b)) * (1 + float32(r.IntN(3)-1)*0x1p-23)
		}
		exact := new(big.Float).SetPrec(200).Mul(big.NewFloat(float64(a)), big.NewFloat(float64(b)))
		exact.Add(exact, big.NewFloat(float64(c)))
		want, _ := exact.Float32()
		if got := fma32(a, b, c); got != want {
			t.Fatalf("fma32(%v, %v, %v) = %v, want %v", a, b, c, got, want)
		}
	}
}

// BenchmarkKernels768 compares the float16 and float64 kernels with the
// float32 one on a 768-d pair (ns per distance).
func BenchmarkKernels768(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	x, y := make([]float32, 768), make([]float32, 768)
	x64, y64 := make([]float64, 768), make([]float64, 768)
	for i := range x {
		x[i], y[i] = f16r(float32(r.Float64())), f16r(float32(r.Float64()))
		x64[i], y64[i] = float64(x[i]), float64(y[i])
	}
	var sink float32
	b.Run("f32", func(b *testing.B) {
		for b.Loop() {
			sink += l2(x, y)
		}
	})
	b.Run("f16", func(b *testing.B) {
		for b.Loop() {
			sink += l2F16(x, y)
		}
	})
	b.Run("f64", func(b *testing.B) {
		for b.Loop() {
			sink += l2F64(x64, y64)
		}
	})
	_ = sink
}

// TestF16KernelsFMAEqualGo: the FMA unit's float16 kernels give the bits
// of f16Kernel (whose arithmetic TestTypedKernelsMatchLanceDB holds to
// LanceDB's) for every length from 1 to 100 and 768, over float16 values
// of every exponent and over a row whose sum lands on a float32 midpoint
// when rounded through float64 (where only a single rounding is right).
func TestF16KernelsFMAEqualGo(t *testing.T) {
	if !useFMA16 {
		t.Skip("no AVX2 and FMA on this CPU")
	}
	r := rand.New(rand.NewPCG(16, 17))
	f16 := func() float32 {
		for {
			h := uint16(r.Uint32())
			if h&0x7c00 != 0x7c00 { // no infinities or NaNs
				return file.Float16(h)
			}
		}
	}
	unit := func() float32 { return f16r(float32(r.Float64()*2 - 1)) }
	lengths := []int{768}
	for n := 1; n <= 100; n++ {
		lengths = append(lengths, n)
	}
	checked := 0
	for _, n := range lengths {
		for trial := range 40 {
			x, y := make([]float32, n), make([]float32, n)
			for i := range n {
				if trial%2 == 0 {
					x[i], y[i] = f16(), f16()
				} else {
					x[i], y[i] = unit(), unit()
				}
			}
			if g, a := f16Kernel(x, y, true), l2F16(x, y); math.Float32bits(g) != math.Float32bits(a) {
				t.Fatalf("l2 over %d elements (trial %d): Go %v (%#x), FMA %v (%#x)", n, trial, g, math.Float32bits(g), a, math.Float32bits(a))
			}
			if g, a := 1-f16Kernel(x, y, false), dotDistF16(x, y); math.Float32bits(g) != math.Float32bits(a) {
				t.Fatalf("dot over %d elements (trial %d): Go %v, FMA %v", n, trial, g, a)
			}
			checked++
		}
	}
	// 1 + a·b with a·b = 2^-24 + 2^-60: through float64 the sum rounds to
	// the midpoint 1 + 2^-24, once it rounds up to 1 + 2^-23.
	a, b := float32(0x1p-24*(1+0x1p-12)), float32(1-0x1p-12+0x1p-24)
	x, y := []float32{1, a}, []float32{1, b}
	if got := dotDistF16(x, y); got != 1-(1+0x1p-23) {
		t.Fatalf("dot on a float64 midpoint: %v, want %v", got, 1-(1+0x1p-23))
	}
	t.Logf("%d vector pairs equal", checked)
}

// BenchmarkF16Kernel768 is a 768-d float16 L2 distance, the FMA unit's
// kernel and the Go one.
func BenchmarkF16Kernel768(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	x, y := make([]float32, 768), make([]float32, 768)
	for i := range x {
		x[i], y[i] = f16r(float32(r.Float64())), f16r(float32(r.Float64()))
	}
	b.Run("fma", func(b *testing.B) {
		if !useFMA16 {
			b.Skip("no AVX2 and FMA")
		}
		for b.Loop() {
			l2F16(x, y)
		}
	})
	b.Run("go", func(b *testing.B) {
		for b.Loop() {
			f16Kernel(x, y, true)
		}
	})
}
