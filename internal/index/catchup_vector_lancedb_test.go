package index

import (
	"fmt"
	"math"
	"slices"
	"strings"
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
// probed), 10 hits each, nearest first, ties by id.
func vecSearches(t *testing.T, f *lancedb.Fixture, distance string, partitions int, exact bool) [][]vecHit {
	t.Helper()
	return vecSearchesEf(t, f, distance, partitions, exact, 0)
}

// vecSearchesEf is vecSearches with an HNSW search list of ef (0:
// LanceDB's default).
func vecSearchesEf(t *testing.T, f *lancedb.Fixture, distance string, partitions int, exact bool, ef int) [][]vecHit {
	t.Helper()
	return vecSearchesOf(t, f, distance, partitions, exact, ef, lancedb.VectorOf)
}

// vecSearchesOf is vecSearchesEf with the query vectors query(100000+q)
// (the 50 queries' vectors in the column's own terms).
func vecSearchesOf(t *testing.T, f *lancedb.Fixture, distance string, partitions int, exact bool, ef int, query func(int64) []float32) [][]vecHit {
	t.Helper()
	steps := []lancedb.Step{lancedb.Open()}
	for q := range 50 {
		steps = append(steps, lancedb.VectorSearch(lancedb.VectorQuery{Vector: query(int64(100000 + q)), Column: "vec", Limit: 10,
			Nprobes: partitions, BypassIndex: exact, DistanceType: distance, Columns: []string{"id"}, Ef: ef}))
	}
	return searchHits(t, f.Run(t, steps...), 50)
}

// searchHits are the hits of out's steps 1..n (vector searches after an
// open), each nearest first, ties by id.
func searchHits(t *testing.T, out *lancedb.Results, n int) [][]vecHit {
	t.Helper()
	var all [][]vecHit
	for q := range n {
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

// recallSearches are recallQueries searches as vecSearches runs 50: an
// HNSW graph's recall is compared over more queries than the 50 whose
// hits are compared one by one, so that LanceDB's graph, built at random
// levels each run, does not move the reference by the 0.01 allowed.
func recallSearches(t *testing.T, f *lancedb.Fixture, distance string, partitions int, exact bool) [][]vecHit {
	t.Helper()
	steps := []lancedb.Step{lancedb.Open()}
	for q := range recallQueries {
		steps = append(steps, lancedb.VectorSearch(lancedb.VectorQuery{Vector: lancedb.VectorOf(int64(100000 + q)), Column: "vec", Limit: 10,
			Nprobes: partitions, BypassIndex: exact, DistanceType: distance, Columns: []string{"id"}}))
	}
	return searchHits(t, f.Run(t, steps...), recallQueries)
}

// recallQueries is how many queries recallSearches runs.
const recallQueries = 200

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

// oracleKind is a vector index configuration whose table is sized so that
// LanceDB's own optimize() appends a delta segment with the index's
// centroids and quantizer instead of re-partitioning it: lance joins (in
// optimize and remap) any partition holding fewer than a quarter of its
// kind's target partition size (IVF_FLAT 4096 rows, IVF_PQ/SQ/RQ 8192,
// HNSW 1<<20) into its neighbours, which re-assigns and re-encodes its
// rows, and never joins an index of one partition. So the IVF kinds get
// four partitions of well over 2048 rows, the HNSW kinds one partition.
type oracleKind struct {
	// typ is LanceDB's index type, variant a configuration of it (4bit:
	// 4-bit PQ).
	typ, variant string
	partitions   int
	// rows are the base rows (ids 0..rows-1, in four fragments); the
	// delta is two fragments of rows/8.
	rows int64
	opts map[string]any
}

func oracleKinds() []oracleKind {
	return []oracleKind{
		{"ivf_flat", "", 4, 8000, nil},
		{"ivf_pq", "", 4, 12000, map[string]any{"numSubVectors": 4}},
		{"ivf_pq", "4bit", 4, 12000, map[string]any{"numSubVectors": 4, "numBits": 4}},
		{"ivf_rq", "", 4, 12000, nil},
		{"ivf_hnsw_sq", "", 1, 2000, nil},
		{"ivf_hnsw_pq", "", 1, 2000, map[string]any{"numSubVectors": 4}},
	}
}

// indexOpts are the createIndex options of kind k with distance d.
func indexOpts(k oracleKind, d string) map[string]any {
	opts := map[string]any{"numPartitions": k.partitions, "distanceType": d}
	for o, v := range k.opts {
		opts[o] = v
	}
	return opts
}

// oracleTable has LanceDB build the table of k with distance type d: the
// base rows, index vec_idx over them, the two delta fragments (unless
// !delta), then id % 11 = 0 deleted everywhere. It returns the table and
// its copy.

func oracleTable(t *testing.T, k oracleKind, d string, delta bool) (f, twin *lancedb.Fixture) {
	t.Helper()
	opts := indexOpts(k, d)
	f = &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
	f.Dir = f.URI + "/t.lance"
	per, n := k.rows/4, k.rows/8
	steps := []lancedb.Step{lancedb.Create(lancedb.VectorSchema, lancedb.VectorRows(0, per, "v"))}
	for lo := per; lo < k.rows; lo += per {
		steps = append(steps, lancedb.Add(lancedb.VectorRows(lo, lo+per, "v")))
	}
	steps = append(steps, lancedb.CreateVectorIndex("vec", k.typ, "vec_idx", opts))
	if delta {
		steps = append(steps, lancedb.Add(lancedb.VectorRows(k.rows, k.rows+n, "v")), lancedb.Add(lancedb.VectorRows(k.rows+n, k.rows+2*n, "v")))
	}
	steps = append(steps, lancedb.Delete("id % 11 = 0"))
	f.Run(t, steps...)
	twin = &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
	twin.Dir = twin.URI + "/t.lance"
	copyDir(t, f.Dir, twin.Dir)
	return f, twin
}

// lanceDBAppend runs LanceDB's optimize() on twin and fails unless it
// appended a delta segment (two segments, nothing unindexed): the premise
// of comparing codes with compactord's.
func lanceDBAppend(t *testing.T, twin *lancedb.Fixture) {
	t.Helper()
	out := twin.Run(t, lancedb.Open(), lancedb.Optimize(lancedb.OptimizeOpts{}), lancedb.ListIndices())
	ixs, err := out.Indices(2)
	if err != nil || len(ixs) != 1 || ixs[0].NumSegments != 2 || ixs[0].NumUnindexedRows != 0 {
		t.Fatalf("LanceDB's optimize() left %+v %v; want vec_idx of two segments (a delta appended with the same centroids)", ixs, err)
	}
}

// sameVecHits fails unless got and want hold the same ids at the same
// distances (1e-5 relative) for every query. Rows tied with the last hit
// may differ (which of them fills the limit is the search's choice):
// there only the distances must agree.
func sameVecHits(t *testing.T, got, want [][]vecHit, what string) {
	t.Helper()
	for q := range want {
		if len(got[q]) != len(want[q]) || len(want[q]) == 0 {
			t.Fatalf("query %d: %d hits, %s %d", q, len(got[q]), what, len(want[q]))
		}
		last := want[q][len(want[q])-1].dist
		for i := range want[q] {
			g, w := got[q][i], want[q][i]
			if (g.id != w.id && w.dist != last) || math.Abs(g.dist-w.dist) > 1e-5*math.Max(1e-6, math.Abs(w.dist)) {
				t.Fatalf("query %d hit %d: %v, %s %v", q, i, g, what, w)
			}
		}
	}
}

// closeVecHits is sameVecHits for IVF_RQ, whose distances in LanceDB
// depend on a row's position in its partition (rows of full blocks of 32
// are scored through a quantized lookup table, the rest exactly), which
// the same codes in another row order change, and LanceDB's own
// optimize() orders a delta's rows differently from run to run: at least
// 98% of want's hits must be in got, and 90% of those within 3% (plus
// 0.01) of want's distance (a row scored through the lookup table on one
// side and exactly on the other can differ by a third).
func closeVecHits(t *testing.T, got, want [][]vecHit, what string) {
	t.Helper()
	same, close, n := 0, 0, 0
	var far []string
	for q := range want {
		for _, w := range want[q] {
			n++
			for _, g := range got[q] {
				if g.id == w.id {
					same++
					if math.Abs(g.dist-w.dist) <= 0.03*math.Abs(w.dist)+0.01 {
						close++
					} else if len(far) < 5 {
						far = append(far, fmt.Sprintf("query %d row %d at %v, %s %v", q, w.id, g.dist, what, w.dist))
					}
				}
			}
		}
	}
	t.Logf("%d of %d of %s's hits found, %d of them at its distance (3%%); e.g. %v", same, n, what, close, far)
	if float64(same) < 0.98*float64(n) || float64(close) < 0.9*float64(same) {
		t.Fatalf("%d of %d of %s's hits found, %d of them at its distance: %v", same, n, what, close, far)
	}
}

// TestCatchUpVectorIndexes: after LanceDB built a vector index (each kind
// compactord encodes, each distance type) and two fragments were
// appended, compactord's catch-up adds a delta segment over them, encoded
// with the index's centroids and quantizer; LanceDB then counts no
// unindexed row and two segments, and its search with every partition
// probed returns, for 50 queries, the same ids and distances as a copy on
// which LanceDB's own optimize() appended its delta (HNSW: recall@10
// against the exhaustive search within 0.01 of the copy's, the graphs
// being built with other random levels; with a search list as long as
// the table, the HNSW kinds too return the copy's ids and distances, the
// storage's codes deciding them). compactord's rebuild of the index into
// one segment then gives the same answers again: it re-encodes every row
// with the same centroids and quantizer, so the codes are those of the
// two segments, but for dot PQ, where LanceDB's optimize() picks a delta
// row's codebook entries by dot product and its createIndex (which a
// rebuild reproduces, TestRebuildVectorIndexesMatchLanceDB) by L2. LanceDB has no
// rebuild without retraining to compare with: its createIndex retrains.
func TestCatchUpVectorIndexes(t *testing.T) {
	lancedb.Require(t)
	for _, k := range oracleKinds() {
		for _, d := range []string{"l2", "cosine", "dot"} {
			t.Run(k.typ+k.variant+"_"+d, func(t *testing.T) {
				f, twin := oracleTable(t, k, d, true)
				res, err := CatchUp(t.Context(), openHandle(t, f.Dir), Options{})
				if err != nil {
					t.Fatal(err)
				}
				live, total := 0, 0
				for id := int64(0); id < k.rows+k.rows/4; id++ {
					if id%11 != 0 {
						total++
						if id >= k.rows {
							live++
						}
					}
				}
				if !res.Committed || len(res.Indices) != 1 || res.Indices[0].Name != "vec_idx" || fmt.Sprint(res.Indices[0].Fragments) != "[4 5]" || res.Indices[0].Rows != live {
					t.Fatalf("catch-up: %+v; want vec_idx caught up over fragments 4 and 5 (%d rows)", res, live)
				}
				out := f.Run(t, lancedb.Open(), lancedb.ListIndices(), lancedb.IndexStats("vec_idx"))
				st, err := out.IndexStats(2)
				if err != nil || st == nil || st.NumUnindexedRows != 0 || st.NumIndexedRows != int64(total) {
					t.Fatalf("index stats after catch-up: %+v %v; want %d indexed", st, err, total)
				}
				ixs, err := out.Indices(1)
				if err != nil || len(ixs) != 1 || ixs[0].NumSegments != 2 {
					t.Fatalf("indices after catch-up: %+v %v; want vec_idx of two segments", ixs, err)
				}
				if k.variant == "4bit" {
					// LanceDB's 4-bit PQ distances of a row change with the
					// other segments it scans (a base row's moved from 1.28
					// to 1.93 when a delta was added), so searches are not
					// comparable; TestEncodeMatchesLanceDBDelta compares the
					// codes with LanceDB's own delta instead.
					return
				}
				lanceDBAppend(t, twin)
				hnsw := strings.HasPrefix(k.typ, "ivf_hnsw")
				// An HNSW search whose list holds every node visits every
				// node the graph reaches: the storage's codes decide it.
				wide := 0
				if hnsw {
					wide = int(k.rows + k.rows/4)
				}
				theirs, theirsWide := vecSearches(t, twin, d, k.partitions, false), vecSearchesEf(t, twin, d, k.partitions, false, wide)
				// recall's searches: the optimize() copy's, the exhaustive
				// ones, and (rebuild) LanceDB's createIndex's one graph.
				var theirsR, exactR, oneGraph [][]vecHit
				if hnsw {
					theirsR, exactR = recallSearches(t, twin, d, k.partitions, false), recallSearches(t, f, d, k.partitions, true)
				}
				check := func(what string) {
					if what == "rebuild" && strings.HasSuffix(k.typ, "pq") && d == "dot" {
						return
					}
					if k.typ == "ivf_rq" {
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
						// One graph over every row against LanceDB's one
						// graph over them (its createIndex on a copy), not
						// against the copy's two segments: a search through
						// two graphs keeps a list of ef in each, twice the
						// candidates of one.
						lance, ref = recall(oneGraph, exactR), "LanceDB's createIndex"
					}
					t.Logf("recall@10: compactord's %s %.3f, %s %.3f", what, ours, ref, lance)
					if ours < lance-0.01 {
						t.Errorf("recall@10 %.3f after compactord's %s, %s %.3f", ours, what, ref, lance)
					}
				}
				check("catch-up")
				if k.typ == "ivf_hnsw_sq" {
					// SQ's bounds are the rows' range, so LanceDB's
					// createIndex over them quantizes as the rebuild does;
					// over PQ it would train another codebook, and the
					// rebuild is held to the optimize() copy instead.
					fresh := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
					fresh.Dir = fresh.URI + "/t.lance"
					copyDir(t, twin.Dir, fresh.Dir)
					fresh.Run(t, lancedb.Open(), lancedb.CreateVectorIndex("vec", k.typ, "vec_idx", indexOpts(k, d)))
					oneGraph = recallSearches(t, fresh, d, k.partitions, false)
				}

				rb, err := Rebuild(t.Context(), openHandle(t, f.Dir), "vec_idx", RebuildOptions{})
				if err != nil || rb.Rows != total || len(rb.Removed) != 2 {
					t.Fatalf("rebuild: %+v %v; want one segment of %d rows replacing two", rb, err, total)
				}
				check("rebuild")
			})
		}
	}
}

// TestCatchUpSQOutsideBounds: new rows three times the range the base's
// SQ bounds were trained on are caught up with those bounds (their codes
// saturated), as LanceDB's optimize() encodes its delta: a search with a
// list as long as the table, every partition probed, returns the ids and
// distances of LanceDB's optimize() copy, new rows among them.
func TestCatchUpSQOutsideBounds(t *testing.T) {
	lancedb.Require(t)
	const base, added = 2000, 300
	f := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
	f.Dir = f.URI + "/t.lance"
	wide := make([]lancedb.Row, 0, added)
	for id := int64(base); id < base+added; id++ {
		r := lancedb.BasicRow(id, fmt.Sprintf("w%d", id))
		v := lancedb.VectorOf(id)
		for i := range v {
			v[i] *= 3
		}
		r["vec"] = v
		wide = append(wide, r)
	}
	f.Run(t, lancedb.Create(lancedb.VectorSchema, lancedb.VectorRows(0, base, "v")),
		lancedb.CreateVectorIndex("vec", "ivf_hnsw_sq", "vec_idx", map[string]any{"numPartitions": 1, "distanceType": "l2"}),
		lancedb.Add(wide))
	twin := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
	twin.Dir = twin.URI + "/t.lance"
	copyDir(t, f.Dir, twin.Dir)
	res, err := CatchUp(t.Context(), openHandle(t, f.Dir), Options{})
	if err != nil || !res.Committed || len(res.Indices) != 1 || res.Indices[0].Rows != added {
		t.Fatalf("catch-up: %+v %v; want vec_idx caught up over the %d new rows", res, err, added)
	}
	lanceDBAppend(t, twin)
	// Queries from the new rows' range, so that new rows are among the
	// hits.
	query := func(id int64) []float32 {
		v := lancedb.VectorOf(id)
		for i := range v {
			v[i] *= 3
		}
		return v
	}
	got, want := vecSearchesOf(t, f, "l2", 1, false, base+added, query), vecSearchesOf(t, twin, "l2", 1, false, base+added, query)
	newHits := 0
	for _, hs := range got {
		for _, h := range hs {
			if h.id >= base {
				newHits++
			}
		}
	}
	if newHits == 0 {
		t.Fatal("no new row among the hits: the test no longer compares their codes")
	}
	sameVecHits(t, got, want, "LanceDB's optimize() copy")
}

// TestRebuildVectorIndexesMatchLanceDB: compactord's rebuild of an index LanceDB built
// (each kind and distance type, rows deleted since) re-encodes every live
// row with the index's centroids and quantizer as LanceDB's createIndex
// did, so LanceDB's search with every partition probed returns, for 50
// queries, the ids and distances it returned before (HNSW: with a search
// list as long as the table; at LanceDB's default, recall@10 against the
// exhaustive search within 0.01 of that of LanceDB's graph).
func TestRebuildVectorIndexesMatchLanceDB(t *testing.T) {
	lancedb.Require(t)
	for _, k := range oracleKinds() {
		for _, d := range []string{"l2", "cosine", "dot"} {
			t.Run(k.typ+k.variant+"_"+d, func(t *testing.T) {
				f, _ := oracleTable(t, k, d, false)
				hnsw := strings.HasPrefix(k.typ, "ivf_hnsw")
				wide := 0
				if hnsw {
					wide = int(k.rows)
				}
				before, beforeWide := vecSearches(t, f, d, k.partitions, false), vecSearchesEf(t, f, d, k.partitions, false, wide)
				var beforeR, exactR [][]vecHit
				if hnsw {
					beforeR, exactR = recallSearches(t, f, d, k.partitions, false), recallSearches(t, f, d, k.partitions, true)
				}
				live := int(k.rows - (k.rows+10)/11)
				rb, err := Rebuild(t.Context(), openHandle(t, f.Dir), "vec_idx", RebuildOptions{})
				if err != nil || rb.Rows != live || len(rb.Removed) != 1 {
					t.Fatalf("rebuild: %+v %v; want one segment of %d rows", rb, err, live)
				}
				st := stats(t, f.Run(t, lancedb.Open(), lancedb.IndexStats("vec_idx")), 1)
				if st.NumUnindexedRows != 0 || st.NumIndexedRows != int64(live) {
					t.Fatalf("index stats after rebuild: %+v; want %d indexed", st, live)
				}
				if k.typ == "ivf_rq" {
					closeVecHits(t, vecSearches(t, f, d, k.partitions, false), before, "LanceDB's own index")
				} else {
					sameVecHits(t, vecSearchesEf(t, f, d, k.partitions, false, wide), beforeWide, "LanceDB's own index")
				}
				if hnsw {
					ours, lance := recall(recallSearches(t, f, d, k.partitions, false), exactR), recall(beforeR, exactR)
					t.Logf("recall@10: compactord's rebuild %.3f, LanceDB's index %.3f", ours, lance)
					if ours < lance-0.01 {
						t.Errorf("recall@10 %.3f after compactord's rebuild, LanceDB's index %.3f", ours, lance)
					}
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

// multiSearches runs 50 two-vector queries through the multivector column
// vec (one partition, an HNSW search list of ef), 10 hits each, nearest
// first, ties by id.
func multiSearches(t *testing.T, f *lancedb.Fixture, ef int) [][]vecHit {
	t.Helper()
	steps := []lancedb.Step{lancedb.Open()}
	for q := range 50 {
		steps = append(steps, lancedb.VectorSearch(lancedb.VectorQuery{Multi: [][]float32{lancedb.VectorOf(int64(100000 + q)), lancedb.VectorOf(int64(200000 + q))},
			Column: "vec", Limit: 10, Nprobes: 1, Ef: ef, Columns: []string{"id"}}))
	}
	return searchHits(t, f.Run(t, steps...), 50)
}

// multivectorTable has LanceDB build a table of schema (a multivector
// column vec) with rows 0..1999 in four fragments, index vec_idx (typ,
// opts), rows 2000..2499 appended in two fragments and id % 11 = 0
// deleted. It returns the table and a copy.
func multivectorTable(t *testing.T, schema []lancedb.Column, typ string, opts map[string]any) (f, twin *lancedb.Fixture) {
	t.Helper()
	f = &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
	f.Dir = f.URI + "/t.lance"
	steps := []lancedb.Step{lancedb.Create(schema, lancedb.MultivectorRows(0, 500, "v"))}
	for lo := int64(500); lo < 2000; lo += 500 {
		steps = append(steps, lancedb.Add(lancedb.MultivectorRows(lo, lo+500, "v")))
	}
	steps = append(steps, lancedb.CreateVectorIndex("vec", typ, "vec_idx", opts),
		lancedb.Add(lancedb.MultivectorRows(2000, 2250, "w")), lancedb.Add(lancedb.MultivectorRows(2250, 2500, "w")),
		lancedb.Delete("id % 11 = 0"))
	f.Run(t, steps...)
	twin = &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
	twin.Dir = twin.URI + "/t.lance"
	copyDir(t, f.Dir, twin.Dir)
	return f, twin
}

// TestCatchUpMultivectorIndexes: LanceDB 0.39 indexes a multivector
// column (a list of vectors a row, cosine) one entry per vector; after
// two fragments were appended, compactord's catch-up indexes each of
// their vectors under its row's address with the index's centroid and
// quantizer, LanceDB counts no unindexed row, and its multivector search
// returns, for 50 two-vector queries, the ids and distances of a copy on
// which its own optimize() appended the delta (HNSW: with a search list
// as long as the table).
func TestCatchUpMultivectorIndexes(t *testing.T) {
	lancedb.Require(t)
	for _, typ := range []string{"ivf_flat", "ivf_pq", "ivf_hnsw_sq"} {
		t.Run(typ, func(t *testing.T) {
			opts := map[string]any{"numPartitions": 1, "distanceType": "cosine"}
			if typ == "ivf_pq" {
				opts["numSubVectors"] = 4
			}
			f, twin := multivectorTable(t, lancedb.MultivectorSchema, typ, opts)

			res, err := CatchUp(t.Context(), openHandle(t, f.Dir), Options{})
			if err != nil {
				t.Fatal(err)
			}
			live := 0
			for id := 2000; id < 2500; id++ {
				if id%11 != 0 {
					live++
				}
			}
			if !res.Committed || len(res.Indices) != 1 || res.Indices[0].Rows != 2*live {
				t.Fatalf("catch-up: %+v; want vec_idx caught up with %d vectors", res, 2*live)
			}
			if st := stats(t, f.Run(t, lancedb.Open(), lancedb.IndexStats("vec_idx")), 1); st.NumUnindexedRows != 0 {
				t.Fatalf("index stats after catch-up: %+v", st)
			}
			lanceDBAppend(t, twin)
			ef := 0
			if typ == "ivf_hnsw_sq" {
				ef = 6000
			}
			sameVecHits(t, multiSearches(t, f, ef), multiSearches(t, twin, ef), "LanceDB's optimize() copy")
		})
	}
}
