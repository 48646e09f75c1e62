package lancewal

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/merge"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

// TestMergeGoGenerations: compactord's merge lands the Go writer's
// generations (upserts, a key rewritten across generations, tombstones of
// base keys) in the base table; LanceDB's base view then equals the model,
// and so does its LSM view.
func TestMergeGoGenerations(t *testing.T) {
	lancedb.Require(t)
	for _, shards := range []int{1, 4} {
		f := lancedb.MemWAL(t, "", shards, 1)
		ctx := t.Context()
		tbl, err := OpenTable(ctx, f.Dir)
		if err != nil {
			t.Fatal(err)
		}
		want := map[int64]string{}
		for k, v := range f.Want {
			want[k] = v
		}
		cfg, err := tbl.Config(ctx)
		if err != nil {
			t.Fatal(err)
		}
		writers := map[string]*Writer{}
		for _, s := range cfg.Shards() {
			w, err := tbl.OpenWriter(ctx, s, WriterOptions{})
			if err != nil {
				t.Fatal(err)
			}
			writers[s] = w
		}
		write := func(rows []Row, del []int64) {
			for _, r := range rows {
				s, _ := tbl.ShardFor(ctx, r["id"])
				if err := writers[s].Upsert(ctx, []Row{r}); err != nil {
					t.Fatal(err)
				}
			}
			putModel(want, rows)
			for _, k := range del {
				s, _ := tbl.ShardFor(ctx, k)
				if err := writers[s].Delete(ctx, []any{k}); err != nil {
					t.Fatal(err)
				}
				delete(want, k)
			}
			for _, w := range writers {
				if _, err := w.Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		write(append(goRows(0, 4, "m1-"), goRows(300, 310, "m1-")...), []int64{7, 8})
		write(goRows(2, 6, "m2-"), []int64{301, 9})
		for _, w := range writers {
			if err := w.Close(ctx); err != nil {
				t.Fatal(err)
			}
		}
		tbl.Close()

		h := openHandle(t, f.Dir)
		out, err := merge.RunAll(ctx, h, merge.Env{MaxGenerations: 8})
		if err != nil {
			t.Fatalf("merge: %v", err)
		}
		if len(out.Landed) == 0 {
			t.Fatalf("merge landed nothing: %+v", out)
		}
		res := f.Run(t, lancedb.Open(), lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(false)}))
		rows, err := res.Rows(1)
		if err != nil {
			t.Fatal(err)
		}
		base, err := lancedb.RowsByID(rows)
		if err != nil {
			t.Fatal(err)
		}
		if d := lancedb.DiffByID(base, want); d != "" {
			t.Fatalf("%d shards: LanceDB's base view after compactord merged the Go generations:\n%s", shards, d)
		}
		if d := lancedb.DiffByID(lsmView(t, f), want); d != "" {
			t.Fatalf("%d shards: LSM view after the merge:\n%s", shards, d)
		}
	}
}

func openHandle(t *testing.T, dir string) *table.Handle {
	t.Helper()
	tbl, err := OpenTable(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tbl.Close() })
	c, err := commit.NewCommitter(commit.DefaultConfig(), tbl.b, clock.Real(), commit.NewMetrics(prometheus.NewRegistry()), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	h, err := table.New(tbl.b, c)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
