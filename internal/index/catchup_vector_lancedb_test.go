package index

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/compactord/compactord/internal/testing/lancedb"
)

// vecHit is one row of a vector search.
type vecHit struct {
	id   int64
	dist float64
}

// vecSearches runs 50 query vectors through vec with the distance type
// (exhaustively when exact, else through the index with every partition
// probed), 10 hits
// each, nearest first, ties by id.
func vecSearches(t *testing.T, f *lancedb.Fixture, distance string, partitions int, exact bool) [][]vecHit {
	t.Helper()
	steps := []lancedb.Step{lancedb.Open()}
	for q := range 50 {
		steps = append(steps, lancedb.VectorSearch(lancedb.VectorQuery{Vector: lancedb.VectorOf(int64(100000 + q)), Column: "vec", Limit: 10,
			Nprobes: partitions, BypassIndex: exact, DistanceType: distance, Columns: []string{"id"}}))
	}
	out := f.Run(t, steps...)
	var all [][]vecHit
	for q := range 50 {
		rows, err := out.Rows(1 + q)
		if err != nil {
			t.Fatal(err)
		}
		var hs []vecHit
		for _, r := range rows {
			id, _ := r.Int("id")
			d, _ := r.Float("_distance")
			hs = append(hs, vecHit{id, d})
		}
		slices.SortFunc(hs, func(a, b vecHit) int {
			if a.dist != b.dist {
				return map[bool]int{true: -1, false: 1}[a.dist < b.dist]
			}
			return int(a.id - b.id)
		})
		all = append(all, hs)
	}
	return all
}

// recall is the share of exact's hits that got holds.
func recall(got, exact [][]vecHit) float64 {
	hit, n := 0, 0
	for q := range exact {
		for _, e := range exact[q] {
			n++
			if slices.ContainsFunc(got[q], func(g vecHit) bool { return g.id == e.id }) {
				hit++
			}
		}
	}
	return float64(hit) / float64(n)
}

// TestCatchUpVectorIndexes: after LanceDB built a vector index (each kind
// compactord encodes, each distance type) over four fragments and two
// more were appended, compactord's catch-up adds a delta segment over
// them, encoded with the index's centroids and quantizer; LanceDB then
// counts no unindexed row and two segments, its IVF_FLAT search with
// every partition probed equals its exhaustive search (ids and distances),
// and for the quantized kinds recall@10 against the exhaustive search is
// within 0.05 of that of LanceDB's own optimize() on a copy (which
// retrains these small indexes, so its codes differ).
func TestCatchUpVectorIndexes(t *testing.T) {
	lancedb.Require(t)
	for _, typ := range []string{"ivf_flat", "ivf_pq", "ivf_hnsw_sq", "ivf_hnsw_pq"} {
		for _, d := range []string{"l2", "cosine", "dot"} {
			t.Run(typ+"_"+d, func(t *testing.T) {
				opts := map[string]any{"numPartitions": 4, "distanceType": d}
				if typ == "ivf_pq" || typ == "ivf_hnsw_pq" {
					opts["numSubVectors"] = 4
				}
				f := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
				f.Dir = f.URI + "/t.lance"
				steps := []lancedb.Step{lancedb.Create(lancedb.VectorSchema, lancedb.VectorRows(0, 250, "v"))}
				for lo := int64(250); lo < 1000; lo += 250 {
					steps = append(steps, lancedb.Add(lancedb.VectorRows(lo, lo+250, "v")))
				}
				steps = append(steps, lancedb.CreateVectorIndex("vec", typ, "vec_idx", opts),
					lancedb.Add(lancedb.VectorRows(1000, 1250, "v")), lancedb.Add(lancedb.VectorRows(1250, 1500, "v")),
					lancedb.Delete("id % 11 = 0"))
				f.Run(t, steps...)
				twin := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
				twin.Dir = twin.URI + "/t.lance"
				copyDir(t, f.Dir, twin.Dir)

				res, err := CatchUp(t.Context(), openHandle(t, f.Dir), Options{})
				if err != nil {
					t.Fatal(err)
				}
				live := 0
				for id := 1000; id < 1500; id++ {
					if id%11 != 0 {
						live++
					}
				}
				if !res.Committed || len(res.Indices) != 1 || res.Indices[0].Name != "vec_idx" || fmt.Sprint(res.Indices[0].Fragments) != "[4 5]" || res.Indices[0].Rows != live {
					t.Fatalf("catch-up: %+v; want vec_idx caught up over fragments 4 and 5 (%d rows)", res, live)
				}
				out := f.Run(t, lancedb.Open(), lancedb.ListIndices(), lancedb.IndexStats("vec_idx"))
				st, err := out.IndexStats(2)
				if err != nil || st == nil || st.NumUnindexedRows != 0 || st.NumIndexedRows != int64(1500-137) {
					t.Fatalf("index stats after catch-up: %+v %v", st, err)
				}
				ixs, err := out.Indices(1)
				if err != nil || len(ixs) != 1 || ixs[0].NumSegments != 2 {
					t.Fatalf("indices after catch-up: %+v %v; want vec_idx of two segments", ixs, err)
				}
				got, exact := vecSearches(t, f, d, 4, false), vecSearches(t, f, d, 4, true)
				if typ == "ivf_flat" {
					for q := range got {
						for i := range exact[q] {
							g, w := got[q][i], exact[q][i]
							if g.id != w.id || math.Abs(g.dist-w.dist) > 1e-5*math.Max(1e-6, math.Abs(w.dist)) {
								t.Fatalf("query %d hit %d: %v, the exhaustive search %v", q, i, g, w)
							}
						}
					}
					return
				}
				twin.Run(t, lancedb.Open(), lancedb.Optimize(lancedb.OptimizeOpts{}))
				ours, theirs := recall(got, exact), recall(vecSearches(t, twin, d, 4, false), exact)
				t.Logf("recall@10: compactord's catch-up %.3f, LanceDB's optimize() %.3f", ours, theirs)
				if ours < theirs-0.05 {
					t.Errorf("recall@10 %.3f after catch-up, LanceDB's optimize() %.3f", ours, theirs)
				}
			})
		}
	}
}

// TestCatchUpHNSWEmptyPartitions: a delta of one row leaves every HNSW
// partition but one empty; LanceDB still searches the index with every
// partition probed and finds the new row by its own vector.
func TestCatchUpHNSWEmptyPartitions(t *testing.T) {
	lancedb.Require(t)
	for _, typ := range []string{"ivf_hnsw_sq", "ivf_hnsw_pq"} {
		t.Run(typ, func(t *testing.T) {
			opts := map[string]any{"numPartitions": 4}
			if typ == "ivf_hnsw_pq" {
				opts["numSubVectors"] = 4
			}
			f := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
			f.Dir = f.URI + "/t.lance"
			f.Run(t, lancedb.Create(lancedb.VectorSchema, lancedb.VectorRows(0, 600, "v")),
				lancedb.CreateVectorIndex("vec", typ, "vec_idx", opts), lancedb.Add(lancedb.VectorRows(7000, 7001, "w")))
			res, err := CatchUp(t.Context(), openHandle(t, f.Dir), Options{})
			if err != nil || !res.Committed || len(res.Indices) != 1 || res.Indices[0].Rows != 1 {
				t.Fatalf("catch-up: %+v %v", res, err)
			}
			out := f.Run(t, lancedb.Open(), lancedb.IndexStats("vec_idx"),
				lancedb.VectorSearch(lancedb.VectorQuery{Vector: lancedb.VectorOf(7000), Column: "vec", Limit: 3, Nprobes: 4, Columns: []string{"id"}}))
			if st := stats(t, out, 1); st.NumUnindexedRows != 0 {
				t.Fatalf("index stats: %+v", st)
			}
			if ids := idsOf(t, out, 2); len(ids) == 0 || !slices.Contains(ids, 7000) {
				t.Fatalf("search for row 7000's vector: %v", ids)
			}
		})
	}
}
