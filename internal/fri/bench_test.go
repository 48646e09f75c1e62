package fri

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
)

// benchChain builds three chained compactions over 200 fragments of 50,000
// rows (10 M addresses):
//
//	v1 rewrites every fragment, 4 at a time, after 10% random deletions;
//	v2 rewrites half of v1's output, 2 at a time, after 2% more;
//	v3 rewrites everything left, 3 at a time, a third of it with 0.3%
//	deletions and the rest with none; 5 fragments are removed.
func benchChain(tb testing.TB) ([]Version, []uint64) {
	rng := rand.New(rand.NewPCG(42, 43))
	const nFrags, rows = 200, 50_000
	frags := make([]uint64, nFrags)
	fragRows := map[uint64]uint64{}
	var addrs []uint64
	for i := range frags {
		frags[i] = uint64(i + 1)
		fragRows[frags[i]] = rows
		for o := uint32(0); o < rows; o++ {
			addrs = append(addrs, addr(uint32(frags[i]), o))
		}
	}
	nextID := uint64(nFrags + 1)
	deletions := func(id uint64, p float64) *roaring.Bitmap {
		del := roaring.New()
		n := fragRows[id]
		for k := 0; k < int(p*float64(n)); k++ {
			del.Add(uint32(rng.Uint64N(n)))
		}
		return del
	}
	compact := func(dv uint64, in []uint64, per int, p func(i int) float64, removed int) ([]uint64, Version) {
		var out []uint64
		v := Version{DatasetVersion: dv}
		if removed > 0 {
			v.Removed = roaring.New()
			for _, id := range in[:removed] {
				v.Removed.Add(uint32(id))
			}
		}
		in = in[removed:]
		for i := 0; i < len(in); i += per {
			var olds []OldFragment
			var surv uint64
			for j, id := range in[i:min(i+per, len(in))] {
				del := deletions(id, p(i+j))
				olds = append(olds, OldFragment{ID: id, PhysicalRows: fragRows[id], Deleted: del})
				surv += fragRows[id] - del.GetCardinality()
			}
			slices.SortFunc(olds, func(a, b OldFragment) int { return cmpU64(a.ID, b.ID) })
			// Split into new fragments of at most 120,000 rows.
			var news []Digest
			for surv > 0 {
				n := min(surv, 120_000)
				news = append(news, nf(nextID, n))
				fragRows[nextID] = n
				out = append(out, nextID)
				nextID++
				surv -= n
			}
			v.Groups = append(v.Groups, grp(tb, olds, news...))
		}
		return out, v
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
	return []Version{v1, v2, v3}, addrs
}

// BenchmarkRemap3Versions remaps 10 M addresses through a 3-version chain,
// in address order (a bitmap-index posting list) and shuffled (a btree's
// key order), and reports addresses per second.
func BenchmarkRemap3Versions(b *testing.B) {
	versions, addrs := benchChain(b)
	ix := newIndex(b, versions...)
	c := ix.Chain()
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
			for b.Loop() {
				c.RemapBatch(bc.addrs, out, ok, 0)
			}
			b.ReportMetric(float64(len(bc.addrs))*float64(b.N)/b.Elapsed().Seconds(), "addrs/s")
		})
		b.Run(bc.name+"/Remapper", func(b *testing.B) {
			remap := ix.Remapper(0)
			for b.Loop() {
				for i, a := range bc.addrs {
					out[i], ok[i] = remap(a)
				}
			}
			b.ReportMetric(float64(len(bc.addrs))*float64(b.N)/b.Elapsed().Seconds(), "addrs/s")
		})
	}
}

// The benchmark's chain is checked against the reference on a sample, so
// the number it reports is for correct work.
func TestBenchChainMatchesReference(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 10 M addresses")
	}
	versions, addrs := benchChain(t)
	ix := newIndex(t, versions...)
	remap := ix.Remapper(0)
	for i := 0; i < len(addrs); i += 99991 {
		wa, wok := referenceRemap(versions, addrs[i], 0)
		ga, gok := remap(addrs[i])
		if wa != ga || wok != gok {
			t.Fatalf("%#x: got %#x,%v want %#x,%v", addrs[i], ga, gok, wa, wok)
		}
	}
}
