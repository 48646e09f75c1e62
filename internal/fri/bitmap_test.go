package fri

import (
	"math/rand/v2"
	"testing"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
)

// bucketsOf splits through roaring64's serialized form; it must give
// exactly the buckets of a split one address at a time, including for
// sets whose removals left a fragment with no address.
func TestBucketsOfMatchesByAddress(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 50 {
		bm := roaring64.New()
		frags := 1 + rng.IntN(8)
		for f := range frags {
			key := uint64(f*3+rng.IntN(3)) << 32
			switch rng.IntN(3) {
			case 0: // dense run
				bm.AddRange(key, key+uint64(1+rng.IntN(300000)))
			case 1: // sparse
				for range rng.IntN(5000) {
					bm.Add(key + uint64(rng.IntN(1<<20)))
				}
			default: // everything but a few
				bm.AddRange(key, key+70000)
				for range rng.IntN(100) {
					bm.Remove(key + uint64(rng.IntN(70000)))
				}
			}
			if rng.IntN(4) == 0 { // emptied again
				bm.RemoveRange(key, key+1<<32-1)
				bm.Remove(key + 1<<32 - 1)
			}
		}
		if trial%2 == 0 {
			bm.RunOptimize()
		}
		got, want := bucketsOf(bm), bucketsByAddress(bm)
		if len(got) != len(want) {
			t.Fatalf("trial %d: %d buckets, by address %d", trial, len(got), len(want))
		}
		for i := range got {
			if got[i].key != want[i].key || !got[i].bm.Equals(want[i].bm) || got[i].bm.IsEmpty() {
				t.Fatalf("trial %d: bucket %d is %d:%d addresses, by address %d:%d", trial, i,
					got[i].key, got[i].bm.GetCardinality(), want[i].key, want[i].bm.GetCardinality())
			}
		}
		back, err := decodeBitmap64(encodeBitmap64(bm))
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		if len(back) != len(want) {
			t.Fatalf("trial %d: encoded %d buckets, want %d", trial, len(back), len(want))
		}
	}
	if bucketsOf(roaring64.New()) != nil || bucketsOf(nil) != nil {
		t.Fatal("buckets of an empty set")
	}
}
