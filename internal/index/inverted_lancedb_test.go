package index

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/merge"
	"github.com/compactord/compactord/internal/testing/lancedb"
	"github.com/compactord/compactord/internal/trim"
)

// invertedText is row id's text: a null when id % 10 = 3, empty when
// id % 10 = 4, else words shared by many rows, one of its own (w<id>),
// and repeats.
func invertedText(id int64) any {
	switch id % 10 {
	case 3:
		return nil
	case 4:
		return ""
	}
	s := fmt.Sprintf("Alpha%d beta%d Running quickly w%d", id%5, id%7, id)
	if id%4 == 0 {
		s += " delta delta the"
	}
	return s
}

func invertedRows(lo, hi int64) []lancedb.Row {
	var out []lancedb.Row
	for i := lo; i < hi; i++ {
		out = append(out, lancedb.Row{"id": i, "doc": invertedText(i)})
	}
	return out
}

var invertedQueries = []string{"alpha3", "delta", "running", "w17", "w350", "the", "alpha1 beta2", "quickly w399 delta"}

// textScores runs invertedQueries with LanceDB: per query, id → score.
func textScores(t *testing.T, f *lancedb.Fixture) []map[int64]float64 {
	t.Helper()
	steps := []lancedb.Step{lancedb.Open()}
	for _, q := range invertedQueries {
		steps = append(steps, lancedb.TextSearch(q, "doc", 0, []string{"id"}))
	}
	out := f.Run(t, steps...)
	var res []map[int64]float64
	for i := range invertedQueries {
		rows, err := out.Rows(1 + i)
		if err != nil {
			t.Fatal(err)
		}
		m := map[int64]float64{}
		for _, r := range rows {
			id, _ := r.Int("id")
			m[id], _ = r.Float("_score")
		}
		res = append(res, m)
	}
	return res
}

// TestCatchUpFullTextWithLanceDB: a whitespace, unstemmed full-text index
// over 300 rows with 100 rows appended since is caught up by a new
// partition; LanceDB then counts no unindexed row and answers every query
// (a term only the new rows hold included) with the rows and BM25 scores
// (within 1e-4) of a copy its own optimize() caught up.
func TestCatchUpFullTextWithLanceDB(t *testing.T) {
	lancedb.Require(t)
	schema := []lancedb.Column{{Name: "id", Type: "int64"}, {Name: "doc", Type: "utf8", Nullable: true}}
	opts := map[string]any{"baseTokenizer": "whitespace", "stem": false, "removeStopWords": false, "asciiFolding": false}
	ours := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
	ours.Dir = filepath.Join(ours.URI, "t.lance")
	ours.Run(t, lancedb.Create(schema, invertedRows(0, 300)), lancedb.CreateVectorIndex("doc", "fts", "doc_idx", opts), lancedb.Add(invertedRows(300, 400)))
	theirs := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
	theirs.Dir = filepath.Join(theirs.URI, "t.lance")
	copyDir(t, ours.Dir, theirs.Dir)
	theirs.Run(t, lancedb.Optimize(lancedb.OptimizeOpts{}))

	h := openHandle(t, ours.Dir)
	res, err := CatchUp(t.Context(), h, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Committed || len(res.Indices) != 1 || res.Indices[0].Kind != KindInverted || res.Indices[0].Rows != 80 || len(res.Skipped) != 0 {
		t.Fatalf("catch-up %+v: want doc_idx caught up over 80 docs", res)
	}
	out := ours.Run(t, lancedb.Open(), lancedb.IndexStats("doc_idx"))
	if st, err := out.IndexStats(1); err != nil || st == nil || st.NumUnindexedRows != 0 {
		t.Fatalf("indexStats after catch-up: %+v (%v)", st, err)
	}
	if c := checkAll(t, h)["doc_idx"]; !c.Checked || len(c.Problems) != 0 {
		t.Fatalf("content check: %+v", c)
	}
	got, want := textScores(t, ours), textScores(t, theirs)
	for i, q := range invertedQueries {
		if len(got[i]) != len(want[i]) {
			t.Errorf("%q: %d rows, LanceDB's optimize() %d", q, len(got[i]), len(want[i]))
			continue
		}
		for id, s := range want[i] {
			if g, ok := got[i][id]; !ok || math.Abs(g-s) > 1e-4 {
				t.Errorf("%q: id %d score %v (present %v), LanceDB's %v", q, id, g, ok, s)
				break
			}
		}
	}
	if len(want[4]) != 1 || len(want[5]) == 0 {
		t.Fatalf("LanceDB's answers are not what the data says: w350 %d rows, the %d rows", len(want[4]), len(want[5]))
	}

}

// TestMemWALFullTextRetires: on a MemWAL table whose write spec maintains
// a whitespace full-text index, the merged generations are kept for the
// index (index_lag) until catch-up adds the partition over the merged
// rows; then index_catchup records them, trim deletes them, LanceDB
// counts no unindexed row and finds the merged rows' words.
func TestMemWALFullTextRetires(t *testing.T) {
	lancedb.Require(t)
	opts := map[string]any{"baseTokenizer": "whitespace", "stem": false, "removeStopWords": false, "asciiFolding": false}
	base := lancedb.BasicRows(0, 20)
	steps := []lancedb.Step{lancedb.Create(lancedb.BasicSchema, base), lancedb.CreateVectorIndex("s", "fts", "s_idx", opts), lancedb.SetPrimaryKey("id"),
		lancedb.SetLsmWriteSpec(lancedb.LsmWriteSpec{SpecType: "unsharded", MaintainedIndexes: []string{"s_idx"}})}
	for g := 1; g <= 2; g++ {
		tag := fmt.Sprintf("g%d-", g)
		steps = append(steps, lancedb.MergeInsert("id", append(lancedb.TaggedRows(0, 3, tag), lancedb.TaggedRows(int64(100*g), int64(100*g+3), tag)...)), lancedb.CloseLsmWriters())
	}
	f := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
	f.Dir = filepath.Join(f.URI, "t.lance")
	f.Run(t, steps...)
	h := openHandle(t, f.Dir)
	if out, err := merge.RunAll(t.Context(), h, merge.Env{MaxGenerations: 8}); err != nil || len(out.Landed) == 0 {
		t.Fatalf("merge: %v, %+v", err, out)
	}
	now := time.Now().Add(time.Hour)
	res, err := trim.Run(t.Context(), h.Bucket, trim.DefaultConfig(), now)
	if err != nil {
		t.Fatal(err)
	}
	if r := trimReasons(res); r["delete"] != 0 || r["index_lag"] == 0 {
		t.Fatalf("trim before catch-up: %v (want index_lag, nothing deleted)", r)
	}
	cu, err := CatchUp(t.Context(), h, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !cu.Committed || len(cu.Indices) != 1 || cu.Indices[0].Name != "s_idx" {
		t.Fatalf("catch-up: %+v", cu)
	}
	res, err = trim.Run(t.Context(), h.Bucket, trim.DefaultConfig(), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if r := trimReasons(res); r["delete"] == 0 || r["index_lag"] != 0 {
		t.Fatalf("trim after catch-up: %v", r)
	}
	out := f.Run(t, lancedb.Open(), lancedb.IndexStats("s_idx"), lancedb.TextSearch("g2-201", "s", 0, []string{"id"}).With("lsm", false))
	if st := stats(t, out, 1); st.NumUnindexedRows != 0 {
		t.Fatalf("indexStats after catch-up: %+v", st)
	}
	if rows, err := out.Rows(2); err != nil || len(rows) != 1 {
		t.Fatalf("search g2-201: %v (%v)", rows, err)
	}
}

// TestRebuildFullTextWithLanceDB: a whitespace full-text index of two
// partitions (LanceDB's optimize() added one) over rows with deletes is
// rebuilt into one partition, by index rebuild and by a catch-up past
// MaxSegments partitions; LanceDB then counts no unindexed row and
// answers every query with the rows and scores (within 1e-4) of a copy
// on which it created the index afresh.
func TestRebuildFullTextWithLanceDB(t *testing.T) {
	lancedb.Require(t)
	schema := []lancedb.Column{{Name: "id", Type: "int64"}, {Name: "doc", Type: "utf8", Nullable: true}}
	opts := map[string]any{"baseTokenizer": "whitespace", "stem": false, "removeStopWords": false, "asciiFolding": false}
	for _, via := range []string{"rebuild", "catchup"} {
		t.Run(via, func(t *testing.T) {
			ours := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
			ours.Dir = filepath.Join(ours.URI, "t.lance")
			steps := []lancedb.Step{lancedb.Create(schema, invertedRows(0, 300)), lancedb.CreateVectorIndex("doc", "fts", "doc_idx", opts),
				lancedb.Add(invertedRows(300, 400)), lancedb.Optimize(lancedb.OptimizeOpts{}), lancedb.Delete("id % 9 = 0")}
			if via == "catchup" {
				steps = append(steps, lancedb.Add(invertedRows(400, 450)))
			}
			ours.Run(t, steps...)
			theirs := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
			theirs.Dir = filepath.Join(theirs.URI, "t.lance")
			copyDir(t, ours.Dir, theirs.Dir)
			theirs.Run(t, lancedb.CreateVectorIndex("doc", "fts", "doc_idx", opts))

			h := openHandle(t, ours.Dir)
			if via == "rebuild" {
				res, err := Rebuild(t.Context(), h, "doc_idx", RebuildOptions{})
				if err != nil || res.Kind != KindInverted || len(res.Removed) != 1 {
					t.Fatalf("rebuild: %+v, %v", res, err)
				}
			} else {
				res, err := CatchUp(t.Context(), h, Options{MaxSegments: 2})
				if err != nil || len(res.Indices) != 1 || !res.Indices[0].Rebuilt {
					t.Fatalf("catch-up: %+v, %v; want doc_idx rebuilt", res, err)
				}
			}
			out := ours.Run(t, lancedb.Open(), lancedb.IndexStats("doc_idx"))
			if st := stats(t, out, 1); st.NumUnindexedRows != 0 {
				t.Fatalf("indexStats: %+v", st)
			}
			if c := checkAll(t, h)["doc_idx"]; !c.Checked || len(c.Problems) != 0 || c.Masked != 0 {
				t.Fatalf("content check: %+v", c)
			}
			got, want := textScores(t, ours), textScores(t, theirs)
			for i, q := range invertedQueries {
				if len(got[i]) != len(want[i]) {
					t.Errorf("%q: %d rows, a fresh LanceDB index %d", q, len(got[i]), len(want[i]))
					continue
				}
				for id, s := range want[i] {
					if g, ok := got[i][id]; !ok || math.Abs(g-s) > 1e-4 {
						t.Errorf("%q: id %d score %v (present %v), a fresh LanceDB index %v", q, id, g, ok, s)
						break
					}
				}
			}
		})
	}
}
