package compact

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

var labelSchema = []lancedb.Column{
	{Name: "id", Type: "int64"}, {Name: "s", Type: "utf8", Nullable: true}, {Name: "tags", Type: "list<int32>", Nullable: true},
}

// labelTags is row id's tags: a null list when id % 11 = 0, {0} when
// id % 13 = 0, else {id % 3, 10 + id % 4}.
func labelTags(id int64) ([]int32, bool) {
	switch {
	case id%11 == 0:
		return nil, false
	case id%13 == 0:
		return []int32{0}, true
	}
	return []int32{int32(id % 3), int32(10 + id%4)}, true
}

func labelRows(lo, hi int64, tag string) []lancedb.Row {
	var rows []lancedb.Row
	for id := lo; id < hi; id++ {
		r := lancedb.Row{"id": id, "s": fmt.Sprintf("%s%d", tag, id), "tags": nil}
		if l, ok := labelTags(id); ok {
			r["tags"] = l
		}
		rows = append(rows, r)
	}
	return rows
}

// hasLabels is array_has_any (all false) or array_has_all (all true) of
// id's tags and want; ok is false for a null list (the predicate is
// null).
func hasLabels(id int64, all bool, want ...int32) (has, ok bool) {
	l, ok := labelTags(id)
	if !ok {
		return false, false
	}
	n := 0
	for _, w := range want {
		if slices.Contains(l, w) {
			n++
		}
	}
	if all {
		return n == len(want), true
	}
	return n > 0, true
}

// labelProbes are answered by the label-list index on tags (their
// literals are int32: an int64 list literal makes LanceDB cast the column
// and scan instead); the NOT probe holds only if the index still marks
// the null lists (a null predicate is not true).
var labelProbes = []probe{
	{"array_has_any(tags, [CAST(1 AS INT)])", func(id int64) bool { h, _ := hasLabels(id, false, 1); return h }},
	{"array_has_any(tags, [CAST(2 AS INT), CAST(13 AS INT)])", func(id int64) bool { h, _ := hasLabels(id, false, 2, 13); return h }},
	{"array_has_all(tags, [CAST(2 AS INT), CAST(11 AS INT)])", func(id int64) bool { h, _ := hasLabels(id, true, 2, 11); return h }},
	{"NOT array_has_any(tags, [CAST(0 AS INT)])", func(id int64) bool { h, ok := hasLabels(id, false, 0); return ok && !h }},
}

// checkLabelAnswers is checkAnswers of labelProbes, after checking that
// LanceDB answers each of them from tags_idx.
func checkLabelAnswers(t *testing.T, f *lancedb.Fixture, what string, want map[int64]string) int {
	t.Helper()
	steps := []lancedb.Step{lancedb.Open()}
	for _, p := range labelProbes {
		steps = append(steps, lancedb.Explain(p.where))
	}
	out := f.Run(t, steps...)
	for i, p := range labelProbes {
		plan, err := out.Plan(1 + i)
		if err != nil || !strings.Contains(plan, "@tags_idx(LabelList)") {
			t.Fatalf("%s: LanceDB does not answer %s from tags_idx (%v):\n%s", what, p.where, err, plan)
		}
	}
	return checkAnswers(t, f, what, want, labelProbes)
}

// TestRunRemapsLabelListWithLanceDB: a label-list index over the first
// fragments of a table with deletes everywhere no longer keeps them out
// of the plan; after compactord's compaction (inline, or deferred then
// remapped through the FRI) and its catch-up of the rest, LanceDB's
// array_has_any / array_has_all answers equal the scan's, its
// indexStats counts no unindexed row, and LanceDB's own writes and
// optimize() over compactord's segments keep them right.
func TestRunRemapsLabelListWithLanceDB(t *testing.T) {
	lancedb.Require(t)
	for _, deferred := range []bool{false, true} {
		t.Run(fmt.Sprintf("deferred=%v", deferred), func(t *testing.T) {
			f := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
			f.Dir = f.URI + "/t.lance"
			f.Results = f.Run(t, lancedb.Create(labelSchema, labelRows(0, 200, "v")),
				lancedb.Add(labelRows(200, 400, "v")), lancedb.Add(labelRows(400, 600, "v")),
				lancedb.CreateIndex("tags", "label_list", "tags_idx"),
				lancedb.Add(labelRows(600, 800, "v")), lancedb.Delete("id % 7 = 0"))
			want := map[int64]string{}
			for id := int64(0); id < 800; id++ {
				if id%7 != 0 {
					want[id] = fmt.Sprintf("v%d", id)
				}
			}
			if n := checkLabelAnswers(t, f, "as LanceDB built it", want); n > 0 {
				t.Fatalf("%d answers differ before compactord ran", n)
			}
			h := openHandle(t, f.Dir)
			o := DefaultOptions()
			o.DeferRemap = deferred
			res, err := Run(t.Context(), h, o, Env{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Commit == nil || len(res.Plan.Skips) != 0 || res.Stats.FragmentsIn < 3 {
				t.Fatalf("compaction: committed %v, stats %+v, skips %+v; want the indexed fragments rewritten", res.Commit != nil, res.Stats, res.Plan.Skips)
			}
			if deferred {
				rr, err := index.RemapIndexes(t.Context(), h, index.RemapJobOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if len(rr.Indices) != 1 || rr.Indices[0].Name != "tags_idx" {
					t.Fatalf("remap %+v: want tags_idx remapped", rr)
				}
			}
			checkLabelContent(t, f, "after compaction")
			if n := checkLabelAnswers(t, f, "after compaction", want); n > 0 {
				t.Fatalf("%d answers differ", n)
			}
			cu, err := index.CatchUp(t.Context(), h, index.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !cu.Committed || len(cu.Indices) != 1 || cu.Indices[0].Kind != index.KindLabelList {
				t.Fatalf("catch-up %+v: want tags_idx over the unindexed fragment", cu)
			}
			checkLabelContent(t, f, "after catch-up")
			out := f.Run(t, lancedb.Open(), lancedb.IndexStats("tags_idx"))
			if st, err := out.IndexStats(1); err != nil || st == nil || st.NumUnindexedRows != 0 || st.NumIndexedRows != int64(len(want)) {
				t.Fatalf("indexStats after catch-up: %+v (%v); want %d indexed, 0 unindexed", st, err, len(want))
			}
			if n := checkLabelAnswers(t, f, "after catch-up", want); n > 0 {
				t.Fatalf("%d answers differ", n)
			}
			lanceDBWritesChecked(t, f, want, labelRows, func(what string) int { return checkLabelAnswers(t, f, what, want) })
		})
	}
}

// checkLabelContent checks tags_idx with verify --deep's content check.
func checkLabelContent(t *testing.T, f *lancedb.Fixture, what string) {
	t.Helper()
	h := openHandle(t, f.Dir)
	read, _, err := h.ReadForWrite(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	cs, err := index.CheckContent(t.Context(), h.Bucket, read, []string{"tags_idx"})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || !cs[0].Checked || len(cs[0].Problems) != 0 {
		t.Fatalf("%s: content check %+v", what, cs)
	}
	if segs := meta.FindIndex(read.Indices, "tags_idx"); len(segs) == 0 {
		t.Fatalf("%s: no tags_idx", what)
	}
}
