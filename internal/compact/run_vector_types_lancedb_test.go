package compact

import (
	"fmt"
	"strings"
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

// TestRunLeavesOutRefusedVectorIndexes: LanceDB 0.39 builds IVF_FLAT with
// the hamming distance over uint8 (binary) vectors; compactord does not
// read it, so its compaction leaves the fragments it covers out (unremappable_index, the index named), writes nothing
// of theirs, and LanceDB's search through the index is unchanged.
func TestRunLeavesOutRefusedVectorIndexes(t *testing.T) {
	lancedb.Require(t)
	for _, c := range []struct {
		name     string
		schema   []lancedb.Column
		rows     func(lo, hi int64, tag string) []lancedb.Row
		typ      string
		opts     map[string]any
		distance string
	}{
		{"hamming", lancedb.VectorSchemaOf("uint8"), lancedb.BinaryVectorRows, "ivf_flat", map[string]any{"numPartitions": 2, "distanceType": "hamming"}, "hamming"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
			f.Dir = f.URI + "/t.lance"
			steps := []lancedb.Step{lancedb.Create(c.schema, c.rows(0, 250, "v"))}
			for lo := int64(250); lo < 1000; lo += 250 {
				steps = append(steps, lancedb.Add(c.rows(lo, lo+250, "v")))
			}
			steps = append(steps, lancedb.CreateVectorIndex("vec", c.typ, "vec_idx", c.opts), lancedb.Delete("id % 3 = 0"),
				lancedb.ListIndices())
			ixs, err := f.Run(t, steps...).Indices(len(steps) - 1)
			if err != nil || len(ixs) != 1 {
				t.Fatalf("indices: %+v %v", ixs, err)
			}
			q := lancedb.VectorQuery{Vector: lancedb.VectorOf(7), Column: "vec", Limit: 5, Columns: []string{"id"}, DistanceType: c.distance}
			if c.name == "hamming" {
				q.Vector = nil
				for _, x := range lancedb.VectorOf(7) {
					q.Vector = append(q.Vector, float32(int((x+1)*127)))
				}
			}
			search := func() []int64 {
				out := f.Run(t, lancedb.Open(), lancedb.VectorSearch(q))
				rows, err := out.Rows(1)
				if err != nil {
					t.Fatal(err)
				}
				var ids []int64
				for _, r := range rows {
					id, _ := r.Int("id")
					ids = append(ids, id)
				}
				return ids
			}
			before := search()
			res, err := Run(t.Context(), openHandle(t, f.Dir), DefaultOptions(), Env{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Commit != nil || len(res.Plan.Skips) != 4 {
				t.Fatalf("compaction: committed %v, skips %+v; want all four fragments left out", res.Commit != nil, res.Plan.Skips)
			}
			for _, s := range res.Plan.Skips {
				if s.Code != SkipIndex || !strings.Contains(s.Reason, `"vec_idx"`) {
					t.Fatalf("skip %+v; want unremappable_index naming vec_idx", s)
				}
			}
			after, err := f.Run(t, lancedb.Open(), lancedb.ListIndices()).Indices(1)
			if err != nil || len(after) != 1 || after[0].IndexUUID != ixs[0].IndexUUID {
				t.Fatalf("indices after: %+v %v; want vec_idx untouched", after, err)
			}
			if got := search(); fmt.Sprint(got) != fmt.Sprint(before) || len(got) != 5 {
				t.Fatalf("search after %v, before %v", got, before)
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
