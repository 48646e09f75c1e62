package compact

import (
	"testing"

	"github.com/compactord/compactord/internal/testing/lancedb"
)

// TestRunRemapsFloat16And64VectorIndexes: LanceDB keeps an index over
// float16 or float64 vectors in that type (centroids, PQ codebook, FLAT
// vectors); compactord's inline compaction of such a table (rows deleted
// in every fragment, one fragment deleted whole) remaps the index without
// touching them, LanceDB counts no unindexed row, and its search with
// every partition probed returns, for 50 queries, the same ids and
// distances as before and as on a copy LanceDB's own optimize()
// compacted.
func TestRunRemapsFloat16And64VectorIndexes(t *testing.T) {
	lancedb.Require(t)
	for _, item := range []string{"float16", "float64"} {
		for _, typ := range []string{"ivf_flat", "ivf_pq"} {
			t.Run(item+"_"+typ, func(t *testing.T) {
				opts := map[string]any{"numPartitions": 4}
				if typ == "ivf_pq" {
					opts["numSubVectors"] = 4
				}
				steps := []lancedb.Step{lancedb.Create(lancedb.VectorSchemaOf(item), lancedb.VectorRows(0, 250, "v"))}
				for lo := int64(250); lo < 1000; lo += 250 {
					steps = append(steps, lancedb.Add(lancedb.VectorRows(lo, lo+250, "v")))
				}
				steps = append(steps, lancedb.CreateVectorIndex("vec", typ, "vec_idx", opts),
					lancedb.Delete("id % 7 = 0"), lancedb.Delete("id >= 500 AND id < 750"))
				f := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
				f.Dir = f.URI + "/t.lance"
				f.Run(t, steps...)
				twin := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
				twin.Dir = twin.URI + "/t.lance"
				copyTree(t, f.Dir, twin.Dir)
				before := searchAll(t, f, "l2", 4)

				res, err := Run(t.Context(), openHandle(t, f.Dir), DefaultOptions(), Env{})
				if err != nil {
					t.Fatal(err)
				}
				if res.Commit == nil || len(res.Plan.Skips) != 0 || res.RewrittenIndices != 1 {
					t.Fatalf("compaction: committed %v, skips %+v, %d indexes remapped; want vec_idx remapped, nothing skipped", res.Commit != nil, res.Plan.Skips, res.RewrittenIndices)
				}
				remapped := lanceDBRemapVersion(t, twin)
				st, err := f.Run(t, lancedb.Open(), lancedb.IndexStats("vec_idx")).IndexStats(1)
				if want := int64(1000 - 250 - 107); err != nil || st == nil || st.NumUnindexedRows != 0 || st.NumIndexedRows != want {
					t.Fatalf("index stats %+v %v: want %d indexed, 0 unindexed", st, err, want)
				}
				got := searchAll(t, f, "l2", 4)
				sameHits(t, got, before, "the search before compaction")
				sameHits(t, got, searchAt(t, twin, remapped, "l2", 4), "LanceDB's optimize() copy")
			})
		}
	}
}
