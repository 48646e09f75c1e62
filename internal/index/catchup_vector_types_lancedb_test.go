package index

import (
	"fmt"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/testing/lancedb"
)

// typedTable has LanceDB build a table whose vec column holds items of
// type item (rows from rows): rows ids 0..n-1 in four fragments, index
// vec_idx (typ, opts), two fragments of n/8 rows appended, id % 11 = 0
// deleted. It returns the table and a copy.
func typedTable(t *testing.T, item string, rows func(lo, hi int64, tag string) []lancedb.Row, n int64, typ string, opts map[string]any) (f, twin *lancedb.Fixture) {
	t.Helper()
	f = &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
	f.Dir = f.URI + "/t.lance"
	per, d := n/4, n/8
	steps := []lancedb.Step{lancedb.Create(lancedb.VectorSchemaOf(item), rows(0, per, "v"))}
	for lo := per; lo < n; lo += per {
		steps = append(steps, lancedb.Add(rows(lo, lo+per, "v")))
	}
	steps = append(steps, lancedb.CreateVectorIndex("vec", typ, "vec_idx", opts),
		lancedb.Add(rows(n, n+d, "w")), lancedb.Add(rows(n+d, n+2*d, "w")), lancedb.Delete("id % 11 = 0"))
	f.Run(t, steps...)
	twin = &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
	twin.Dir = twin.URI + "/t.lance"
	copyDir(t, f.Dir, twin.Dir)
	return f, twin
}

// liveRows counts the ids lo..hi-1 that typedTable keeps.
func liveRows(lo, hi int64) int {
	n := 0
	for id := lo; id < hi; id++ {
		if id%11 != 0 {
			n++
		}
	}
	return n
}

// TestCatchUpHammingIndexes: LanceDB 0.39 builds IVF_FLAT with the
// hamming distance over uint8 vectors (uint8 centroids, the vectors'
// bytes as storage). After two fragments were appended, compactord's
// catch-up assigns each new row to the centroid of fewest differing bits
// (the first on a tie, as lance's k-modes does) and stores its bytes;
// LanceDB then counts no unindexed row, and its search with every
// partition probed returns, for 50 queries, the ids and distances of a
// copy on which its own optimize() appended the delta. compactord's
// rebuild into one segment then gives the same answers again.
func TestCatchUpHammingIndexes(t *testing.T) {
	lancedb.Require(t)
	const n, parts = 8000, 2
	f, twin := typedTable(t, "uint8", lancedb.BinaryVectorRows, n, "ivf_flat", map[string]any{"numPartitions": parts, "distanceType": "hamming"})
	res, err := CatchUp(t.Context(), openHandle(t, f.Dir), Options{})
	if err != nil {
		t.Fatal(err)
	}
	live, total := liveRows(n, n+n/4), liveRows(0, n+n/4)
	if !res.Committed || len(res.Indices) != 1 || fmt.Sprint(res.Indices[0].Fragments) != "[4 5]" || res.Indices[0].Rows != live {
		t.Fatalf("catch-up: %+v; want vec_idx caught up over fragments 4 and 5 (%d rows)", res, live)
	}
	if st := stats(t, f.Run(t, lancedb.Open(), lancedb.IndexStats("vec_idx")), 1); st.NumUnindexedRows != 0 || st.NumIndexedRows != int64(total) {
		t.Fatalf("index stats after catch-up: %+v; want %d indexed", st, total)
	}
	lanceDBAppend(t, twin)
	theirs := vecSearchesOf(t, twin, "hamming", parts, false, 0, lancedb.BinaryVectorOf)
	sameVecHits(t, vecSearchesOf(t, f, "hamming", parts, false, 0, lancedb.BinaryVectorOf), theirs, "LanceDB's optimize() copy")

	rb, err := Rebuild(t.Context(), openHandle(t, f.Dir), "vec_idx", RebuildOptions{})
	if err != nil || rb.Rows != total || len(rb.Removed) != 2 {
		t.Fatalf("rebuild: %+v %v; want one segment of %d rows replacing two", rb, err, total)
	}
	if st := stats(t, f.Run(t, lancedb.Open(), lancedb.IndexStats("vec_idx")), 1); st.NumUnindexedRows != 0 || st.NumIndexedRows != int64(total) {
		t.Fatalf("index stats after rebuild: %+v; want %d indexed", st, total)
	}
	sameVecHits(t, vecSearchesOf(t, f, "hamming", parts, false, 0, lancedb.BinaryVectorOf), theirs, "LanceDB's optimize() copy")
}

// TestCatchUpFloat16And64Indexes: LanceDB 0.39 keeps an index over
// float16 or float64 vectors in that type and computes its distances in
// it; for each kind (IVF_FLAT, IVF_PQ, IVF_RQ, IVF_HNSW_SQ, IVF_HNSW_PQ)
// and distance types, after two fragments were appended,
// compactord's catch-up adds a delta segment in lance's arithmetic for
// the type, LanceDB counts no unindexed row and two segments, and its
// search with every partition probed returns, for 50 queries, the ids and
// distances of a copy on which its own optimize() appended the delta
// (HNSW: with a search list as long as the table, and recall@10 against
// the exhaustive search within 0.01 of the copy's at LanceDB's default;
// IVF_RQ: at least 98% of its hits, as for float32 vectors).
// compactord's rebuild into one segment then answers the same again (but
// for dot PQ, whose delta LanceDB encodes by dot product and its build,
// which a rebuild reproduces, by L2).
func TestCatchUpFloat16And64Indexes(t *testing.T) {
	lancedb.Require(t)
	for _, item := range []string{"float16", "float64"} {
		for _, k := range oracleKinds() {
			if k.variant != "" {
				continue
			}
			// Every kind and distance type is checked row by row against
			// LanceDB's build and delta in package vector; here each
			// distance type on the IVF kinds the others build on, one
			// each for the rest, to bound the test's time.
			dists := map[string][]string{"ivf_flat": {"l2", "cosine", "dot"}, "ivf_pq": {"l2", "cosine", "dot"},
				"ivf_rq": {"l2"}, "ivf_hnsw_sq": {"cosine"}, "ivf_hnsw_pq": {"dot"}}[k.typ]
			for _, d := range dists {
				t.Run(item+"_"+k.typ+"_"+d, func(t *testing.T) {
					opts := map[string]any{"numPartitions": k.partitions, "distanceType": d}
					for o, v := range k.opts {
						opts[o] = v
					}
					f, twin := typedTable(t, item, lancedb.VectorRows, k.rows, k.typ, opts)
					res, err := CatchUp(t.Context(), openHandle(t, f.Dir), Options{})
					if err != nil {
						t.Fatal(err)
					}
					live, total := liveRows(k.rows, k.rows+k.rows/4), liveRows(0, k.rows+k.rows/4)
					if !res.Committed || len(res.Indices) != 1 || fmt.Sprint(res.Indices[0].Fragments) != "[4 5]" || res.Indices[0].Rows != live {
						t.Fatalf("catch-up: %+v; want vec_idx caught up over fragments 4 and 5 (%d rows)", res, live)
					}
					out := f.Run(t, lancedb.Open(), lancedb.ListIndices(), lancedb.IndexStats("vec_idx"))
					if st, err := out.IndexStats(2); err != nil || st == nil || st.NumUnindexedRows != 0 || st.NumIndexedRows != int64(total) {
						t.Fatalf("index stats after catch-up: %+v %v; want %d indexed", st, err, total)
					}
					if ixs, err := out.Indices(1); err != nil || len(ixs) != 1 || ixs[0].NumSegments != 2 {
						t.Fatalf("indices after catch-up: %+v %v; want vec_idx of two segments", ixs, err)
					}
					lanceDBAppend(t, twin)
					hnsw := strings.HasPrefix(k.typ, "ivf_hnsw")
					wide := 0
					if hnsw {
						wide = int(k.rows + k.rows/4)
					}
					theirs, theirsWide := vecSearches(t, twin, d, k.partitions, false), vecSearchesEf(t, twin, d, k.partitions, false, wide)
					// recall's searches, as in TestCatchUpVectorIndexes.
					var theirsR, exactR, oneGraph [][]vecHit
					if hnsw {
						theirsR, exactR = recallSearches(t, twin, d, k.partitions, false), recallSearches(t, f, d, k.partitions, true)
					}
					check := func(what string) {
						if k.typ == "ivf_rq" {
							// LanceDB scores a row of a full block of 32
							// through a lookup table and the rest exactly,
							// and orders its own delta's rows differently
							// from run to run (see closeVecHits).
							closeVecHits(t, vecSearches(t, f, d, k.partitions, false), theirs, "LanceDB's optimize() copy")
							return
						}
						sameVecHits(t, vecSearchesEf(t, f, d, k.partitions, false, wide), theirsWide, "LanceDB's optimize() copy")
						if !hnsw {
							return
						}
						ours, lance := recall(recallSearches(t, f, d, k.partitions, false), exactR), recall(theirsR, exactR)
						ref := "LanceDB's optimize()"
						if what == "rebuild" && oneGraph != nil {
							lance, ref = recall(oneGraph, exactR), "LanceDB's createIndex"
						}
						t.Logf("recall@10: compactord's %s %.3f, %s %.3f", what, ours, ref, lance)
						if ours < lance-0.01 {
							t.Errorf("recall@10 %.3f after compactord's %s, %s %.3f", ours, what, ref, lance)
						}
					}
					check("catch-up")
					if k.typ == "ivf_hnsw_sq" {
						// A rebuild's one graph against LanceDB's one graph
						// over the same rows (see TestCatchUpVectorIndexes).
						fresh := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
						fresh.Dir = fresh.URI + "/t.lance"
						copyDir(t, twin.Dir, fresh.Dir)
						fresh.Run(t, lancedb.Open(), lancedb.CreateVectorIndex("vec", k.typ, "vec_idx", opts))
						oneGraph = recallSearches(t, fresh, d, k.partitions, false)
					}
					rb, err := Rebuild(t.Context(), openHandle(t, f.Dir), "vec_idx", RebuildOptions{})
					if err != nil || rb.Rows != total || len(rb.Removed) != 2 {
						t.Fatalf("rebuild: %+v %v; want one segment of %d rows replacing two", rb, err, total)
					}
					if strings.HasSuffix(k.typ, "pq") && d == "dot" {
						return
					}
					check("rebuild")
				})
			}
		}
	}
}

// TestCatchUpTypedMultivectorIndexes: LanceDB 0.39 indexes a multivector
// column of float16 or float64 vectors (cosine) one entry per vector, in
// the vectors' type; after two fragments were appended, compactord's
// catch-up indexes each of their vectors under its row's address, LanceDB
// counts no unindexed row, and its multivector search returns, for 50
// two-vector queries, the ids and distances of a copy on which its own
// optimize() appended the delta.
func TestCatchUpTypedMultivectorIndexes(t *testing.T) {
	lancedb.Require(t)
	for _, item := range []string{"float16", "float64"} {
		for _, typ := range []string{"ivf_flat", "ivf_pq"} {
			t.Run(item+"_"+typ, func(t *testing.T) {
				opts := map[string]any{"numPartitions": 1, "distanceType": "cosine"}
				if typ == "ivf_pq" {
					opts["numSubVectors"] = 4
				}
				schema := append(append([]lancedb.Column{}, lancedb.BasicSchema...), lancedb.Column{Name: "vec", Type: fmt.Sprintf("list<fixed_size_list<%s,%d>>", item, lancedb.VectorDim), Nullable: true})
				f, twin := multivectorTable(t, schema, typ, opts)
				res, err := CatchUp(t.Context(), openHandle(t, f.Dir), Options{})
				if err != nil {
					t.Fatal(err)
				}
				if live := liveRows(2000, 2500); !res.Committed || len(res.Indices) != 1 || res.Indices[0].Rows != 2*live {
					t.Fatalf("catch-up: %+v; want vec_idx caught up with %d vectors", res, 2*live)
				}
				if st := stats(t, f.Run(t, lancedb.Open(), lancedb.IndexStats("vec_idx")), 1); st.NumUnindexedRows != 0 {
					t.Fatalf("index stats after catch-up: %+v", st)
				}
				lanceDBAppend(t, twin)
				sameVecHits(t, multiSearches(t, f, 0), multiSearches(t, twin, 0), "LanceDB's optimize() copy")
			})
		}
	}
}
