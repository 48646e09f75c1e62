package index

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/fri"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

// TestTrimRacingDeferredCompaction: an FRI trim planned before a deferred
// compaction lands must not commit over it (the compaction's transaction
// does not show its FRI change, and the trim would drop its version): the
// commit re-plans, and the re-planned trim keeps the new version, which
// the indexes still need, and drops the old one.
func TestTrimRacingDeferredCompaction(t *testing.T) {
	lancedb.Require(t)
	ctx := t.Context()
	f, _ := ghostFixture(t)
	h := openHandle(t, f.Dir)
	v1, _ := deferredCompaction(t, h, []uint64{2, 3})
	if _, err := RemapIndexes(ctx, h, RemapJobOptions{NoTrim: true}); err != nil {
		t.Fatal(err)
	}
	read, naming, err := h.ReadForWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ix, err := fri.Load(ctx, h.Bucket, read)
	if err != nil || ix == nil {
		t.Fatal(ix, err)
	}
	op, keys, err := ix.Trim(ctx, h.Bucket, read, time.Now())
	if err != nil || op == nil || len(op.GetNewIndices()) != 0 {
		t.Fatalf("trim plan: %v, %v (want the FRI removed)", op, err)
	}

	// A deferred compaction of fragment 0 and the new fragment lands first.
	v2, _ := deferredCompaction(t, h, []uint64{0, 4})
	txn := commit.NewTransaction(read.Manifest.GetVersion())
	txn.Operation = &pb.Transaction_CreateIndex_{CreateIndex: op}
	_, err = h.Committer.Commit(ctx, &commit.Txn{Read: read, Naming: naming, Transaction: txn, Files: keys})
	if !errors.Is(err, commit.ErrRetryable) {
		t.Fatalf("stale trim: %v, want a retryable conflict", err)
	}
	head := mustRead(t, h)
	now, err := fri.Load(ctx, h.Bucket, head)
	if err != nil || now == nil || len(now.Versions) != 2 {
		t.Fatalf("after the refused trim the FRI has %v versions (%v), want both", now, err)
	}

	tr, err := TrimFRI(ctx, h, RemapJobOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tr == nil || !slices.Equal(tr.Dropped, []uint64{v1.DatasetVersion}) || !slices.Equal(tr.Kept, []uint64{v2.DatasetVersion}) || tr.Removed {
		t.Fatalf("re-planned trim %+v, want v%d dropped and v%d kept", tr, v1.DatasetVersion, v2.DatasetVersion)
	}
	final := mustRead(t, h)
	left, err := fri.Load(ctx, h.Bucket, final)
	if err != nil || left == nil || len(left.Versions) != 1 || left.Versions[0].DatasetVersion != v2.DatasetVersion {
		t.Fatalf("FRI after the trim: %v, %v", left, err)
	}
	// The kept version still remaps the remapped indexes' rows of 0 and 4.
	for _, s := range meta.FindIndex(final.Indices, "id_idx") {
		if !left.NeedsRemap(s) {
			t.Errorf("id_idx segment %s needs no remap through v%d", meta.UUIDString(s.GetUuid()), v2.DatasetVersion)
		}
	}
	// And LanceDB reads the table through it.
	q := indexedQueries(40, map[int64]bool{3: true, 25: true, 33: true, 10: true, 11: true, 12: true, 13: true, 14: true, 15: true, 16: true, 17: true, 18: true, 19: true})
	var order []string
	var steps []lancedb.Step
	for w := range q {
		order = append(order, w)
		steps = append(steps, lancedb.ReadRows(lancedb.ReadOpts{Where: w}))
	}
	res := f.Run(t, steps...)
	for k, w := range order {
		if got := idsOf(t, res, k); !sameIDs(got, q[w]) {
			t.Errorf("where %s: %v, want %v", w, got, q[w])
		}
	}
}

// TestLanceDBNarrowsStraddlingGroup: with an FRI group an index covers
// only partly, LanceDB 0.39 drops the covered old fragment from the index's
// coverage and adds no new one (the group's rows fall back to a scan), the
// coverage compactord's load-time remap computes. It answers right, but
// the rows go unindexed, which is why the planner avoids such groups
// (fri.Straddles).
func TestLanceDBNarrowsStraddlingGroup(t *testing.T) {
	lancedb.Require(t)
	f, _ := ghostFixture(t)
	f.Run(t, lancedb.Add(lancedb.BasicRows(40, 50))) // fragment 4, in no index
	h := openHandle(t, f.Dir)
	read := mustRead(t, h)
	if err := fri.Straddles(read.Indices, nil, []uint64{3, 4}); err == nil {
		t.Fatal("Straddles misses a group over an indexed and an unindexed fragment")
	}
	deferredCompaction(t, h, []uint64{3, 4})
	after := mustRead(t, h)
	ix, err := fri.Load(t.Context(), h.Bucket, after)
	if err != nil {
		t.Fatal(err)
	}
	seg := meta.FindIndex(after.Indices, "id_idx")[0]
	if got := ix.RemapBitmap(seg); !got.Equals(roaring.BitmapOf(0, 2)) {
		t.Errorf("compactord's load-time coverage %v, want [0 2]", got.ToArray())
	}
	res := f.Run(t, lancedb.ReadRows(lancedb.ReadOpts{Where: "id = 45"}), lancedb.ReadRows(lancedb.ReadOpts{Where: "id = 35"}), lancedb.IndexStats("id_idx"))
	for i, want := range []int64{45, 35} {
		if got := idsOf(t, res, i); !sameIDs(got, []int64{want}) {
			t.Errorf("id = %d: %v", want, got)
		}
	}
	// Fragments 0 and 2 (18 live rows) stay indexed; the new fragment's 19
	// rows (9 of fragment 3, 10 of fragment 4) do not.
	if s := stats(t, res, 2); s.NumIndexedRows != 18 || s.NumUnindexedRows != 19 {
		t.Errorf("LanceDB stats %+v, want 18 indexed and 19 unindexed", s)
	}
}

// TestCatchUpThroughFRI: after a deferred compaction and a LanceDB append,
// catch-up judges coverage through the FRI and adds a delta over the
// appended fragment only (no rebuild), LanceDB reports 0 unindexed rows
// and answers right; the remap then rewrites the old segments (not the
// delta) and the trim removes the FRI.
func TestCatchUpThroughFRI(t *testing.T) {
	lancedb.Require(t)
	ctx := t.Context()
	f, deleted := ghostFixture(t)
	h := openHandle(t, f.Dir)
	deferredCompaction(t, h, []uint64{2, 3})
	f.Run(t, lancedb.Add(lancedb.BasicRows(40, 45)))
	res, err := CatchUp(ctx, h, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Committed || len(res.Indices) != 2 {
		t.Fatalf("catch-up: %+v", res)
	}
	for _, ir := range res.Indices {
		if ir.Rebuilt || ir.Rows != 5 || !slices.Equal(ir.Fragments, []uint32{5}) {
			t.Errorf("%s: %+v, want a 5-row delta over fragment 5", ir.Name, ir)
		}
	}
	q := indexedQueries(45, deleted)
	check := func(when string) {
		t.Helper()
		var order []string
		steps := []lancedb.Step{lancedb.IndexStats("id_idx"), lancedb.IndexStats("cat_idx")}
		for w := range q {
			order = append(order, w)
			steps = append(steps, lancedb.ReadRows(lancedb.ReadOpts{Where: w}))
		}
		steps = append(steps, lancedb.ReadRows(lancedb.ReadOpts{Where: "id = 42 OR id = 35 OR id = 15"}))
		out := f.Run(t, steps...)
		for i := range 2 {
			if s := stats(t, out, i); s.NumUnindexedRows != 0 || s.NumIndexedRows != int64(45-len(deleted)) {
				t.Errorf("%s: index %d: %+v, want %d indexed, 0 unindexed", when, i, s, 45-len(deleted))
			}
		}
		for k, w := range order {
			if got := idsOf(t, out, 2+k); !sameIDs(got, q[w]) {
				t.Errorf("%s: where %s: %v, want %v", when, w, got, q[w])
			}
		}
		if got := idsOf(t, out, 2+len(order)); !sameIDs(got, []int64{35, 42}) {
			t.Errorf("%s: id = 42 OR id = 35 OR id = 15: %v", when, got)
		}
	}
	check("caught up")
	rm, err := RemapIndexes(ctx, h, RemapJobOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rm.Indices) != 2 || rm.Trim == nil || !rm.Trim.Removed {
		t.Fatalf("remap: %+v", rm)
	}
	for _, ri := range rm.Indices {
		if len(ri.Segments) != 1 {
			t.Errorf("%s: %d segments remapped, want the old one only (the delta holds no old address)", ri.Name, len(ri.Segments))
		}
	}
	check("remapped")
}

// TestRemapComposesTwoVersions: two deferred compactions, the second over
// the first's output, then one physical remap through both: every entry
// names the row it named on LanceDB's table, LanceDB and compactord's
// lookup answer right before and after, and the trim removes the FRI.
func TestRemapComposesTwoVersions(t *testing.T) {
	lancedb.Require(t)
	ctx := t.Context()
	f, deleted := ghostFixture(t)
	h := openHandle(t, f.Dir)
	beforeIDs := idAt(t, ctx, h, mustRead(t, h))
	deferredCompaction(t, h, []uint64{2, 3})
	f.Run(t, lancedb.Delete("id = 36")) // in the first compaction's output
	deleted[36] = true
	deferredCompaction(t, h, []uint64{0, 4})
	q := indexedQueries(40, deleted)
	check := func(when string) {
		t.Helper()
		var order []string
		steps := []lancedb.Step{lancedb.IndexStats("id_idx")}
		for w := range q {
			order = append(order, w)
			steps = append(steps, lancedb.ReadRows(lancedb.ReadOpts{Where: w}))
		}
		out := f.Run(t, steps...)
		if s := stats(t, out, 0); s.NumUnindexedRows != 0 {
			t.Errorf("%s: %+v", when, s)
		}
		for k, w := range order {
			if got := idsOf(t, out, 1+k); !sameIDs(got, q[w]) {
				t.Errorf("%s: where %s: %v, want %v", when, w, got, q[w])
			}
		}
		read := mustRead(t, h)
		ids := idAt(t, ctx, h, read)
		for _, key := range []int64{4, 15, 25, 33, 35, 36, 39} {
			res, err := Lookup(ctx, h.Bucket, read, "id_idx", fmt.Sprint(key), LookupOptions{IndexOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for _, a := range res.Addrs {
				got = append(got, ids[a])
			}
			var want []int64
			if !deleted[key] {
				want = []int64{key}
			}
			if !sameIDs(got, want) {
				t.Errorf("%s: lookup id = %d: %v, want %v", when, key, got, want)
			}
		}
	}
	check("two versions deferred")
	ix, err := fri.Load(ctx, h.Bucket, mustRead(t, h))
	if err != nil || ix == nil || len(ix.Versions) != 2 {
		t.Fatalf("FRI %v, %v: want two versions", ix, err)
	}
	remap := ix.Remapper(0)
	after := mustRead(t, h)
	afterIDs := idAt(t, ctx, h, after)
	for _, a := range indexAddrs(t, ctx, h, after, "id_idx", nil) {
		id, was := beforeIDs[a]
		na, ok := remap(a)
		if was && !deleted[id] && (!ok || afterIDs[na] != id) {
			t.Errorf("entry %#x (id %d) remaps to %#x,%v (id %d)", a, id, na, ok, afterIDs[na])
		}
	}
	// Each segment's remap holds its memory from the caller's budget
	// and gives it back.
	var holds, held int64
	memory := func(_ context.Context, n int64) (func(), error) {
		holds++
		held += n
		return func() { held -= n }, nil
	}
	rm, err := RemapIndexes(ctx, h, RemapJobOptions{Memory: memory})
	if err != nil {
		t.Fatal(err)
	}
	if rm.Trim == nil || !rm.Trim.Removed || len(rm.Trim.Dropped) != 2 {
		t.Fatalf("remap %+v, trim %+v", rm, rm.Trim)
	}
	if holds < int64(len(rm.Indices)) || len(rm.Indices) == 0 || held != 0 {
		t.Errorf("%d indexes remapped with %d holds of the memory budget, %d bytes still held", len(rm.Indices), holds, held)
	}
	check("remapped through both")
}
