package file

import (
	"math/rand/v2"
	"testing"
)

func TestPackInlineRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, w := range []int{8, 16, 32, 64} {
		for _, n := range []int{1, 7, 1023, 1024, 1025, 3000} {
			for _, bw := range []int{0, 1, 3, w / 2, w} {
				src := alloc(n * w / 8)
				for i := 0; i < n; i++ {
					v := r.Uint64()
					if bw < 64 {
						v &= 1<<uint(bw) - 1
					}
					for k := 0; k < w/8; k++ {
						src[i*w/8+k] = byte(v >> (8 * k))
					}
				}
				enc := packInline(nil, w, src, n)
				if len(enc) != inlineSize(w, src, n) {
					t.Fatalf("w=%d n=%d: size %d, inlineSize %d", w, n, len(enc), inlineSize(w, src, n))
				}
				b, err := unpackInline(w, enc, n)
				if err != nil {
					t.Fatal(err)
				}
				if string(b.data) != string(src) {
					t.Fatalf("w=%d n=%d bw=%d: round trip differs", w, n, bw)
				}
			}
		}
	}
}

// TestBlockWidth checks the word-wise OR against value by value, for
// every width, lengths around the unrolled loop's steps and a single
// high bit at each position.
func TestBlockWidth(t *testing.T) {
	for _, w := range []int{8, 16, 32, 64} {
		bpv := w / 8
		for n := 0; n <= 70; n++ {
			for pos := -1; pos < n; pos++ {
				for bit := 0; bit < w; bit += 7 {
					src := make([]byte, n*bpv+3) // bytes past n must not count
					for i := range src[n*bpv:] {
						src[n*bpv+i] = 0xff
					}
					want := 0
					if pos >= 0 {
						src[pos*bpv+bit/8] |= 1 << (bit % 8)
						want = bit + 1
					}
					if got := blockWidth(w, src, n); got != want {
						t.Fatalf("w=%d n=%d bit %d of value %d: width %d, want %d", w, n, bit, pos, got, want)
					}
				}
			}
		}
	}
}
