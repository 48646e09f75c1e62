package table_test

import (
	"context"
	"testing"

	"github.com/compactord/compactord/internal/compact"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/testing/lancedb"
	"github.com/compactord/compactord/internal/testing/tables"
	"github.com/compactord/compactord/internal/verify"
)

// openHandle opens the Lance table in dir (see package lancetable).
func openHandle(t testing.TB, dir string) *table.Handle {
	t.Helper()
	return tables.Open(t, dir)
}

func checkAfterRace(t *testing.T, f *lancedb.Fixture, h *table.Handle, gone ...int64) {
	t.Helper()
	want := map[int64]string{}
	for k, v := range f.Want {
		want[k] = v
	}
	for _, id := range gone {
		delete(want, id)
	}
	out := f.Run(t, lancedb.ReadRows(lancedb.ReadOpts{}))
	rows, err := out.Rows(0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := lancedb.RowsByID(rows)
	if err != nil {
		t.Fatal(err)
	}
	if d := lancedb.DiffByID(got, want); d != "" {
		t.Errorf("LanceDB reads after the race: %s", d)
	}
	rep, err := verify.Run(t.Context(), h.Bucket, verify.Options{Deep: true})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Errorf("verify: %+v", rep.Violations)
	}
}

func span(lo, hi int64) []int64 {
	var out []int64
	for i := lo; i < hi; i++ {
		out = append(out, i)
	}
	return out
}

// TestDeleteWhereReplansOverRewrite: a compaction that rewrites the
// fragments a planned delete touches lands between its plan and its
// commit. The delete's rows moved, so it must re-plan on the new
// fragments (a retryable conflict), not land its deletion files on
// fragments that are gone, and no deleted row may come back.
func TestDeleteWhereReplansOverRewrite(t *testing.T) {
	lancedb.Require(t)
	f := lancedb.Plain(t, "")
	h := openHandle(t, f.Dir)
	other := openHandle(t, f.Dir)
	compacted := 0
	table.SetBeforeDeleteCommit(h, func(ctx context.Context) error {
		if compacted > 0 {
			return nil
		}
		res, err := compact.Run(ctx, other, compact.DefaultOptions(), compact.Env{})
		if err == nil && res.Commit != nil {
			compacted++
		}
		return err
	})
	res, err := h.DeleteWhere(t.Context(), "id >= 5 AND id < 15")
	if err != nil {
		t.Fatal(err)
	}
	if compacted != 1 || res.Replans != 1 || res.Rows != 10 || res.Commit == nil {
		t.Fatalf("compactions %d, delete %+v (replans %d)", compacted, res.DeletePlan, res.Replans)
	}
	checkAfterRace(t, f, h, span(5, 15)...)
}

// TestRewriteRebasesOverDeleteWhere: the other order. A delete lands
// while a compaction of its fragments is about to commit; the compaction
// carries the deletes onto its new fragments.
func TestRewriteRebasesOverDeleteWhere(t *testing.T) {
	lancedb.Require(t)
	f := lancedb.Plain(t, "")
	h := openHandle(t, f.Dir)
	other := openHandle(t, f.Dir)
	deleted := uint64(0)
	env := compact.Env{BeforeCommit: func(ctx context.Context, p *compact.Plan) error {
		if deleted > 0 {
			return nil
		}
		res, err := other.DeleteWhere(ctx, "id >= 5 AND id < 15")
		if err == nil {
			deleted = res.Rows
		}
		return err
	}}
	res, err := compact.Run(t.Context(), h, compact.DefaultOptions(), env)
	if err != nil {
		t.Fatal(err)
	}
	if deleted != 10 || res.Commit == nil || res.Rebased+res.Retried == 0 {
		t.Fatalf("deleted %d; compaction rebased %d retried %d", deleted, res.Rebased, res.Retried)
	}
	checkAfterRace(t, f, h, span(5, 15)...)
}
