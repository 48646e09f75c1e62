package merge

import (
	"fmt"
	"testing"

	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

// TestRunAllThenLanceDBMaintenance: the state a merge of every MemWAL
// generation and the index catch-up after it leave (new fragments, delta
// segments of a btree and a bitmap) reads back in LanceDB with each index
// answering as a scan of the model does, and still does after LanceDB's
// own delete, merge-insert, append and optimize().
func TestRunAllThenLanceDBMaintenance(t *testing.T) {
	lancedb.Require(t)
	steps, want := lancedb.MemWALSteps(2, 3)
	// A bitmap next to the maintained btree (steps[1] creates id_idx).
	steps = append(steps[:2:2], append([]lancedb.Step{lancedb.CreateIndex("cat", "bitmap", "cat_idx")}, steps[2:]...)...)
	f := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
	f.Dir = f.URI + "/t.lance"
	f.Run(t, steps...)
	h := openHandle(t, f.Dir)
	out, err := RunAll(t.Context(), h, Env{MaxGenerations: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Landed) == 0 {
		t.Fatalf("nothing merged: %+v", out)
	}
	cu, err := index.CatchUp(t.Context(), h, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !cu.Committed || len(cu.Indices) != 2 {
		t.Fatalf("catch-up %+v: want id_idx and cat_idx over the merged fragments", cu)
	}
	probes := []struct {
		where string
		keep  func(int64) bool
	}{
		{"id >= 0", func(int64) bool { return true }},
		{"id < 10", func(id int64) bool { return id < 10 }},
		{"id IN (0, 3, 101, 204, 302, 500)", func(id int64) bool {
			return id == 0 || id == 3 || id == 101 || id == 204 || id == 302 || id == 500
		}},
		{"cat = 1", func(id int64) bool { return id%4 == 1 }},
	}
	check := func(what string) {
		t.Helper()
		st := []lancedb.Step{lancedb.Open(), lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(false)})}
		for _, p := range probes {
			st = append(st, lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(false), Where: p.where}), lancedb.CountRows(p.where))
		}
		res := f.Run(t, st...)
		byID := func(i int) map[int64]string {
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
		if d := lancedb.DiffByID(byID(1), want); d != "" {
			t.Fatalf("%s: scan: %s", what, d)
		}
		for i, p := range probes {
			w := map[int64]string{}
			for id, s := range want {
				if p.keep(id) {
					w[id] = s
				}
			}
			if d := lancedb.DiffByID(byID(2+2*i), w); d != "" {
				t.Errorf("%s: rows where %s: %s", what, p.where, d)
			}
			if n, err := res.Count(3 + 2*i); err != nil || n != int64(len(w)) {
				t.Errorf("%s: count where %s = %d (%v), the scan's %d", what, p.where, n, err, len(w))
			}
		}
	}
	check("after merge and catch-up")

	f.Run(t, lancedb.Open(), lancedb.Delete("id % 3 = 0"), lancedb.Optimize(lancedb.OptimizeOpts{}))
	for id := range want {
		if id%3 == 0 {
			delete(want, id)
		}
	}
	check("after LanceDB's delete and optimize()")
	f.Run(t, lancedb.Open(), lancedb.PlainMergeInsert("id", []lancedb.Row{lancedb.BasicRow(1, "m1"), lancedb.BasicRow(101, "m101")}),
		lancedb.Add(lancedb.BasicRows(500, 510)), lancedb.Delete("id < 3"), lancedb.Optimize(lancedb.OptimizeOpts{}))
	want[101] = "m101"
	for id := int64(500); id < 510; id++ {
		want[id] = fmt.Sprintf("v%d", id)
	}
	for id := range want {
		if id < 3 {
			delete(want, id)
		}
	}
	check("after LanceDB's writes and optimize()")
}
