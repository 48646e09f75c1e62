package table

import (
	"errors"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/testing/lancedb"
	"github.com/compactord/compactord/internal/verify"
)

func minus(want map[int64]string, ids ...int64) map[int64]string {
	out := map[int64]string{}
	for k, v := range want {
		out[k] = v
	}
	for _, id := range ids {
		delete(out, id)
	}
	return out
}

func ids(lo, hi int64) []int64 {
	var out []int64
	for i := lo; i < hi; i++ {
		out = append(out, i)
	}
	return out
}

func verifyClean(t *testing.T, h *Handle) {
	t.Helper()
	rep, err := verify.Run(t.Context(), h.Bucket, verify.Options{Deep: true})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("verify: %+v", rep.Violations)
	}
}

// TestDeleteWhereWithLanceDB: on LanceDB's indexed table (a btree on id, a
// bitmap on cat, one fragment no index covers), deletes by predicate that
// cut across fragments, extend an existing deletion file and empty a
// fragment whole. LanceDB reads the rows minus the deleted ones, its index
// lookups return no deleted row, optimize() runs on top, and verify is
// clean.
func TestDeleteWhereWithLanceDB(t *testing.T) {
	lancedb.Require(t)
	f := lancedb.Indexed(t, "")
	h := handle(t, open(t, f.Dir), commit.DefaultConfig())
	want := f.Want
	for _, tc := range []struct {
		where            string
		gone             []int64
		updated, removed int
	}{
		{"id >= 5 AND id < 15", ids(5, 15), 2, 0},
		{"id == 0", []int64{0}, 1, 0},               // extends fragment 0's deletion file
		{"id >= 20 AND id < 30", ids(20, 30), 0, 1}, // fragment 2 whole
		{"cat = 1 AND id >= 30", []int64{33}, 1, 0}, // the fragment no index covers
	} {
		res, err := h.DeleteWhere(t.Context(), tc.where)
		if err != nil {
			t.Fatalf("%s: %v", tc.where, err)
		}
		if res.Rows != uint64(len(tc.gone)) || len(res.Updated) != tc.updated || len(res.Removed) != tc.removed || res.Commit == nil {
			t.Fatalf("%s: %+v", tc.where, res.DeletePlan)
		}
		if d := res.Commit.Transaction.GetDelete(); d == nil || d.GetPredicate() != tc.where {
			t.Fatalf("%s: committed %v", tc.where, res.Commit.Transaction)
		}
		want = minus(want, tc.gone...)
	}
	verifyClean(t, h)
	idx := func(where string) map[int64]string {
		out := map[int64]string{}
		for k, v := range want {
			if strings.HasPrefix(where, "cat") && k%4 == 1 || strings.HasPrefix(where, "id") && k == 7 {
				out[k] = v
			}
		}
		return out
	}
	out := f.Run(t, lancedb.ReadRows(lancedb.ReadOpts{}), lancedb.ReadRows(lancedb.ReadOpts{Where: "id = 7"}),
		lancedb.ReadRows(lancedb.ReadOpts{Where: "cat = 1"}), lancedb.CountRows(""),
		lancedb.Optimize(lancedb.OptimizeOpts{}), lancedb.ReadRows(lancedb.ReadOpts{}), lancedb.ReadRows(lancedb.ReadOpts{Where: "cat = 1"}))
	if d := lancedb.DiffByID(readRows(t, f, out, 0), want); d != "" {
		t.Errorf("LanceDB reads after the deletes: %s", d)
	}
	if d := lancedb.DiffByID(readRows(t, f, out, 1), idx("id")); d != "" {
		t.Errorf("LanceDB's btree lookup id = 7: %s", d)
	}
	if d := lancedb.DiffByID(readRows(t, f, out, 2), idx("cat")); d != "" {
		t.Errorf("LanceDB's bitmap lookup cat = 1: %s", d)
	}
	if n, _ := out.Count(3); n != int64(len(want)) {
		t.Errorf("LanceDB counts %d rows, want %d", n, len(want))
	}
	if d := lancedb.DiffByID(readRows(t, f, out, 5), want); d != "" {
		t.Errorf("LanceDB reads after its optimize(): %s", d)
	}
	if d := lancedb.DiffByID(readRows(t, f, out, 6), idx("cat")); d != "" {
		t.Errorf("LanceDB's bitmap lookup after optimize(): %s", d)
	}
	verifyClean(t, h)
}

// TestDeleteWhereAgreesWithLanceDB: for predicates over every column type
// of the fixture (int64, utf8, int32, float64, nulls), compactord deletes
// exactly the rows LanceDB's SQL counts for the same predicate.
func TestDeleteWhereAgreesWithLanceDB(t *testing.T) {
	lancedb.Require(t)
	f := lancedb.Plain(t, "")
	f.Run(t, lancedb.Add([]lancedb.Row{{"id": int64(100), "s": nil, "cat": nil, "f": nil}, {"id": int64(101), "s": "v101", "cat": nil, "f": -0.5}, {"id": int64(102), "s": "v102", "cat": int32(2), "f": 1.0}}),
		// One value and nulls: LanceDB writes constant pages with levels.
		lancedb.Add([]lancedb.Row{{"id": int64(103), "s": nil, "cat": int32(5), "f": 2.5}, {"id": int64(104), "s": "v104", "cat": nil, "f": 2.5}}))
	h := handle(t, open(t, f.Dir), commit.DefaultConfig())
	total := int64(35)
	for _, tc := range []struct{ ours, sql string }{
		{"s = 'v3'", "s = 'v3'"},
		{"s > 'v25'", "s > 'v25'"},
		{"cat != 2 AND id < 10", "cat != 2 AND id < 10"},
		{"f <= 4.5 AND f > 2", "f <= 4.5 AND f > 2"},
		{"s = 'v104'", "s = 'v104'"},
		{"cat = null", "cat IS NULL"},
		{"f = 2.5", "f = 2.5"},
		{"f < 0", "f < 0"},
		{"id < -1", "id < -1"},
		{"s != null AND cat = 3", "s IS NOT NULL AND cat = 3"},
	} {
		before := f.Run(t, lancedb.CountRows(tc.sql))
		n, _ := before.Count(0)
		res, err := h.DeleteWhere(t.Context(), tc.ours)
		if err != nil {
			t.Fatalf("%s: %v", tc.ours, err)
		}
		if int64(res.Rows) != n {
			t.Fatalf("%s: deleted %d rows, LanceDB counts %d for %s", tc.ours, res.Rows, n, tc.sql)
		}
		total -= n
		after := f.Run(t, lancedb.CountRows(tc.sql), lancedb.CountRows(""))
		if m, _ := after.Count(0); m != 0 {
			t.Fatalf("%s: LanceDB still counts %d rows for %s", tc.ours, m, tc.sql)
		}
		if m, _ := after.Count(1); m != total {
			t.Fatalf("%s: LanceDB counts %d rows, want %d", tc.ours, m, total)
		}
	}
	verifyClean(t, h)
}

// TestDeleteWhereRefusals: a predicate that does not parse writes nothing
// and is a *PredicateError.
func TestDeleteWhereRefusals(t *testing.T) {
	lancedb.Require(t)
	f := lancedb.Plain(t, "")
	h := handle(t, open(t, f.Dir), commit.DefaultConfig())
	for where, msg := range map[string]string{
		"":                 "empty predicate",
		"id":               "want <field> <op> <literal>",
		"id ~ 3":           "want <field> <op> <literal>",
		"nope = 1":         `no field "nope"`,
		"s = v3":           "cannot read literal v3 (quote strings)",
		"id = 1.5":         "is not a 64-bit integer",
		"cat = 3000000000": "is not a 32-bit integer",
		"f = 'x'":          "is not a number",
	} {
		_, err := h.DeleteWhere(t.Context(), where)
		var pe *PredicateError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: %v, want a PredicateError with %q", where, err, msg)
		}
	}
	v, _, err := meta.Latest(t.Context(), h.Bucket)
	if err != nil || v != f.Version {
		t.Fatalf("latest %d (%v), want %d", v, err, f.Version)
	}
}
