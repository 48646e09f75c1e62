package merge

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/testing/lancedb"
	"github.com/compactord/compactord/internal/testing/tables"
)

// openHandle opens the Lance table in dir (see package lancetable).
func openHandle(t testing.TB, dir string) *table.Handle {
	t.Helper()
	return tables.Open(t, dir)
}

// mergeAll plans and runs every job once, against the latest version.
func mergeAll(t *testing.T, h *table.Handle) []*Result {
	t.Helper()
	out, err := RunAll(t.Context(), h, Env{MaxGenerations: 8})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Skipped) != 0 {
		t.Errorf("skipped shards: %v", out.Skipped)
	}
	return out.Landed
}

func rowsOf(t *testing.T, res *lancedb.Results, i int) map[int64]string {
	t.Helper()
	rows, err := res.Rows(i)
	if err != nil {
		t.Fatal(err)
	}
	m, err := lancedb.RowsByID(rows)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestMergeReadByLanceDB: after compactord merges every flushed generation,
// LanceDB's base view reads what its LSM view read before, its LSM view is
// unchanged, and its MemWAL writer keeps writing.
func TestMergeReadByLanceDB(t *testing.T) {
	lancedb.Require(t)
	for _, shards := range []int{1, 4} {
		t.Run(map[int]string{1: "1 shard", 4: "4 shards"}[shards], func(t *testing.T) {
			f := lancedb.MemWAL(t, "", shards, 3)
			before := f.Run(t, lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(true)}))
			if d := lancedb.DiffByID(rowsOf(t, before, 0), f.Want); d != "" {
				t.Fatalf("LanceDB's LSM view before the merge: %s", d)
			}
			h := openHandle(t, f.Dir)
			results := mergeAll(t, h)
			gens, inserted, superseded := 0, 0, 0
			for _, r := range results {
				gens += len(r.Generations)
				inserted += r.Inserted
				superseded += r.Superseded
			}
			// 3 generations each upsert ids 0..4 and insert 5 new ids:
			// per shard's share, every key lands once.
			if gens < 3 || inserted != 5+15 || superseded != 5 {
				t.Errorf("merged %d generations, inserted %d rows, superseded %d base rows (want ≥3, 20, 5)", gens, inserted, superseded)
			}
			after := f.Run(t,
				lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(false)}),
				lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(true)}),
				lancedb.CountRows(""))
			if d := lancedb.DiffByID(rowsOf(t, after, 0), f.Want); d != "" {
				t.Errorf("LanceDB's base view after the merge: %s", d)
			}
			if d := lancedb.DiffByID(rowsOf(t, after, 1), f.Want); d != "" {
				t.Errorf("LanceDB's LSM view after the merge: %s", d)
			}
			if n, _ := after.Count(2); n != int64(len(f.Want)) {
				t.Errorf("countRows = %d, want %d", n, len(f.Want))
			}
			// Nothing is left to merge, and the MemWAL index records it.
			if again := mergeAll(t, h); len(again) != 0 {
				t.Errorf("a second pass merged %d jobs", len(again))
			}
			// LanceDB keeps writing through the MemWAL.
			more := lancedb.TaggedRows(0, 3, "after-")
			out := f.Run(t, lancedb.MergeInsert("id", more), lancedb.CloseLsmWriters(), lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(true)}))
			want := map[int64]string{}
			for k, v := range f.Want {
				want[k] = v
			}
			added, _ := lancedb.RowsByID(more)
			for k, v := range added {
				want[k] = v
			}
			if d := lancedb.DiffByID(rowsOf(t, out, 2), want); d != "" {
				t.Errorf("LanceDB's writes after the merge: %s", d)
			}
		})
	}
}

// TestLosingMergeIsSkipped: a merge whose generation another merger landed
// first is incompatible (skipped), never landed twice.
func TestLosingMergeIsSkipped(t *testing.T) {
	lancedb.Require(t)
	f := lancedb.MemWAL(t, "", 1, 2)
	h1, h2 := openHandle(t, f.Dir), openHandle(t, f.Dir)
	ctx := context.Background()
	read, naming, err := h2.ReadForWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids, _ := memwal.ListShards(ctx, h2.Bucket)
	st, err := memwal.ReadShard(ctx, h2.Bucket, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	jobs, _, err := Plan(read, []*memwal.ShardState{st}, Env{MaxGenerations: 8})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("plan: %v, %v", jobs, err)
	}
	if len(mergeAll(t, h1)) == 0 {
		t.Fatal("the first merger merged nothing")
	}
	_, err = Execute(ctx, h2, read, naming, jobs[0])
	if !errors.Is(err, commit.ErrIncompatible) {
		t.Fatalf("the losing merge: %v, want incompatible", err)
	}
	out := f.Run(t, lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(false)}))
	if d := lancedb.DiffByID(rowsOf(t, out, 0), f.Want); d != "" {
		t.Errorf("rows after the losing merge: %s", d)
	}
}

// TestMergeOverAnAppend: a MemWAL merge planned before a LanceDB append
// (or a plain merge-insert, which records no inserted-key filter) landed
// commits over one of other keys (it reads the landed keys rather than
// planning again, so a stream of such writes cannot starve it), and
// plans again (retryable) over one of a key it writes, which it would
// otherwise leave live beside its own row.
func TestMergeOverAnAppend(t *testing.T) {
	lancedb.Require(t)
	for _, tc := range []struct {
		name  string
		key   int64
		want  error
		merge bool // LanceDB's plain merge-insert instead of an append
	}{
		{"other keys", 5000, nil, false},
		{"a key of the generation", 101, commit.ErrRetryable, false},
		{"merge-insert of other keys", 5000, nil, true},
		{"merge-insert of a key of the generation", 101, commit.ErrRetryable, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := lancedb.MemWAL(t, "", 1, 2)
			h := openHandle(t, f.Dir)
			ctx := context.Background()
			read, naming, err := h.ReadForWrite(ctx)
			if err != nil {
				t.Fatal(err)
			}
			ids, _ := memwal.ListShards(ctx, h.Bucket)
			st, err := memwal.ReadShard(ctx, h.Bucket, ids[0])
			if err != nil {
				t.Fatal(err)
			}
			jobs, _, err := Plan(read, []*memwal.ShardState{st}, Env{MaxGenerations: 8})
			if err != nil || len(jobs) != 1 {
				t.Fatalf("plan: %v, %v", jobs, err)
			}
			if tc.merge {
				// An Update inserting rows with no inserted-key filter.
				f.Run(t, lancedb.PlainMergeInsert("id", []lancedb.Row{lancedb.BasicRow(tc.key, "appended")}))
			} else {
				f.Run(t, lancedb.Add([]lancedb.Row{lancedb.BasicRow(tc.key, "appended")}))
			}
			res, err := Execute(ctx, h, read, naming, jobs[0])
			if tc.want != nil {
				if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), "keys the merge writes") {
					t.Fatalf("merge over an append of key %d: %v, want %v naming the keys", tc.key, err, tc.want)
				}
				return
			}
			if err != nil || res.Commit == nil {
				t.Fatalf("merge over an append of other keys: %v", err)
			}
			want := maps.Clone(f.Want)
			want[tc.key] = "appended"
			out := f.Run(t, lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(false)}))
			if d := lancedb.DiffByID(rowsOf(t, out, 0), want); d != "" {
				t.Errorf("rows after the merge: %s", d)
			}
		})
	}
}
