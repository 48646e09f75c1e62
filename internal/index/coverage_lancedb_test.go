package index_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/compact"
	"github.com/compactord/compactord/internal/fri"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

// coverageIndices are the indexes of the coverage test's table.
var coverageIndices = []string{"cat_idx", "id_idx"}

// unindexedRows is, per index, the live rows of the fragments no segment
// covers after the load-time FRI remap, as compactord's catch-up plans it
// (index.Plan); it fails when two segments claim one live fragment, which
// LanceDB's index statistics refuse.
func unindexedRows(t *testing.T, h *table.Handle) map[string]int64 {
	t.Helper()
	ctx := t.Context()
	read, _, err := h.ReadForWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ix, err := fri.Load(ctx, h.Bucket, read)
	if err != nil {
		t.Fatal(err)
	}
	live := map[uint32]int64{}
	for _, f := range read.Manifest.GetFragments() {
		live[uint32(f.GetId())] = int64(f.GetPhysicalRows() - f.GetDeletionFile().GetNumDeletedRows())
	}
	for _, name := range coverageIndices {
		seen := roaring.New()
		for _, s := range meta.FindIndex(read.Indices, name) {
			bm := ix.RemapBitmap(s)
			for _, id := range bm.ToArray() {
				if _, ok := live[id]; ok && seen.Contains(id) {
					t.Fatalf("version %d: two segments of %s cover live fragment %d", read.Manifest.GetVersion(), name, id)
				}
			}
			seen.Or(bm)
		}
	}
	plans, skips, err := index.Plan(read, index.Options{Indices: coverageIndices, FRI: ix, MaxSegments: -1})
	if err != nil || len(skips) > 0 {
		t.Fatalf("plan: %v, skips %v", err, skips)
	}
	out := map[string]int64{}
	for _, name := range coverageIndices {
		out[name] = 0
	}
	for _, p := range plans {
		for _, id := range p.Missing.ToArray() {
			out[p.Name] += live[id]
		}
	}
	return out
}

// TestCoverageAgreesWithLanceDB runs the daemon's maintenance steps on a
// LanceDB table that LanceDB keeps writing to (appends, deletes, plain
// merge-inserts): deferred compactions whose bins mix indexed and unindexed
// fragments, two FRI versions outstanding, catch-up through the FRI, the
// index job's physical remap and FRI trim before its catch-up, a remap and
// trim with no catch-up, and catch-ups past the segment limit (a rebuild).
// After every step the unindexed rows compactord's catch-up plans for each
// index equal the rows LanceDB's indexStats counts as unindexed; after
// every catch-up both are 0; and LanceDB answers key and category queries
// right through the indexes.
func TestCoverageAgreesWithLanceDB(t *testing.T) {
	lancedb.Require(t)
	ctx := t.Context()
	dir := t.TempDir()
	f := &lancedb.Fixture{URI: dir, Table: "t", Dir: dir + "/t.lance"}
	present := map[int64]bool{}
	for id := int64(0); id < 40; id++ {
		present[id] = true
	}
	f.Run(t,
		lancedb.Create(lancedb.BasicSchema, lancedb.BasicRows(0, 10)),
		lancedb.Add(lancedb.BasicRows(10, 20)), lancedb.Add(lancedb.BasicRows(20, 30)), lancedb.Add(lancedb.BasicRows(30, 40)),
		lancedb.CreateIndex("id", "btree", "id_idx"), lancedb.CreateIndex("cat", "bitmap", "cat_idx"),
		lancedb.Delete("id = 3 OR id = 25"))
	delete(present, 3)
	delete(present, 25)

	b, err := storage.Open(ctx, "file://"+f.Dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	c, err := commit.NewCommitter(commit.DefaultConfig(), b, clock.Real(), commit.NewMetrics(prometheus.NewRegistry()), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	h, err := table.New(b, c)
	if err != nil {
		t.Fatal(err)
	}

	next := int64(40)
	appendRows := func(n int64) lancedb.Step {
		for id := next; id < next+n; id++ {
			present[id] = true
		}
		s := lancedb.Add(lancedb.BasicRows(next, next+n))
		next += n
		return s
	}
	del := func(ids ...int64) lancedb.Step {
		var w []string
		for _, id := range ids {
			delete(present, id)
			w = append(w, fmt.Sprint(id))
		}
		return lancedb.Delete("id IN (" + strings.Join(w, ",") + ")")
	}
	// upsert rewrites existing keys (LanceDB deletes them in place and
	// writes them to a new fragment with the new ones).
	upsert := func(ids ...int64) lancedb.Step {
		var rows []lancedb.Row
		for _, id := range ids {
			present[id] = true
			rows = append(rows, lancedb.BasicRow(id, fmt.Sprintf("u%d", id)))
			next = max(next, id+1)
		}
		return lancedb.PlainMergeInsert("id", rows)
	}
	co := compact.DefaultOptions()
	co.TargetRowsPerFragment = 16
	co.DeferRemap = true
	compactOnce := func() *compact.Result {
		t.Helper()
		res, err := compact.Run(ctx, h, co, compact.Env{Parallelism: 1})
		if err != nil {
			t.Fatal(err)
		}
		if res.Commit == nil {
			t.Fatalf("nothing compacted: %+v", res.Plan)
		}
		return res
	}
	catchUp := func(maxSegs int) *index.Result {
		t.Helper()
		res, err := index.CatchUp(ctx, h, index.Options{MaxSegments: maxSegs})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	remap := func() *index.RemapResult {
		t.Helper()
		res, err := index.RemapIndexes(ctx, h, index.RemapJobOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	// check runs LanceDB's steps between two readings of its index
	// statistics: the first must equal want (compactord's plan before the
	// steps), the second compactord's plan after them.
	step := 0
	check := func(what string, want map[string]int64, steps ...lancedb.Step) map[string]int64 {
		t.Helper()
		step++
		all := []lancedb.Step{lancedb.IndexStats("cat_idx"), lancedb.IndexStats("id_idx")}
		all = append(all, steps...)
		all = append(all, lancedb.IndexStats("cat_idx"), lancedb.IndexStats("id_idx"))
		res := f.Run(t, all...)
		after := unindexedRows(t, h)
		for i, name := range coverageIndices {
			for k, w := range []map[string]int64{want, after} {
				at := i
				if k == 1 {
					at = 2 + len(steps) + i
				}
				s, err := res.IndexStats(at)
				if err != nil || s == nil {
					t.Fatalf("step %d (%s): indexStats(%s): %+v, %v", step, what, name, s, err)
				}
				if s.NumUnindexedRows != w[name] {
					when := "after " + what
					if k == 1 {
						when = fmt.Sprintf("after LanceDB's %v following %s", lancedb.OpNames(steps), what)
					}
					t.Errorf("step %d, %s: LanceDB counts %d unindexed rows of %s (%d segments), compactord plans %d", step, when, s.NumUnindexedRows, name, s.NumIndices, w[name])
				}
			}
		}
		return after
	}
	caughtUp := map[string]int64{"cat_idx": 0, "id_idx": 0}

	// Two appends after the index: a bin of unindexed fragments next to
	// the indexed ones.
	cur := check("the fixture", unindexedRows(t, h), appendRows(3), appendRows(3))
	if cur["id_idx"] != 6 {
		t.Fatalf("unindexed %v after two 3-row appends", cur)
	}
	// A deferred compaction: the indexed and unindexed bins compact apart.
	res := compactOnce()
	if len(res.Plan.Groups) < 2 {
		t.Errorf("compaction groups %+v: want the indexed and unindexed fragments apart", res.Plan.Groups)
	}
	cur = check("a deferred compaction", unindexedRows(t, h), del(5, 41), upsert(7, 30, 100))
	// Catch-up through the FRI: a delta over what the FRI leaves uncovered.
	if r := catchUp(0); !r.Committed {
		t.Fatalf("catch-up committed nothing with %v unindexed", cur)
	}
	if now := unindexedRows(t, h); !equalCounts(now, caughtUp) {
		t.Fatalf("after catch-up compactord plans %v unindexed", now)
	}
	cur = check("catch-up through the FRI", caughtUp, appendRows(2), upsert(101, 9))
	// A second FRI version before any remap; its bins hold the delta's
	// fragments and the old segments' (remapped) ones apart.
	compactOnce()
	cur = check("a second deferred compaction", unindexedRows(t, h), del(0, 1, 2), appendRows(4))
	// The index job: physical remap and FRI trim, then catch-up.
	rm := remap()
	if rm.FRIVersions != 2 || rm.Trim == nil {
		t.Errorf("remap %+v: want two FRI versions read and a trim", rm)
	}
	cur = check("the remap and FRI trim", unindexedRows(t, h))
	if r := catchUp(0); !r.Committed {
		t.Fatalf("catch-up committed nothing with %v unindexed", cur)
	}
	cur = check("the index job's catch-up", caughtUp, appendRows(3), upsert(20, 21, 102), appendRows(1))
	// A compaction, then the remap and trim alone (an index job whose
	// catch-up failed, say), then catch-up with a segment limit that
	// rebuilds.
	compactOnce()
	cur = check("a third deferred compaction", unindexedRows(t, h), del(22))
	remap()
	cur = check("a remap and trim without catch-up", unindexedRows(t, h), appendRows(2))
	r := catchUp(2)
	rebuilt := false
	for _, ir := range r.Indices {
		rebuilt = rebuilt || ir.Rebuilt
	}
	if !r.Committed || !rebuilt {
		t.Errorf("catch-up with at most 2 segments: %+v, want a rebuild", r)
	}
	check("a rebuilding catch-up", caughtUp)

	// LanceDB answers through the indexes.
	var keys, missing []string
	var wantIDs, wantCat []int64
	for id := range next + 3 {
		if present[id] {
			keys = append(keys, fmt.Sprint(id))
			wantIDs = append(wantIDs, id)
			if id%4 == 1 {
				wantCat = append(wantCat, id)
			}
		} else {
			missing = append(missing, fmt.Sprint(id))
		}
	}
	out := f.Run(t, lancedb.ReadRows(lancedb.ReadOpts{Where: "id IN (" + strings.Join(keys, ",") + ")"}),
		lancedb.ReadRows(lancedb.ReadOpts{Where: "id IN (" + strings.Join(missing, ",") + ")"}),
		lancedb.ReadRows(lancedb.ReadOpts{Where: "cat = 1"}))
	for i, want := range [][]int64{wantIDs, nil, wantCat} {
		rows, err := out.Rows(i)
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for _, row := range rows {
			id, _ := row.Int("id")
			got = append(got, id)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("query %d: %v, want %v", i, got, want)
		}
	}
}

func equalCounts(a, b map[string]int64) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return len(a) == len(b)
}
