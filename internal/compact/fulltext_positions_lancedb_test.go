package compact

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

// posDoc is row id's text for the positions tests: ftsDoc's words, plus
// "gamma extraordinarilylong epsilon" when id % 3 = 0, whose middle word
// max_token_length drops (leaving a position gap).
func posDoc(id int64) string {
	doc := ftsDoc(id)
	if id%3 == 0 {
		doc += " gamma extraordinarilylong epsilon"
	}
	return doc
}

func posRows(lo, hi int64) []lancedb.Row {
	var rows []lancedb.Row
	for i := lo; i < hi; i++ {
		rows = append(rows, lancedb.Row{"id": i, "doc": posDoc(i)})
	}
	return rows
}

// posOpts: a simple, lower-cased, unstemmed index with positions whose
// max_token_length drops extraordinarilylong.
var posOpts = map[string]any{"baseTokenizer": "simple", "stem": false, "removeStopWords": false, "asciiFolding": false, "withPosition": true, "maxTokenLength": 12}

// posQuery is a phrase (with slop) or a match query.
type posQuery struct {
	text  string
	slop  int
	match bool
}

// posQueries: phrases over adjacent words, a phrase across the dropped
// word (no row at slop 0, the id % 3 = 0 rows at slop 1), a phrase only
// new rows hold, a repeated word, words in the wrong order, and a match
// query of several terms.
var posQueries = []posQuery{
	{text: "running quickly"}, {text: "alpha3 beta2"}, {text: "delta the"}, {text: "delta delta"},
	{text: "quickly w350"}, {text: "gamma epsilon"}, {text: "gamma epsilon", slop: 1}, {text: "quickly running"},
	{text: "beta1 running quickly"}, {text: "alpha1 w17 epsilon", match: true},
}

// posScores runs posQueries with LanceDB: per query, id → BM25 score.
func posScores(t *testing.T, f *lancedb.Fixture) []map[int64]float64 {
	t.Helper()
	steps := []lancedb.Step{lancedb.Open()}
	for _, q := range posQueries {
		if q.match {
			steps = append(steps, lancedb.MatchSearch(q.text, "doc", "", []string{"id"}))
		} else {
			steps = append(steps, lancedb.PhraseSearch(q.text, "doc", q.slop, []string{"id"}))
		}
	}
	out := f.Run(t, steps...)
	var res []map[int64]float64
	for i, q := range posQueries {
		rows, err := out.Rows(1 + i)
		if err != nil {
			t.Fatal(err)
		}
		m := map[int64]float64{}
		for _, r := range rows {
			id, _ := r.Int("id")
			s, ok := r.Float("_score")
			if !ok {
				t.Fatalf("query %+v: no _score in %v", q, r)
			}
			m[id] = s
		}
		res = append(res, m)
	}
	return res
}

// TestFullTextPositionsWithLanceDB: on a full-text index with positions,
// compactord's catch-up (a new partition), compaction with deletes (the
// index remapped inline, or deferred and then remapped through the
// fragment-reuse index) and rebuild (one partition) leave an index on
// which LanceDB's phrase and match queries return the same rows with BM25
// scores within 1e-4 as a copy on which LanceDB did the same work
// (optimize(), or a fresh index for the rebuild), and LanceDB counts no
// unindexed row.
func TestFullTextPositionsWithLanceDB(t *testing.T) {
	lancedb.Require(t)
	schema := []lancedb.Column{{Name: "id", Type: "int64"}, {Name: "doc", Type: "utf8", Nullable: true}}
	for _, via := range []string{"catchup", "compact", "deferred", "rebuild"} {
		t.Run(via, func(t *testing.T) {
			ours := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
			ours.Dir = filepath.Join(ours.URI, "t.lance")
			var steps []lancedb.Step
			switch via {
			case "catchup":
				steps = []lancedb.Step{lancedb.Create(schema, posRows(0, 300)), lancedb.CreateVectorIndex("doc", "fts", "doc_idx", posOpts), lancedb.Add(posRows(300, 400))}
			case "compact", "deferred":
				steps = []lancedb.Step{lancedb.Create(schema, posRows(0, 600)), lancedb.Add(posRows(600, 1000)), lancedb.CreateVectorIndex("doc", "fts", "doc_idx", posOpts), lancedb.Delete("id % 7 = 0")}
			case "rebuild":
				steps = []lancedb.Step{lancedb.Create(schema, posRows(0, 300)), lancedb.CreateVectorIndex("doc", "fts", "doc_idx", posOpts), lancedb.Add(posRows(300, 400)),
					lancedb.Optimize(lancedb.OptimizeOpts{}), lancedb.Delete("id % 9 = 0")}
			}
			ours.Run(t, steps...)
			theirs := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
			theirs.Dir = filepath.Join(theirs.URI, "t.lance")
			copyTree(t, ours.Dir, theirs.Dir)
			if via == "rebuild" {
				theirs.Run(t, lancedb.CreateVectorIndex("doc", "fts", "doc_idx", posOpts))
			} else {
				theirs.Run(t, lancedb.Optimize(lancedb.OptimizeOpts{}))
			}

			h := openHandle(t, ours.Dir)
			switch via {
			case "catchup":
				res, err := index.CatchUp(t.Context(), h, index.Options{})
				if err != nil || !res.Committed || len(res.Indices) != 1 || res.Indices[0].Rows != 100 || len(res.Skipped) != 0 {
					t.Fatalf("catch-up %+v (%v): want doc_idx caught up over 100 docs", res, err)
				}
			case "compact", "deferred":
				o := DefaultOptions()
				o.DeferRemap = via == "deferred"
				res, err := Run(t.Context(), h, o, Env{})
				if err != nil || res.Commit == nil || len(res.Plan.Skips) != 0 || res.Stats.FragmentsIn != 2 {
					t.Fatalf("compaction %+v (%v): want both fragments rewritten, the index remapped", res, err)
				}
				if via == "deferred" {
					rr, err := index.RemapIndexes(t.Context(), h, index.RemapJobOptions{})
					if err != nil || len(rr.Indices) != 1 || rr.Indices[0].Dropped != 143 {
						t.Fatalf("remap through the FRI %+v (%v): want doc_idx remapped, 143 docs dropped", rr, err)
					}
				}
			case "rebuild":
				res, err := index.Rebuild(t.Context(), h, "doc_idx", index.RebuildOptions{})
				if err != nil || res.Kind != index.KindInverted {
					t.Fatalf("rebuild: %+v, %v", res, err)
				}
			}
			out := ours.Run(t, lancedb.Open(), lancedb.IndexStats("doc_idx"))
			if st, err := out.IndexStats(1); err != nil || st == nil || st.NumUnindexedRows != 0 {
				t.Fatalf("indexStats: %+v (%v)", st, err)
			}
			got, want := posScores(t, ours), posScores(t, theirs)
			for i, q := range posQueries {
				if len(got[i]) != len(want[i]) {
					t.Errorf("%+v: %d rows, LanceDB's %d", q, len(got[i]), len(want[i]))
					continue
				}
				for id, s := range want[i] {
					if g, ok := got[i][id]; !ok || math.Abs(g-s) > 1e-4 {
						t.Errorf("%+v: id %d score %v (present %v), LanceDB's %v", q, id, g, ok, s)
						break
					}
				}
			}
			// The data says: the gap keeps "gamma epsilon" apart at slop 0
			// only; nothing has the words in the wrong order.
			if len(want[0]) == 0 || len(want[5]) != 0 || len(want[6]) == 0 || len(want[7]) != 0 {
				t.Fatalf("LanceDB's answers are not what the data says: %d, %d, %d, %d rows", len(want[0]), len(want[5]), len(want[6]), len(want[7]))
			}
		})
	}
}
