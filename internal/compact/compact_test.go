package compact_test

import (
	"context"
	"slices"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/compact"
	"github.com/compactord/compactord/internal/fri"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/testutil"
)

func removedOf(t *testing.T, v *pb.FragReuseVersion) []uint32 {
	t.Helper()
	bm, err := fri.DecodeBitmap32(v.RemovedFragments)
	if err != nil {
		t.Fatal(err)
	}
	return bm.ToArray()
}

func TestCompactMergesSmallFragments(t *testing.T) {
	testutil.ForEachStore(t, func(t *testing.T, url string) {
		f := newFixture(t, url, 6, 100)
		f.createIndex("by_id", "id", index.TypeBTree)
		f.createIndex("by_cat", "cat", index.TypeBitmap)
		before := f.where(f.head())
		res := f.run(f.compactor(compact.Config{}))
		m := res.Manifest
		if len(m.Fragments) != 1 || m.Fragments[0].PhysicalRows != 600 || m.Fragments[0].DeletionFile != nil {
			t.Fatalf("fragments after compaction: %v", m.Fragments)
		}
		if res.Transaction.ReadVersion != res.Manifest.Version-1 {
			t.Fatalf("read version %d", res.Transaction.ReadVersion)
		}
		after := f.where(m)
		if len(after) != len(before) {
			t.Fatalf("%d rows before, %d after", len(before), len(after))
		}
		vs := table.FragReuse(m).GetVersions()
		if len(vs) != 1 || len(vs[0].Groups) != 1 || vs[0].DatasetVersion != m.Version || len(removedOf(t, vs[0])) != 0 {
			t.Fatalf("FRI: %v", vs)
		}
		// Every old address remaps to where its row lives now.
		c := f.chain()
		for k, a := range before {
			if got, ok := c.Remap(a); !ok || got != after[k] {
				t.Fatalf("key %d: remap %x -> %x,%v; lives at %x", k, a, got, ok, after[k])
			}
		}
		f.checkLookups("by_id", keysRange(-1, 601))
		for _, cat := range []string{"c0", "c3"} {
			r, err := index.Lookup(context.Background(), f.tb.Bucket, m, "by_cat", cat, index.LookupOptions{Rows: true})
			if err != nil || len(r.Matches) != 120 {
				t.Fatalf("by_cat %s: %d matches, %v", cat, len(r.Matches), err)
			}
			for _, mt := range r.Matches {
				if mt.Row[1] != cat {
					t.Fatalf("by_cat %s returned %v", cat, mt.Row)
				}
			}
		}
	})
}

func TestCompactMaterializesDeletionsAndCopiesCleanRowGroups(t *testing.T) {
	f := newFixture(t, "mem://"+testutil.UniqueName(t), 3, 1000)
	f.deleteWhere(nil, "id >= 1000 AND id < 1300") // fragment 1 is deletion-heavy
	c := f.compactor(compact.Config{TargetRowsPerFragment: 5000, BatchRows: 64})
	p := f.prepare(c)
	if p.Stats.RowGroupsCopied != 2 || p.Stats.RowsRewritten != 700 || p.Stats.FragmentsIn != 3 || p.Stats.FragmentsOut != 1 {
		t.Fatalf("stats %+v", p.Stats)
	}
	res, err := c.Commit(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	m := res.Manifest
	if len(m.Fragments) != 1 || m.Fragments[0].PhysicalRows != 2700 || m.Fragments[0].DeletionFile != nil {
		t.Fatalf("fragments: %v", m.Fragments)
	}
	live := f.where(m)
	for k := int64(0); k < 3000; k++ {
		_, ok := live[k]
		if ok == (k >= 1000 && k < 1300) {
			t.Fatalf("key %d live=%v", k, ok)
		}
	}
	// No index covers anything: no FRI version is needed (Lance #7774).
	if table.FindIndex(m, table.FragReuseIndexName) != nil {
		t.Fatal("an FRI version was recorded for a table without indices")
	}
}

// A large deletion-heavy fragment is split into target-sized outputs, in
// order, and the row map splits survivors across them by physical rows.
func TestCompactSplitsAtTarget(t *testing.T) {
	f := newFixture(t, "mem://"+testutil.UniqueName(t), 1, 2500)
	f.createIndex("by_id", "id", index.TypeBTree)
	f.deleteWhere(nil, "id < 500")
	before := f.where(f.head())
	res := f.run(f.compactor(compact.Config{TargetRowsPerFragment: 600, Parallelism: 1}))
	var rows []uint64
	for _, fr := range res.Manifest.Fragments {
		rows = append(rows, fr.PhysicalRows)
	}
	if !slices.Equal(rows, []uint64{600, 600, 600, 200}) {
		t.Fatalf("output fragments %v", rows)
	}
	after := f.where(res.Manifest)
	c := f.chain()
	for k, a := range before {
		if got, ok := c.Remap(a); !ok || got != after[k] {
			t.Fatalf("key %d: remap -> %x,%v; lives at %x", k, got, ok, after[k])
		}
	}
	f.checkLookups("by_id", []int64{0, 499, 500, 1099, 1100, 2499})
}

// The upstream regression (seed fri-prune-fully-deleted-fragments, Lance
// #7374: a fully deleted fragment's rows must not come back as ghosts),
// asserted at the remap level and end to end: 10
// fragments, an index, one fragment fully deleted, a deferred compaction of
// the rest.
func TestDeferredCompactionPrunesFullyDeletedFragment(t *testing.T) {
	testutil.ForEachStore(t, func(t *testing.T, url string) {
		f := newFixture(t, url, 10, 100)
		f.createIndex("by_id", "id", index.TypeBTree)
		f.createIndex("by_cat", "cat", index.TypeBitmap)
		gone := uint32(3)
		if _, _, err := f.tb.Delete(context.Background(), nil, opsFragment(gone)); err != nil {
			t.Fatal(err)
		}
		res := f.run(f.compactor(compact.Config{}))
		vs := table.FragReuse(res.Manifest).GetVersions()
		if len(vs) != 1 {
			t.Fatalf("want one FRI version, got %d", len(vs))
		}
		if got := removedOf(t, vs[0]); !slices.Equal(got, []uint32{gone}) {
			t.Fatalf("removed_fragments = %v, want [%d]", got, gone)
		}
		var old []uint32
		for _, g := range vs[0].Groups {
			for _, d := range g.OldFragments {
				old = append(old, d.Id)
			}
		}
		if slices.Contains(old, gone) || len(old) != 9 {
			t.Fatalf("old fragments %v", old)
		}
		// Remap level: every address of the removed fragment is deleted,
		// never passed through (an end-to-end lookup alone is masked by
		// liveness and would pass with the bug).
		c := f.chain()
		for off := uint32(0); off < 100; off++ {
			if a, ok := c.Remap(table.RowAddr(gone, off)); ok {
				t.Fatalf("address %d/%d remapped to %x; it was deleted", gone, off, a)
			}
		}
		// End to end: no lookup returns a row of the deleted fragment.
		f.checkLookups("by_id", keysRange(250, 450))
		for _, cat := range []string{"c0", "c1", "c2", "c3", "c4"} {
			r, err := index.Lookup(context.Background(), f.tb.Bucket, res.Manifest, "by_cat", cat, index.LookupOptions{Rows: true})
			if err != nil || len(r.Matches) != 180 {
				t.Fatalf("by_cat %s: %d rows, %v", cat, len(r.Matches), err)
			}
			for _, mt := range r.Matches {
				if k := mt.Row[0].(int64); k >= 300 && k < 400 {
					t.Fatalf("by_cat %s returned deleted key %d", cat, k)
				}
			}
		}
	})
}

// The orphan set is computed after the load-time remap. The
// index was built over the original fragments; 1,2 became X, X was then
// fully deleted. Only the remapped bitmap names X.
func TestOrphanSetUsesLoadTimeRemap(t *testing.T) {
	f := newFixture(t, "mem://"+testutil.UniqueName(t), 6, 100)
	f.createIndex("by_id", "id", index.TypeBTree)
	res := f.run(f.compactor(compact.Config{}), 1, 2)
	x := newIDs(res.Manifest, res.Transaction)[0]
	if _, _, err := f.tb.Delete(context.Background(), nil, opsFragment(x)); err != nil {
		t.Fatal(err)
	}
	res = f.run(f.compactor(compact.Config{}), 3, 4)
	vs := table.FragReuse(res.Manifest).GetVersions()
	if len(vs) != 2 || !slices.Equal(removedOf(t, vs[1]), []uint32{x}) {
		t.Fatalf("second version removed %v, want [%d]", removedOf(t, vs[1]), x)
	}
	c := f.chain()
	for _, a := range []uint64{table.RowAddr(1, 0), table.RowAddr(2, 99), table.RowAddr(x, 5)} {
		if got, ok := c.Remap(a); ok {
			t.Fatalf("address %x of a fully deleted row remapped to %x", a, got)
		}
	}
	f.checkLookups("by_id", keysRange(90, 510))
}

// Lance #7774: no FRI version when no index covers any old
// fragment.
func TestNoFRIVersionWhenNoIndexCovers(t *testing.T) {
	f := newFixture(t, "mem://"+testutil.UniqueName(t), 3, 100)
	f.createIndex("by_id", "id", index.TypeBTree)
	f.appendKeys(300, 100)
	f.appendKeys(400, 100)
	res := f.run(f.compactor(compact.Config{}), 3, 4)
	if table.FindIndex(res.Manifest, table.FragReuseIndexName) != nil {
		t.Fatal("FRI version recorded although the index covers none of 3, 4")
	}
	f.checkLookupsOpts("by_id", keysRange(0, 500), true)
}

// A group never straddles index segments: with a base segment over 0-4 and a catch-up segment over
// 5-9, no group mixes them, so no segment loses coverage and no lookup falls
// back to a scan.
func TestGroupsNeverStraddleSegments(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "mem://"+testutil.UniqueName(t), 5, 100)
	f.createIndex("by_id", "id", index.TypeBTree)
	for i := int64(5); i < 10; i++ {
		f.appendKeys(i*100, 100)
	}
	m := f.head()
	seg, err := index.CatchUpSegment(ctx, f.tb.Bucket, m, "by_id", index.BuildConfig{})
	if err != nil {
		t.Fatal(err)
	}
	txn := f.tb.NewTxn(m.Version)
	txn.Operation = &pb.Transaction_CreateIndex{CreateIndex: &pb.CreateIndex{NewIndices: []*pb.IndexMetadata{seg}}}
	if _, err := f.tb.CommitOrClean(ctx, txn, index.SegmentFiles(seg)); err != nil {
		t.Fatal(err)
	}
	res := f.run(f.compactor(compact.Config{}))
	for _, g := range table.FragReuse(res.Manifest).GetVersions()[0].Groups {
		var ids []uint32
		for _, d := range g.OldFragments {
			ids = append(ids, d.Id)
		}
		if !slices.Equal(ids, []uint32{0, 1, 2, 3, 4}) && !slices.Equal(ids, []uint32{5, 6, 7, 8, 9}) {
			t.Fatalf("group %v mixes segments", ids)
		}
	}
	segs, _ := index.Segments(res.Manifest, "by_id")
	cov, err := index.Covered(segs, table.FragReuse(res.Manifest).GetVersions())
	if err != nil {
		t.Fatal(err)
	}
	for _, fr := range res.Manifest.Fragments {
		if !cov.Contains(fr.Id) {
			t.Fatalf("fragment %d lost index coverage", fr.Id)
		}
	}
	r, err := index.Lookup(ctx, f.tb.Bucket, res.Manifest, "by_id", "777", index.LookupOptions{ScanUnindexed: true})
	if err != nil || len(r.Matches) != 1 || len(r.Scanned) != 0 {
		t.Fatalf("lookup: %v scanned %v, %v", r.Addrs(), r.Scanned, err)
	}
}

func TestInlineRemap(t *testing.T) {
	testutil.ForEachStore(t, func(t *testing.T, url string) {
		f := newFixture(t, url, 5, 100)
		f.createIndex("by_id", "id", index.TypeBTree)
		f.createIndex("by_cat", "cat", index.TypeBitmap)
		f.deleteWhere(nil, "id >= 150 AND id < 180")
		gone := uint32(4)
		if _, _, err := f.tb.Delete(context.Background(), nil, opsFragment(gone)); err != nil {
			t.Fatal(err)
		}
		oldSegs := map[string]bool{}
		for _, ix := range f.head().Indices {
			oldSegs[ix.Uuid] = true
		}
		c := f.compactor(compact.Config{InlineRemap: true})
		out, err := c.Run(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		m := out.Result.Manifest
		if table.FindIndex(m, table.FragReuseIndexName) != nil {
			t.Fatal("inline remap recorded an FRI version")
		}
		if !out.Result.Transaction.GetRewrite().FragmentIdsReserved || out.Stats.IndexSegmentsRewritten != 2 {
			t.Fatalf("rewrite %v, stats %+v", out.Result.Transaction.GetRewrite().FragmentIdsReserved, out.Stats)
		}
		for _, ix := range m.Indices {
			if oldSegs[ix.Uuid] || ix.DatasetVersion != out.Read.Version {
				t.Fatalf("segment %s %s not rewritten (dataset_version %d)", ix.Name, ix.Uuid, ix.DatasetVersion)
			}
			cov, _ := fri.DecodeBitmap32(ix.FragmentBitmap)
			if !cov.Equals(roaring.BitmapOf(m.Fragments[0].Id)) {
				t.Fatalf("segment %s covers %v", ix.Name, cov.ToArray())
			}
			if ix.GetScalar().NumEntries != 370 {
				t.Fatalf("segment %s holds %d entries, want 370", ix.Name, ix.GetScalar().NumEntries)
			}
		}
		f.checkLookups("by_id", keysRange(0, 500))
	})
}

func TestDryRunPlanIsStable(t *testing.T) {
	f := newFixture(t, "mem://"+testutil.UniqueName(t), 4, 10)
	c := f.compactor(compact.Config{})
	_, a, err := c.Plan(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, b, err := c.Plan(context.Background(), nil)
	if err != nil || len(a) != 1 || !slices.Equal(a[0].Fragments, b[0].Fragments) || !slices.Equal(a[0].Fragments, []uint32{0, 1, 2, 3}) {
		t.Fatalf("plans %v %v %v", a, b, err)
	}
}
