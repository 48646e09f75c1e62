package compact

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

// ftsDoc is row id's text: alpha<id%5> beta<id%7> Running quickly w<id>,
// plus "delta delta the" when id % 4 = 0.
func ftsDoc(id int64) string {
	doc := fmt.Sprintf("alpha%d beta%d Running quickly w%d", id%5, id%7, id)
	if id%4 == 0 {
		doc += " delta delta the"
	}
	return doc
}

// ftsQueries are single terms (common, rare, stemmed, only in deleted
// rows, a stop word) and several terms.
var ftsQueries = []string{"alpha3", "delta", "running", "w17", "w14", "beta0", "the", "alpha1 beta2", "quick w500 delta"}

// textScores runs ftsQueries with LanceDB: per query, id → BM25 score.
func textScores(t *testing.T, f *lancedb.Fixture) []map[int64]float64 {
	t.Helper()
	steps := []lancedb.Step{lancedb.Open()}
	for _, q := range ftsQueries {
		steps = append(steps, lancedb.TextSearch(q, "doc", 0, []string{"id"}))
	}
	out := f.Run(t, steps...)
	var res []map[int64]float64
	for i := range ftsQueries {
		rows, err := out.Rows(1 + i)
		if err != nil {
			t.Fatal(err)
		}
		m := map[int64]float64{}
		for _, r := range rows {
			id, _ := r.Int("id")
			s, ok := r.Float("_score")
			if !ok {
				t.Fatalf("query %q: no _score in %v", ftsQueries[i], r)
			}
			m[id] = s
		}
		res = append(res, m)
	}
	return res
}

// TestRunRemapsFullTextWithLanceDB: a table whose two fragments a
// full-text index covers, with rows deleted in both, compacted by
// compactord (inline, or deferred then remapped through the FRI) answers
// every full-text query with the same rows and BM25 scores (within 1e-4)
// as a copy LanceDB's optimize() compacted, and its index content check
// passes.
func TestRunRemapsFullTextWithLanceDB(t *testing.T) {
	lancedb.Require(t)
	for _, deferred := range []bool{false, true} {
		t.Run(fmt.Sprintf("deferred=%v", deferred), func(t *testing.T) {
			var rows []lancedb.Row
			for i := int64(0); i < 1000; i++ {
				rows = append(rows, lancedb.Row{"id": i, "doc": ftsDoc(i)})
			}
			ours := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
			ours.Dir = filepath.Join(ours.URI, "t.lance")
			ours.Run(t, lancedb.Create([]lancedb.Column{{Name: "id", Type: "int64"}, {Name: "doc", Type: "utf8", Nullable: true}}, rows[:600]),
				lancedb.Add(rows[600:]), lancedb.CreateIndex("doc", "fts", "doc_idx"), lancedb.Delete("id % 7 = 0"))
			theirs := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
			theirs.Dir = filepath.Join(theirs.URI, "t.lance")
			copyTree(t, ours.Dir, theirs.Dir)
			theirs.Run(t, lancedb.Optimize(lancedb.OptimizeOpts{}))

			h := openHandle(t, ours.Dir)
			o := DefaultOptions()
			o.DeferRemap = deferred
			res, err := Run(t.Context(), h, o, Env{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Commit == nil || len(res.Plan.Skips) != 0 || res.Stats.FragmentsIn != 2 {
				t.Fatalf("compaction: committed %v, stats %+v, skips %+v; want both fragments rewritten", res.Commit != nil, res.Stats, res.Plan.Skips)
			}
			if deferred {
				rr, err := index.RemapIndexes(t.Context(), h, index.RemapJobOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if len(rr.Indices) != 1 || rr.Indices[0].Name != "doc_idx" || rr.Indices[0].Dropped != 143 {
					t.Fatalf("remap %+v: want doc_idx remapped, 143 docs dropped", rr)
				}
			}
			read, _, err := h.ReadForWrite(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			cs, err := index.CheckContent(t.Context(), h.Bucket, read, []string{"doc_idx"})
			if err != nil || len(cs) != 1 || !cs[0].Checked || len(cs[0].Problems) != 0 || cs[0].Masked != 0 {
				t.Fatalf("content check %+v (%v)", cs, err)
			}
			got, want := textScores(t, ours), textScores(t, theirs)
			for i, q := range ftsQueries {
				if len(got[i]) != len(want[i]) {
					t.Errorf("%q: %d rows, LanceDB's optimize() %d", q, len(got[i]), len(want[i]))
					continue
				}
				for id, s := range want[i] {
					g, ok := got[i][id]
					if !ok || math.Abs(g-s) > 1e-4 {
						t.Errorf("%q: id %d score %v (present %v), LanceDB's optimize() %v", q, id, g, ok, s)
						break
					}
				}
			}
			if len(want[0]) == 0 || len(want[3]) != 1 || len(want[4]) != 0 || len(want[6]) != 0 {
				t.Fatalf("LanceDB's answers are not what the data says: %d, %d, %d, %d rows", len(want[0]), len(want[3]), len(want[4]), len(want[6]))
			}
		})
	}
}
