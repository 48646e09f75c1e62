package index

import (
	"slices"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/merge"
	"github.com/compactord/compactord/internal/testing/lancedb"
	"github.com/compactord/compactord/internal/trim"
)

// TestMemWALVectorChain: on a MemWAL table maintaining an IVF_PQ index and
// a btree, merge → catch-up (a vector delta segment and a btree one) →
// trim retires every generation; LanceDB then reports no unindexed row,
// reads the rows its LSM view read before, and its vector search through
// the index (every partition probed, candidates refined) finds as many of
// the exhaustive search's 10 nearest rows (within 0.05) as its LSM vector
// search did before.
func TestMemWALVectorChain(t *testing.T) {
	lancedb.Require(t)
	f := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
	f.Dir = f.URI + "/t.lance"
	steps := []lancedb.Step{
		lancedb.Create(lancedb.VectorSchema, lancedb.VectorRows(0, 400, "v")),
		lancedb.CreateVectorIndex("vec", "ivf_pq", "vec_idx", map[string]any{"numPartitions": 2, "numSubVectors": 4}),
		lancedb.CreateIndex("id", "btree", "id_idx"), lancedb.SetPrimaryKey("id"),
		lancedb.SetLsmWriteSpec(lancedb.LsmWriteSpec{SpecType: "unsharded", MaintainedIndexes: []string{"id_idx", "vec_idx"}}),
	}
	for g := int64(1); g <= 2; g++ {
		rows := append(lancedb.VectorRows(g*10, g*10+5, "g"), lancedb.VectorRows(1000*g, 1000*g+100, "g")...)
		steps = append(steps, lancedb.MergeInsert("id", rows), lancedb.CloseLsmWriters())
	}
	f.Run(t, steps...)
	search := func(lsm, exact bool) [][]int64 {
		var st []lancedb.Step
		for q := range 20 {
			st = append(st, lancedb.VectorSearch(lancedb.VectorQuery{Vector: lancedb.VectorOf(int64(5000 + q)), Column: "vec", Limit: 10, Nprobes: 2, RefineFactor: 20,
				LSM: lancedb.Bool(lsm), BypassIndex: exact, Columns: []string{"id"}}))
		}
		out := f.Run(t, st...)
		var all [][]int64
		for q := range 20 {
			all = append(all, idsOf(t, out, q))
		}
		return all
	}
	before, beforeHits := lsmRows(t, f, true), search(true, false)

	h := openHandle(t, f.Dir)
	if out, err := merge.RunAll(t.Context(), h, merge.Env{MaxGenerations: 8}); err != nil || len(out.Landed) == 0 {
		t.Fatalf("merge: %v, %+v", err, out)
	}
	cu, err := CatchUp(t.Context(), h, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !cu.Committed || len(cu.Indices) != 2 {
		t.Fatalf("catch-up: %+v; want id_idx and vec_idx caught up", cu)
	}
	now := time.Now().Add(time.Hour)
	cfg := trim.DefaultConfig()
	cfg.ReaderGrace = 0
	res, err := trim.Run(t.Context(), h.Bucket, cfg, now)
	if err != nil {
		t.Fatal(err)
	}
	if r := trimReasons(res); r["index_lag"] != 0 || res.DeletedGenerations != 2 {
		t.Fatalf("trim after catch-up: %v, %d generations deleted; want both", r, res.DeletedGenerations)
	}
	out := f.Run(t, lancedb.IndexStats("vec_idx"), lancedb.IndexStats("id_idx"))
	for i := range 2 {
		if st := stats(t, out, i); st.NumUnindexedRows != 0 || st.NumIndexedRows != int64(len(before)) {
			t.Errorf("index %d after catch-up: %+v, want %d indexed", i, st, len(before))
		}
	}
	if d := lancedb.DiffByID(lsmRows(t, f, false), before); d != "" {
		t.Errorf("rows after trim: %s", d)
	}
	// LanceDB's LSM search scans the generations' rows exactly, the index
	// search ranks them by PQ codes; with a refine factor both re-rank
	// their candidates exactly, and are held against the exhaustive
	// search.
	exact := search(false, true)
	share := func(got [][]int64) float64 {
		hit := 0
		for q := range exact {
			for _, id := range got[q] {
				if slices.Contains(exact[q], id) {
					hit++
				}
			}
		}
		return float64(hit) / float64(10*len(exact))
	}
	ours, theirs := share(search(false, false)), share(beforeHits)
	t.Logf("recall@10: after catch-up %.3f, LanceDB's LSM search before %.3f", ours, theirs)
	if ours < theirs-0.05 {
		t.Errorf("recall@10 %.3f after catch-up, %.3f through LanceDB's LSM view before", ours, theirs)
	}
}
