package fri

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	pb "github.com/compactord/compactord/gen/compactordv1"
)

// benchChain builds three chained compactions over 200 fragments of 50,000
// rows (10 M addresses):
//
//	v1 rewrites every fragment, 4 at a time, after 10% random deletions;
//	v2 rewrites half of v1's output, 2 at a time, after 2% more;
//	v3 rewrites everything left, 3 at a time, a third of it with 0.3%
//	deletions and the rest with none; 5 fragments are orphans.
func benchChain(tb testing.TB) ([]*pb.FragReuseVersion, []uint64) {
	rng := rand.New(rand.NewPCG(42, 43))
	const nFrags, rows = 200, 50_000
	frags := make([]uint32, nFrags)
	fragRows := map[uint32]uint64{}
	var addrs []uint64
	for i := range frags {
		frags[i] = uint32(i + 1)
		fragRows[frags[i]] = rows
		for o := uint32(0); o < rows; o++ {
			addrs = append(addrs, addr(frags[i], o))
		}
	}
	nextID := uint32(nFrags + 1)
	deletions := func(id uint32, p float64) *roaring.Bitmap {
		del := roaring.New()
		n := fragRows[id]
		for k := 0; k < int(p*float64(n)); k++ {
			del.Add(uint32(rng.Uint64N(n)))
		}
		return del
	}
	compact := func(dv uint64, in []uint32, per int, p func(i int) float64, orphans int) ([]uint32, *pb.FragReuseVersion) {
		var out []uint32
		var groups []*pb.FragReuseGroup
		removed := in[:orphans]
		in = in[orphans:]
		for i := 0; i < len(in); i += per {
			var olds []OldFragment
			var surv uint64
			for j, id := range in[i:min(i+per, len(in))] {
				del := deletions(id, p(i+j))
				olds = append(olds, OldFragment{ID: id, PhysicalRows: fragRows[id], Deleted: del})
				surv += fragRows[id] - del.GetCardinality()
			}
			// Split into new fragments of at most 120,000 rows.
			var news []nf
			for surv > 0 {
				n := min(surv, 120_000)
				news = append(news, nf{nextID, n})
				fragRows[nextID] = n
				out = append(out, nextID)
				nextID++
				surv -= n
			}
			groups = append(groups, grp(tb, olds, news...))
		}
		return out, ver(tb, dv, slices.Sorted(slices.Values(removed)), groups...)
	}
	out1, v1 := compact(10, frags, 4, func(int) float64 { return 0.10 }, 0)
	half := len(out1) / 2
	out2, v2 := compact(20, out1[:half], 2, func(int) float64 { return 0.02 }, 0)
	rest := append(slices.Clone(out1[half:]), out2...)
	_, v3 := compact(30, rest, 3, func(i int) float64 {
		if i%3 == 0 {
			return 0.003
		}
		return 0
	}, 5)
	return []*pb.FragReuseVersion{v1, v2, v3}, addrs
}

// BenchmarkRemap3Versions remaps 10 M addresses through a 3-version chain,
// in address order (a bitmap-index posting list) and shuffled (a btree's
// key order), and reports addresses per second.
func BenchmarkRemap3Versions(b *testing.B) {
	versions, addrs := benchChain(b)
	c := compile(b, versions...)
	shuffled := slices.Clone(addrs)
	rng := rand.New(rand.NewPCG(1, 1))
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	out := make([]uint64, len(addrs))
	ok := make([]bool, len(addrs))
	for _, bc := range []struct {
		name  string
		addrs []uint64
	}{{"sorted", addrs}, {"shuffled", shuffled}} {
		b.Run(bc.name+"/RemapBatch", func(b *testing.B) {
			cpu := processCPU()
			for b.Loop() {
				c.RemapBatch(bc.addrs, out, ok, 0)
			}
			reportRate(b, len(bc.addrs), processCPU()-cpu)
		})
		b.Run(bc.name+"/Remap", func(b *testing.B) {
			cpu := processCPU()
			for b.Loop() {
				for i, a := range bc.addrs {
					out[i], ok[i] = c.Remap(a)
				}
			}
			reportRate(b, len(bc.addrs), processCPU()-cpu)
		})
	}
}

func reportRate(b *testing.B, perOp int, cpu time.Duration) {
	n := float64(perOp) * float64(b.N)
	b.ReportMetric(n/b.Elapsed().Seconds(), "addrs/s")
	if cpu > 0 {
		b.ReportMetric(n/cpu.Seconds(), "addrs/cpu-s")
	}
}

func BenchmarkCompile3Versions(b *testing.B) {
	versions, _ := benchChain(b)
	for b.Loop() {
		if _, err := Compile(versions); err != nil {
			b.Fatal(err)
		}
	}
}

// The benchmark's chain is itself checked against the reference on a
// sample, so the number it reports is for correct work.
func TestBenchChainMatchesReference(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 10 M addresses")
	}
	versions, addrs := benchChain(t)
	c := compile(t, versions...)
	kinds := map[survivorKind]int{}
	for _, v := range c.versions {
		for _, f := range v.frags {
			kinds[f.kind]++
		}
	}
	t.Logf("representations: %v", kinds)
	ref := newReference(t, versions)
	for i := 0; i < len(addrs); i += 997 {
		wa, wok := ref.remap(t, addrs[i], 0)
		ga, gok := c.Remap(addrs[i])
		if wa != ga || wok != gok {
			t.Fatalf("%#x: got %#x,%v want %#x,%v", addrs[i], ga, gok, wa, wok)
		}
	}
}
