package index

import (
	"fmt"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/merge"
	"github.com/compactord/compactord/internal/testing/lancedb"
	"github.com/compactord/compactord/internal/trim"
)

func lsmRows(t *testing.T, f *lancedb.Fixture, lsm bool) map[int64]string {
	t.Helper()
	out := f.Run(t, lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(lsm)}))
	rows, err := out.Rows(0)
	if err != nil {
		t.Fatal(err)
	}
	m, err := lancedb.RowsByID(rows)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func trimReasons(res *trim.Result) map[string]int {
	out := map[string]int{}
	for _, g := range res.Plan.Generations {
		if g.Delete {
			out["delete"]++
		} else {
			out[g.Reason]++
		}
	}
	return out
}

// TestMemWALChain: merge → trim keeps the merged generations for the
// lagging id_idx (index_lag) → catch-up records index_catchup = the merged
// generation per shard → trim deletes them; LanceDB reads the same rows
// (LSM view before = base and LSM views after), reports no unindexed rows,
// answers id filters from the index, and keeps writing through the MemWAL.
func TestMemWALChain(t *testing.T) {
	lancedb.Require(t)
	for _, shards := range []int{1, 4} {
		t.Run(fmt.Sprintf("%d shards", shards), func(t *testing.T) {
			f := lancedb.MemWAL(t, "", shards, 3)
			before := lsmRows(t, f, true)
			if d := lancedb.DiffByID(before, f.Want); d != "" {
				t.Fatalf("LSM view before: %s", d)
			}
			h := openHandle(t, f.Dir)
			out, err := merge.RunAll(t.Context(), h, merge.Env{MaxGenerations: 8})
			if err != nil || len(out.Landed) == 0 {
				t.Fatalf("merge: %v, %+v", err, out)
			}
			now := time.Now().Add(time.Hour)
			cfg := trim.DefaultConfig()
			res, err := trim.Run(t.Context(), h.Bucket, cfg, now)
			if err != nil {
				t.Fatal(err)
			}
			r := trimReasons(res)
			if r["delete"] != 0 || r["index_lag"] == 0 {
				t.Fatalf("trim between merge and catch-up: %v (want index_lag, nothing deleted)", r)
			}
			s := f.Run(t, lancedb.IndexStats("id_idx"))
			if st := stats(t, s, 0); st.NumUnindexedRows == 0 {
				t.Fatalf("after the merge id_idx has no unindexed rows: %+v", st)
			}

			cu, err := CatchUp(t.Context(), h, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !cu.Committed || len(cu.Indices) != 1 || cu.Indices[0].Name != "id_idx" {
				t.Fatalf("catch-up: %+v", cu)
			}
			head, _, err := h.ReadForWrite(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			d, err := memwal.Details(memwal.Index(head.Indices))
			if err != nil {
				t.Fatal(err)
			}
			compacted, caught := memwal.Compacted(d), memwal.Catchup(d)["id_idx"]
			if len(compacted) == 0 {
				t.Fatal("no compacted generations recorded")
			}
			for shard, g := range compacted {
				if caught[shard] != g {
					t.Errorf("shard %s: index_catchup %d, merged generation %d", shard, caught[shard], g)
				}
			}

			res, err = trim.Run(t.Context(), h.Bucket, cfg, now.Add(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			r = trimReasons(res)
			if r["delete"] == 0 || r["index_lag"] != 0 || r["delete"] != res.DeletedGenerations {
				t.Fatalf("trim after catch-up: %v, %d deleted", r, res.DeletedGenerations)
			}
			t.Logf("trim after catch-up: %v; %d generations, %d WAL entries deleted", r, res.DeletedGenerations, res.DeletedWAL)

			q := map[string][]int64{"id = 3": {3}, "id = 201": {201}, "id >= 100 AND id < 103": {100, 101, 102}, "id IN (4, 304, 19)": {4, 19, 304}}
			var order []string
			steps := []lancedb.Step{lancedb.IndexStats("id_idx"), lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(false)}), lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(true)})}
			for w := range q {
				order = append(order, w)
				steps = append(steps, lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(false), Where: w}))
			}
			after := f.Run(t, steps...)
			if st := stats(t, after, 0); st.NumUnindexedRows != 0 || st.NumIndexedRows != int64(len(f.Want)) {
				t.Errorf("after catch-up: %+v (want %d indexed, 0 unindexed)", st, len(f.Want))
			}
			for i := 1; i <= 2; i++ {
				rows, _ := after.Rows(i)
				m, err := lancedb.RowsByID(rows)
				if err != nil {
					t.Fatal(err)
				}
				if d := lancedb.DiffByID(m, before); d != "" {
					t.Errorf("view %d after trim: %s", i, d)
				}
			}
			for k, w := range order {
				if got := idsOf(t, after, 3+k); !sameIDs(got, q[w]) {
					t.Errorf("where %s: %v, want %v", w, got, q[w])
				}
			}
			// LanceDB keeps writing through the MemWAL.
			more := lancedb.TaggedRows(0, 3, "after-")
			f.Run(t, lancedb.MergeInsert("id", more), lancedb.CloseLsmWriters())
			wantAfter := map[int64]string{}
			for k, v := range before {
				wantAfter[k] = v
			}
			added, _ := lancedb.RowsByID(more)
			for k, v := range added {
				wantAfter[k] = v
			}
			if d := lancedb.DiffByID(lsmRows(t, f, true), wantAfter); d != "" {
				t.Errorf("LanceDB's writes after trim: %s", d)
			}
		})
	}
}
