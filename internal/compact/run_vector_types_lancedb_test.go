package compact

import (
	"fmt"
	"slices"
	"testing"

	"github.com/compactord/compactord/internal/index"
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

// hammingHits are the (id, distance) pairs of 50 binary-vector queries
// (every partition probed) at version v of the table (0: the latest).
func hammingHits(t *testing.T, f *lancedb.Fixture, v uint64, partitions int) []string {
	t.Helper()
	steps := []lancedb.Step{lancedb.Open()}
	if v != 0 {
		steps[0] = lancedb.Checkout(v)
	}
	for q := range 50 {
		steps = append(steps, lancedb.VectorSearch(lancedb.VectorQuery{Vector: lancedb.BinaryVectorOf(int64(100000 + q)), Column: "vec", Limit: 10,
			Nprobes: partitions, DistanceType: "hamming", Columns: []string{"id"}}))
	}
	out := f.Run(t, steps...)
	var all []string
	for q := range 50 {
		rows, err := out.Rows(1 + q)
		if err != nil {
			t.Fatal(err)
		}
		var hs []vectorHit
		for _, r := range rows {
			id, _ := r.Int("id")
			d, _ := r.Float("_distance")
			hs = append(hs, vectorHit{id, d})
		}
		// Hamming distances tie often: only the rows tied with the
		// last hit may be a matter of the search's choice.
		if len(hs) != 10 {
			t.Fatalf("query %d: %d hits", q, len(hs))
		}
		last := hs[len(hs)-1].dist
		for _, h := range hs {
			if h.dist != last {
				all = append(all, fmt.Sprintf("q%d id %d %g", q, h.id, h.dist))
			} else {
				all = append(all, fmt.Sprintf("q%d at %g", q, h.dist))
			}
		}
		slices.Sort(all[len(all)-len(hs):])
	}
	return all
}

// TestRunRemapsHammingIndexes: LanceDB 0.39 builds IVF_FLAT with the
// hamming distance over uint8 (binary) vectors; compactord's compaction
// of such a table (rows deleted in every fragment, one fragment deleted
// whole) no longer leaves its fragments out. Inline, it remaps the index
// in the Rewrite (row addresses only, the vectors' bytes untouched);
// deferred, LanceDB reads it through the FRI until index remap rewrites
// it and removes the FRI. Either way LanceDB counts no unindexed row and
// its search with every partition probed returns, for 50 queries, the ids
// and distances it returned before (inline: and on a copy LanceDB's own
// optimize() compacted).
func TestRunRemapsHammingIndexes(t *testing.T) {
	lancedb.Require(t)
	for _, mode := range []string{"inline", "deferred"} {
		t.Run(mode, func(t *testing.T) {
			f := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
			f.Dir = f.URI + "/t.lance"
			steps := []lancedb.Step{lancedb.Create(lancedb.VectorSchemaOf("uint8"), lancedb.BinaryVectorRows(0, 250, "v"))}
			for lo := int64(250); lo < 1000; lo += 250 {
				steps = append(steps, lancedb.Add(lancedb.BinaryVectorRows(lo, lo+250, "v")))
			}
			steps = append(steps, lancedb.CreateVectorIndex("vec", "ivf_flat", "vec_idx", map[string]any{"numPartitions": 2, "distanceType": "hamming"}),
				lancedb.Delete("id % 3 = 0"), lancedb.Delete("id >= 500 AND id < 750"))
			f.Run(t, steps...)
			twin := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
			twin.Dir = twin.URI + "/t.lance"
			copyTree(t, f.Dir, twin.Dir)
			before := hammingHits(t, f, 0, 2)
			live := 0
			for id := range 1000 {
				if id%3 != 0 && (id < 500 || id >= 750) {
					live++
				}
			}
			h := openHandle(t, f.Dir)
			opts := DefaultOptions()
			if mode == "deferred" {
				opts = deferredOptions()
			}
			res, err := Run(t.Context(), h, opts, Env{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Commit == nil || len(res.Plan.Skips) != 0 {
				t.Fatalf("compaction: committed %v, skips %+v; want the fragments compacted, none skipped", res.Commit != nil, res.Plan.Skips)
			}
			if mode == "inline" && res.RewrittenIndices != 1 {
				t.Fatalf("compaction remapped %d indexes inline; want vec_idx", res.RewrittenIndices)
			}
			if mode == "deferred" {
				if res.FragReuse == nil {
					t.Fatal("the deferred compaction wrote no FRI")
				}
				if got := hammingHits(t, f, 0, 2); fmt.Sprint(got) != fmt.Sprint(before) {
					t.Fatalf("hamming search through the FRI:\n%v\nbefore:\n%v", got[:10], before[:10])
				}
				rr, err := index.RemapIndexes(t.Context(), h, index.RemapJobOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if len(rr.Indices) != 1 || rr.Indices[0].Name != "vec_idx" || len(rr.Skipped) != 0 || rr.Trim == nil || !rr.Trim.Removed || rr.Indices[0].Entries != live {
					t.Fatalf("index remap: %+v; want vec_idx remapped (%d rows) and the FRI removed", rr, live)
				}
			}
			st, err := f.Run(t, lancedb.Open(), lancedb.IndexStats("vec_idx")).IndexStats(1)
			if err != nil || st == nil || st.NumUnindexedRows != 0 || st.NumIndexedRows != int64(live) {
				t.Fatalf("index stats %+v %v: want %d indexed, 0 unindexed", st, err, live)
			}
			got := hammingHits(t, f, 0, 2)
			if fmt.Sprint(got) != fmt.Sprint(before) {
				t.Fatalf("hamming search after the compaction:\n%v\nbefore:\n%v", got[:10], before[:10])
			}
			if mode == "inline" {
				if want := hammingHits(t, twin, lanceDBRemapVersion(t, twin), 2); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("hamming search after the compaction:\n%v\nLanceDB's remap:\n%v", got[:10], want[:10])
				}
			}
		})
	}
}

// multiHits are the (id, distance) pairs of 20 two-vector queries through
// the multivector column vec at version v (0: the latest), ef the HNSW
// search list (0: LanceDB's).
func multiHits(t *testing.T, f *lancedb.Fixture, v uint64, ef int) []string {
	t.Helper()
	steps := []lancedb.Step{lancedb.Open()}
	if v != 0 {
		steps[0] = lancedb.Checkout(v)
	}
	for q := range 20 {
		steps = append(steps, lancedb.VectorSearch(lancedb.VectorQuery{Multi: [][]float32{lancedb.VectorOf(int64(100000 + q)), lancedb.VectorOf(int64(200000 + q))},
			Column: "vec", Limit: 10, Nprobes: 2, Ef: ef, Columns: []string{"id"}}))
	}
	out := f.Run(t, steps...)
	var all []string
	for q := range 20 {
		rows, err := out.Rows(1 + q)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			id, _ := r.Int("id")
			d, _ := r.Float("_distance")
			all = append(all, fmt.Sprintf("q%d id %d %.5g", q, id, d))
		}
	}
	return all
}

// TestRunRemapsMultivectorIndexes: LanceDB 0.39 indexes a multivector
// column one entry per vector under its row's address; compactord's
// inline compaction (rows deleted, one fragment deleted whole) remaps
// every entry, LanceDB counts no unindexed row, and its multivector
// search returns what it did before and on LanceDB's own remap (HNSW:
// with a search list as long as the table).
func TestRunRemapsMultivectorIndexes(t *testing.T) {
	lancedb.Require(t)
	for _, typ := range []string{"ivf_flat", "ivf_pq", "ivf_hnsw_sq"} {
		t.Run(typ, func(t *testing.T) {
			opts := map[string]any{"numPartitions": 2, "distanceType": "cosine"}
			if typ == "ivf_pq" {
				opts["numSubVectors"] = 4
			}
			steps := []lancedb.Step{lancedb.Create(lancedb.MultivectorSchema, lancedb.MultivectorRows(0, 250, "v"))}
			for lo := int64(250); lo < 1000; lo += 250 {
				steps = append(steps, lancedb.Add(lancedb.MultivectorRows(lo, lo+250, "v")))
			}
			steps = append(steps, lancedb.CreateVectorIndex("vec", typ, "vec_idx", opts),
				lancedb.Delete("id % 7 = 0"), lancedb.Delete("id >= 500 AND id < 750"))
			f := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
			f.Dir = f.URI + "/t.lance"
			f.Run(t, steps...)
			twin := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
			twin.Dir = twin.URI + "/t.lance"
			copyTree(t, f.Dir, twin.Dir)
			ef := 0
			if typ == "ivf_hnsw_sq" {
				ef = 2000
			}
			before := multiHits(t, f, 0, ef)
			res, err := Run(t.Context(), openHandle(t, f.Dir), DefaultOptions(), Env{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Commit == nil || len(res.Plan.Skips) != 0 || res.RewrittenIndices != 1 {
				t.Fatalf("compaction: committed %v, skips %+v, %d indexes remapped", res.Commit != nil, res.Plan.Skips, res.RewrittenIndices)
			}
			st, err := f.Run(t, lancedb.Open(), lancedb.IndexStats("vec_idx")).IndexStats(1)
			if err != nil || st == nil || st.NumUnindexedRows != 0 || st.NumIndexedRows != 1000-250-107 {
				t.Fatalf("index stats %+v %v", st, err)
			}
			got := multiHits(t, f, 0, ef)
			want := multiHits(t, twin, lanceDBRemapVersion(t, twin), ef)
			if fmt.Sprint(got) != fmt.Sprint(before) || fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("multivector search after the compaction:\n%v\nbefore:\n%v\nLanceDB's remap:\n%v", got[:10], before[:10], want[:10])
			}
		})
	}
}
