package index

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/fri"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// remapChain builds three chained compactions over nFrags fragments of
// rows rows: v1 rewrites them 4 at a time after 10% deletions, v2 rewrites
// half of v1's outputs 2 at a time after 2% more, v3 rewrites everything
// left 3 at a time. It returns the versions and the live fragments after v3.
func remapChain(tb testing.TB, nFrags int, rows uint64) ([]*pb.FragReuseVersion, []*pb.Fragment) {
	rng := rand.New(rand.NewPCG(7, 8))
	type frag struct {
		id   uint32
		rows uint64
	}
	cur := make([]frag, nFrags)
	for i := range cur {
		cur[i] = frag{uint32(i), rows}
	}
	next := uint32(nFrags)
	var versions []*pb.FragReuseVersion
	step := func(dv uint64, in []frag, per int, del float64) []frag {
		v := &pb.FragReuseVersion{DatasetVersion: dv}
		var out []frag
		for i := 0; i < len(in); i += per {
			var olds []fri.OldFragment
			var surv uint64
			for _, f := range in[i:min(i+per, len(in))] {
				d := roaring.New()
				for k := 0; k < int(del*float64(f.rows)); k++ {
					d.Add(uint32(rng.Uint64N(f.rows)))
				}
				olds = append(olds, fri.OldFragment{ID: f.id, PhysicalRows: f.rows, Deleted: d})
				surv += f.rows - d.GetCardinality()
			}
			g, err := fri.BuildGroup(olds, []uint64{surv})
			if err != nil {
				tb.Fatal(err)
			}
			g.NewFragments[0].Id = next
			out = append(out, frag{next, surv})
			next++
			v.Groups = append(v.Groups, g)
		}
		versions = append(versions, v)
		return out
	}
	cur = step(10, cur, 4, 0.10)
	half := len(cur) / 2
	cur = append(step(20, cur[:half], 2, 0.02), cur[half:]...)
	cur = step(30, cur, 3, 0)
	var live []*pb.Fragment
	for _, f := range cur {
		live = append(live, &pb.Fragment{Id: f.id, PhysicalRows: f.rows})
	}
	return versions, live
}

// BenchmarkRemapSegment10M is the physical remap of one btree segment of
// 10 M entries (keys in random address order, as a btree over a random
// column has them) through a 3-version chain: read the segment, remap every
// address, drop deleted rows, write the new segment.
func BenchmarkRemapSegment10M(b *testing.B) {
	const nFrags, rows = 200, 50_000
	ctx := context.Background()
	bk, err := storage.Open(ctx, "file://"+b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer bk.Close()
	versions, live := remapChain(b, nFrags, rows)
	schema, _ := table.ParseSchema("id:int64,k:int64", []string{"id"})
	m := &pb.Manifest{Version: 40, Schema: schema, Fragments: live}
	// The segment: key = a random permutation of the row number.
	rng := rand.New(rand.NewPCG(1, 1))
	perm := rng.Perm(nFrags * rows)
	w, err := newBTreeWriter(ctx, bk, table.IndexDir("seg")+btreeFileName)
	if err != nil {
		b.Fatal(err)
	}
	inv := make([]uint64, len(perm))
	for i, p := range perm {
		inv[p] = table.RowAddr(uint32(i/rows), uint32(i%rows))
	}
	for k, a := range inv {
		key, _ := EncodeKey(pb.FieldType_FIELD_TYPE_INT64, int64(k))
		if err := w.add(key, a); err != nil {
			b.Fatal(err)
		}
	}
	n, err := w.close()
	if err != nil {
		b.Fatal(err)
	}
	all := roaring.New()
	all.AddRange(0, nFrags)
	bm, _ := all.ToBytes()
	seg := &pb.IndexMetadata{Uuid: "seg", Name: "k", Type: TypeBTree, FieldIds: []int32{1}, DatasetVersion: 1, FragmentBitmap: bm,
		Details: &pb.IndexMetadata_Scalar{Scalar: &pb.ScalarIndexDetails{Files: []string{table.IndexDir("seg") + btreeFileName}, NumEntries: uint64(len(perm)), SizeBytes: uint64(n)}}}
	chain, err := fri.Compile(versions)
	if err != nil {
		b.Fatal(err)
	}
	cover := liveSet(m)
	b.ResetTimer()
	var cpu, wall time.Duration
	var out *pb.IndexMetadata
	for i := 0; i < b.N; i++ {
		start, c0 := time.Now(), processCPU()
		if out, err = Rewrite(ctx, bk, m, []*pb.IndexMetadata{seg}, RewriteSpec{Chain: chain, Cover: cover}, BuildConfig{}); err != nil {
			b.Fatal(err)
		}
		wall, cpu = wall+time.Since(start), cpu+processCPU()-c0
	}
	b.ReportMetric(float64(len(perm)*b.N)/wall.Seconds(), "addrs/s")
	if cpu > 0 {
		b.ReportMetric(float64(len(perm)*b.N)/cpu.Seconds(), "addrs/cpu-s")
	}
	b.ReportMetric(float64(out.GetScalar().NumEntries), "entries-kept")
}

// BenchmarkChainRemap10M is the remap kernel alone on the same chain:
// 10 M addresses in random order through RemapBatch.
func BenchmarkChainRemap10M(b *testing.B) {
	const nFrags, rows = 200, 50_000
	versions, _ := remapChain(b, nFrags, rows)
	chain, err := fri.Compile(versions)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 3))
	addrs := make([]uint64, nFrags*rows)
	for i := range addrs {
		addrs[i] = table.RowAddr(uint32(i/rows), uint32(i%rows))
	}
	rng.Shuffle(len(addrs), func(i, j int) { addrs[i], addrs[j] = addrs[j], addrs[i] })
	out := make([]uint64, len(addrs))
	ok := make([]bool, len(addrs))
	b.ResetTimer()
	var cpu, wall time.Duration
	for i := 0; i < b.N; i++ {
		start, c0 := time.Now(), processCPU()
		chain.RemapBatch(addrs, out, ok, 0)
		wall, cpu = wall+time.Since(start), cpu+processCPU()-c0
	}
	b.ReportMetric(float64(len(addrs)*b.N)/wall.Seconds(), "addrs/s")
	if cpu > 0 {
		b.ReportMetric(float64(len(addrs)*b.N)/cpu.Seconds(), "addrs/cpu-s")
	}
}
