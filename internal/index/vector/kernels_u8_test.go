package vector

import (
	"math/rand/v2"
	"testing"
)

// naiveL2U8 is the plain definition: Σ (a[i]-b[i])², modulo 2^32.
func naiveL2U8(a, b []byte) uint32 {
	var s uint32
	for i := range a {
		d := int(a[i]) - int(b[i])
		s += uint32(d * d)
	}
	return s
}

func TestL2U8KernelsAgree(t *testing.T) {
	if !useAVX2 {
		t.Log("no AVX2 on this CPU: only the Go path is checked")
	}
	r := rand.New(rand.NewPCG(21, 22))
	fill := func(n int, pattern int) ([]byte, []byte) {
		a, b := make([]byte, n), make([]byte, n)
		for i := range n {
			switch pattern {
			case 0:
				a[i], b[i] = byte(r.IntN(256)), byte(r.IntN(256))
			case 1: // the largest differences, both signs
				if i%2 == 0 {
					a[i], b[i] = 255, 0
				} else {
					a[i], b[i] = 0, 255
				}
			case 2: // near values
				a[i] = byte(r.IntN(256))
				b[i] = byte(min(255, max(0, int(a[i])+r.IntN(5)-2)))
			}
		}
		return a, b
	}
	for _, n := range []int{0, 1, 3, 4, 15, 16, 31, 32, 33, 63, 64, 65, 100, 128, 767, 768, 769, 1536, 4097} {
		for p := range 3 {
			for range 20 {
				a, b := fill(n, p)
				want := naiveL2U8(a, b)
				if got := l2U8Go(a, b); got != want {
					t.Fatalf("n=%d pattern %d: Go path %d, want %d", n, p, got, want)
				}
				if got := l2U8(a, b); got != want {
					t.Fatalf("n=%d pattern %d: l2U8 (AVX2 %v) %d, want %d", n, p, useAVX2, got, want)
				}
				if useAVX2 && n >= 32 {
					body := n &^ 31
					if got, w := l2U8AVX2(&a[0], &b[0], body), naiveL2U8(a[:body], b[:body]); got != w {
						t.Fatalf("n=%d pattern %d: AVX2 body %d, want %d", n, p, got, w)
					}
				}
			}
		}
	}
	// Sums past 2^32 wrap the same way on both paths (70 000 × 255²).
	a, b := fill(70000, 1)
	want := naiveL2U8(a, b)
	if uint64(want) == 70000*255*255 {
		t.Fatal("the wrap case does not wrap")
	}
	if got := l2U8(a, b); got != want {
		t.Fatalf("wrapped sum %d, want %d", got, want)
	}
	if got := l2U8([]byte{10, 20}, []byte{7, 21}); got != 10 {
		t.Fatalf("l2U8([10 20], [7 21]) = %d, want 10", got)
	}
}

// TestL2U8ManyIsRowByRow: the batched kernel (prefetching, AVX2 where the
// width allows) gives each row's l2U8, for widths on and off its path.
func TestL2U8ManyIsRowByRow(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	for _, dim := range []int{16, 32, 64, 100, 768} {
		codes := make([]byte, 300*dim)
		for i := range codes {
			codes[i] = byte(r.IntN(256))
		}
		q := codes[17*dim : 18*dim]
		for _, n := range []int{0, 1, 2, 7, 40} {
			rows := make([]uint32, n)
			for i := range rows {
				rows[i] = uint32(r.IntN(300))
			}
			if n > 2 {
				rows[1] = rows[0] // a row twice
				rows[n-1] = 299   // the last row
			}
			out := make([]uint32, n+3)
			for i := range out {
				out[i] = 0xdeadbeef
			}
			l2U8Many(q, codes, dim, rows, out)
			for k, row := range rows {
				if want := naiveL2U8(q, codes[int(row)*dim:(int(row)+1)*dim]); out[k] != want {
					t.Fatalf("dim %d, %d rows: row %d (%d) = %d, want %d", dim, n, k, row, out[k], want)
				}
			}
			for k := n; k < len(out); k++ {
				if out[k] != 0xdeadbeef {
					t.Fatalf("dim %d, %d rows: wrote out[%d]", dim, n, k)
				}
			}
		}
	}
}
