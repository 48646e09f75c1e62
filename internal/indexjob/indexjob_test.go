package indexjob_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/compact"
	"github.com/compactord/compactord/internal/fri"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/indexjob"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/testutil"
)

var cats = []string{"c0", "c1", "c2", "c3", "c4"}

// After `index remap` every FRI version that every index has absorbed is
// trimmed (here: all), and lookups give the same answers before and after.
func TestRemapAndTrimKeepLookupsIdentical(t *testing.T) {
	testutil.ForEachStore(t, func(t *testing.T, url string) {
		f := newFixture(t, url, 12, 50)
		f.createIndex("by_id", "id", index.TypeBTree)
		f.createIndex("by_cat", "cat", index.TypeBitmap)
		f.deleteKeys(func(k int64) bool { return k%7 == 0 }, 0, 600)
		f.deleteFragment(5) // ghost rows unless removed_fragments works
		f.compact()
		f.deleteKeys(func(k int64) bool { return k%11 == 0 }, 0, 600)
		f.appendKeys(600, 50)
		f.appendKeys(650, 50)
		if _, err := f.job(indexjob.Config{}).CatchUp(context.Background()); err != nil {
			t.Fatal(err)
		}
		f.compact() // the new fragments, and the earlier outputs
		if n := len(table.FragReuse(f.head()).GetVersions()); n < 2 {
			t.Fatalf("want at least 2 FRI versions before the remap, got %d", n)
		}
		ids := numKeys(-1, 701, url)
		before := f.answers("by_id", ids)
		sameAnswers(t, "before remap", before, f.truth(0, ids))
		beforeCat := f.answers("by_cat", cats)
		sameAnswers(t, "by_cat before remap", beforeCat, f.truth(1, cats))

		old := map[string]bool{}
		for _, ix := range f.head().Indices {
			old[ix.Uuid] = true
		}
		j := f.job(indexjob.Config{})
		rs, err := j.Remap(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !rs.Committed || !slices.Equal(rs.Indices, []string{"by_cat", "by_id"}) {
			t.Fatalf("remap step %+v", rs)
		}
		m := f.head()
		for _, ix := range m.Indices {
			if table.IsSystemIndex(ix) {
				continue
			}
			if old[ix.Uuid] || ix.DatasetVersion < rs.Version-2 || fri.NeedsRemap(ix, table.FragReuse(m).GetVersions()) {
				t.Fatalf("segment %s/%s not remapped (dv %d)", ix.Name, ix.Uuid, ix.DatasetVersion)
			}
		}
		sameAnswers(t, "after remap", f.answers("by_id", ids), before)
		ts, err := j.Trim(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !ts.Committed || ts.Kept != 0 || ts.Dropped < 2 {
			t.Fatalf("trim step %+v", ts)
		}
		m = f.head()
		if table.FindIndex(m, table.FragReuseIndexName) != nil {
			t.Fatal("the FRI singleton survived a trim of every version")
		}
		sameAnswers(t, "after trim", f.answers("by_id", ids), before)
		sameAnswers(t, "by_cat after trim", f.answers("by_cat", cats), beforeCat)
		// The rebuilt segments hold only live rows.
		var entries uint64
		segs, _ := index.Segments(m, "by_id")
		for _, s := range segs {
			entries += s.GetScalar().NumEntries
		}
		if entries != f.liveRows() {
			t.Fatalf("by_id holds %d entries for %d live rows", entries, f.liveRows())
		}
		// A second run has nothing to do.
		out, err := j.Run(context.Background())
		if err != nil || out.CatchUp.Committed || out.Remap.Committed || out.Trim.Committed {
			t.Fatalf("second run: %+v, %v", out, err)
		}
	})
}

// Lance #7870: index a has been remapped, index b covers
// neither the old nor the new fragments of the version: the version is
// trimmed, and b is left alone.
func TestTrimWithNonCoveringIndex(t *testing.T) {
	f := newFixture(t, "mem://"+testutil.UniqueName(t), 5, 50)
	f.createIndex("b", "cat", index.TypeBitmap) // covers 0-4 only
	for i := int64(5); i < 10; i++ {
		f.appendKeys(i*50, 50)
	}
	f.createIndex("a", "id", index.TypeBTree) // covers 0-9
	f.compact(5, 6, 7, 8, 9)
	m := f.head()
	vs := table.FragReuse(m).GetVersions()
	if len(vs) != 1 {
		t.Fatalf("want one FRI version, got %d", len(vs))
	}
	bSeg, _ := index.Segments(m, "b")
	if fri.Trimmable(vs[0], m.Indices) {
		t.Fatal("trimmable before a is remapped")
	}
	out, err := f.job(indexjob.Config{}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out.Remap.Indices, []string{"a"}) || !out.Trim.Committed || out.Trim.Kept != 0 {
		t.Fatalf("outcome %+v %+v", out.Remap, out.Trim)
	}
	m = f.head()
	if table.FindIndex(m, table.FragReuseIndexName) != nil {
		t.Fatal("the version was not trimmed")
	}
	if b2, _ := index.Segments(m, "b"); b2[0].Uuid != bSeg[0].Uuid {
		t.Fatal("index b was rewritten although it needed nothing")
	}
	ids := numKeys(0, 500, "mem://")
	sameAnswers(t, "a", f.answers("a", ids), f.truth(0, ids))
}

// Lance #7286: the remap decision follows the segment's
// data, not its coverage. After a deferred compaction the load-time
// coverage already names the new fragment, yet the data holds old
// addresses and must be rewritten; a segment built after the compaction
// must not be.
func TestRemapDecidedFromDataNotCoverage(t *testing.T) {
	f := newFixture(t, "mem://"+testutil.UniqueName(t), 4, 50)
	f.createIndex("old", "id", index.TypeBTree)
	res := f.compact()
	newID := res.Manifest.Fragments[0].Id
	f.createIndex("fresh", "id", index.TypeBTree)
	m := f.head()
	vs := table.FragReuse(m).GetVersions()
	oldSeg, _ := index.Segments(m, "old")
	cov, err := index.Coverage(oldSeg[0], vs)
	if err != nil || !slices.Equal(cov.ToArray(), []uint32{newID}) {
		t.Fatalf("load-time coverage %v, %v", cov.ToArray(), err)
	}
	freshSeg, _ := index.Segments(m, "fresh")
	step, err := f.job(indexjob.Config{}).Remap(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(step.Indices, []string{"old"}) {
		t.Fatalf("remapped %v, want [old]", step.Indices)
	}
	m = f.head()
	if s, _ := index.Segments(m, "fresh"); s[0].Uuid != freshSeg[0].Uuid {
		t.Fatal("a segment built after the compaction was remapped")
	}
	ids := numKeys(0, 200, "mem://")
	sameAnswers(t, "old", f.answers("old", ids), f.truth(0, ids))
}

// A deferred compaction committed between a remap's read and its commit is
// compatible: the remapped segment (dataset_version = the remap's read)
// still goes through the new FRI version, and the next run drains it.
func TestRemapRacingCompaction(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "mem://"+testutil.UniqueName(t), 6, 50)
	f.createIndex("by_id", "id", index.TypeBTree)
	f.compact(0, 1, 2)
	read := f.head()
	segs, _ := index.Segments(read, "by_id")
	chain, err := fri.Compile(table.FragReuse(read).GetVersions())
	if err != nil {
		t.Fatal(err)
	}
	cover, _ := index.Coverage(segs[0], table.FragReuse(read).GetVersions())
	ns, err := index.Rewrite(ctx, f.tb.Bucket, read, segs, index.RewriteSpec{Chain: chain, Cover: cover}, index.BuildConfig{})
	if err != nil {
		t.Fatal(err)
	}
	f.compact(3, 4, 5) // lands first
	txn := f.tb.NewTxn(read.Version)
	txn.Operation = &pb.Transaction_CreateIndex{CreateIndex: &pb.CreateIndex{NewIndices: []*pb.IndexMetadata{ns}, RemovedIndexUuids: []string{segs[0].Uuid}}}
	if _, err := f.tb.CommitOrClean(ctx, txn, index.SegmentFiles(ns)); err != nil {
		t.Fatal(err)
	}
	ids := numKeys(0, 300, "mem://")
	want := f.truth(0, ids)
	sameAnswers(t, "after the race", f.answers("by_id", ids), want)
	out, err := f.job(indexjob.Config{}).Run(ctx)
	if err != nil || !out.Remap.Committed || !out.Trim.Committed || out.Trim.Kept != 0 {
		t.Fatalf("drain: %+v %+v, %v", out.Remap, out.Trim, err)
	}
	sameAnswers(t, "drained", f.answers("by_id", ids), want)
}

// An FRI trim planned before a catch-up segment landed must not commit
// over it (the segment may need a version the trim drops); the job plans
// the trim again.
func TestTrimRetriesOverNewSegment(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "mem://"+testutil.UniqueName(t), 3, 50)
	f.createIndex("by_id", "id", index.TypeBTree)
	f.compact()
	j := f.job(indexjob.Config{})
	if _, err := j.Remap(ctx); err != nil {
		t.Fatal(err)
	}
	read := f.head()
	kept, dropped := fri.Trim(table.FragReuse(read), read.Indices)
	if dropped != 1 {
		t.Fatalf("dropped %d", dropped)
	}
	f.appendKeys(150, 50)
	if _, err := j.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	txn := f.tb.NewTxn(read.Version)
	txn.Operation = &pb.Transaction_CreateIndex{CreateIndex: &pb.CreateIndex{NewIndices: []*pb.IndexMetadata{{
		Uuid: "trim", Name: table.FragReuseIndexName, Type: table.FragReuseIndexName,
		Details: &pb.IndexMetadata_FragReuse{FragReuse: kept}}}}}
	if _, err := f.tb.CommitOrClean(ctx, txn, nil); !errors.Is(err, commit.ErrRetryable) {
		t.Fatalf("stale trim: %v", err)
	}
	if s, err := j.Trim(ctx); err != nil || !s.Committed {
		t.Fatalf("trim: %+v, %v", s, err)
	}
}

func TestCatchUpTargets(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "mem://"+testutil.UniqueName(t), 2, 50)
	f.createIndex("a", "id", index.TypeBTree)
	f.createIndex("b", "cat", index.TypeBitmap)
	f.appendKeys(100, 50)
	s, err := f.job(indexjob.Config{Indices: []string{"b"}}).CatchUp(ctx)
	if err != nil || !s.Committed || !slices.Equal(s.Indices, []string{"b"}) {
		t.Fatalf("catch-up of b: %+v, %v", s, err)
	}
	if un, _ := index.Unindexed(f.head(), "a"); !slices.Equal(un, []uint32{2}) {
		t.Fatalf("a unindexed %v", un)
	}
	if _, err := f.job(indexjob.Config{Indices: []string{"nope"}}).CatchUp(ctx); !errors.Is(err, index.ErrNoIndex) {
		t.Fatalf("unknown index: %v", err)
	}
	s, err = f.job(indexjob.Config{}).CatchUp(ctx)
	if err != nil || !slices.Equal(s.Indices, []string{"a"}) {
		t.Fatalf("catch-up of all: %+v, %v", s, err)
	}
	ids := numKeys(0, 150, "mem://")
	sameAnswers(t, "a", f.answers("a", ids), f.truth(0, ids))
	sameAnswers(t, "b", f.answers("b", cats), f.truth(1, cats))
	_ = compact.Config{}
}
