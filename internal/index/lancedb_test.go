package index

import (
	"fmt"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/format/file"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

func openHandle(t *testing.T, dir string) *table.Handle {
	t.Helper()
	b := openBucket(t, dir)
	c, err := commit.NewCommitter(commit.DefaultConfig(), b, clock.Real(), commit.NewMetrics(prometheus.NewRegistry()), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	h, err := table.New(b, c)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func stats(t *testing.T, res *lancedb.Results, i int) *lancedb.IndexStatistics {
	t.Helper()
	s, err := res.IndexStats(i)
	if err != nil {
		t.Fatal(err)
	}
	if s == nil {
		t.Fatalf("step %d: LanceDB knows no such index", i)
	}
	return s
}

func idsOf(t *testing.T, res *lancedb.Results, i int) []int64 {
	t.Helper()
	rows, err := res.Rows(i)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, r := range rows {
		id, _ := r.Int("id")
		out = append(out, id)
	}
	return out
}

func want(lo, hi int64, keep func(int64) bool) []int64 {
	var out []int64
	for i := lo; i < hi; i++ {
		if keep == nil || keep(i) {
			out = append(out, i)
		}
	}
	return out
}

func sameIDs(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// indexedQueries are filters LanceDB answers with id_idx / cat_idx, and the
// ids each must return on a table holding ids [0, n) with cat = id % 4.
func indexedQueries(n int64, deleted map[int64]bool) map[string][]int64 {
	keep := func(f func(int64) bool) func(int64) bool {
		return func(i int64) bool { return !deleted[i] && f(i) }
	}
	return map[string][]int64{
		"id = 32":                want(0, n, keep(func(i int64) bool { return i == 32 })),
		"id >= 27 AND id < 33":   want(0, n, keep(func(i int64) bool { return i >= 27 && i < 33 })),
		"id IN (1, 31, 34, 999)": want(0, n, keep(func(i int64) bool { return i == 1 || i == 31 || i == 34 })),
		"cat = 1":                want(0, n, keep(func(i int64) bool { return i%4 == 1 })),
		"cat IN (0, 3)":          want(0, n, keep(func(i int64) bool { return i%4 == 0 || i%4 == 3 })),
	}
}

// TestCatchUpIndexedByLanceDB: on LanceDB's table with a btree and a bitmap
// index and 5 rows appended since, catch-up adds a delta segment to each;
// LanceDB then reports no unindexed rows and answers indexed filters with
// the right rows. A second catch-up changes nothing.
func TestCatchUpIndexedByLanceDB(t *testing.T) {
	lancedb.Require(t)
	for _, rebuild := range []bool{false, true} {
		t.Run(fmt.Sprintf("rebuild=%v", rebuild), func(t *testing.T) {
			f := lancedb.Indexed(t, "")
			before := f.Run(t, lancedb.IndexStats("id_idx"), lancedb.IndexStats("cat_idx"))
			if s := stats(t, before, 0); s.NumUnindexedRows != 5 {
				t.Fatalf("before: id_idx has %d unindexed rows, want 5", s.NumUnindexedRows)
			}
			h := openHandle(t, f.Dir)
			res, err := CatchUp(t.Context(), h, Options{Rebuild: rebuild, Clock: clock.NewFake(time.UnixMilli(1700000000000))})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Committed || len(res.Indices) != 2 {
				t.Fatalf("catch-up: %+v", res)
			}
			for _, ir := range res.Indices {
				wantRows := 5
				if rebuild {
					wantRows = 35
				}
				if ir.Rows != wantRows || len(ir.Fragments) != 1 || ir.Fragments[0] != 3 || ir.Rebuilt != rebuild {
					t.Errorf("%s: %+v", ir.Name, ir)
				}
			}
			q := indexedQueries(35, nil)
			var order []string
			steps := []lancedb.Step{lancedb.IndexStats("id_idx"), lancedb.IndexStats("cat_idx"), lancedb.ListIndices()}
			for w := range q {
				order = append(order, w)
				steps = append(steps, lancedb.ReadRows(lancedb.ReadOpts{Where: w}))
			}
			after := f.Run(t, steps...)
			for i := range 2 {
				s := stats(t, after, i)
				if s.NumUnindexedRows != 0 || s.NumIndexedRows != 35 {
					t.Errorf("after: index %d: %d indexed, %d unindexed rows (want 35, 0)", i, s.NumIndexedRows, s.NumUnindexedRows)
				}
				t.Logf("stats %d: %+v", i, s)
			}
			ixs, err := after.Indices(2)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("indices: %+v", ixs)
			for k, w := range order {
				if got := idsOf(t, after, 3+k); !sameIDs(got, q[w]) {
					t.Errorf("where %s: %v, want %v", w, got, q[w])
				}
			}
			again, err := CatchUp(t.Context(), h, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if again.Committed || len(again.Indices) != 0 {
				t.Errorf("a second catch-up: %+v", again)
			}
		})
	}
}

// TestLanceDBAnswersFromOurSegments proves LanceDB's indexed filters read
// the delta segments compactord writes (so the catch-up tests above test
// them): a planted delta over fragment 3 that files the row of id 30 under
// id 32 (btree) and under cat 1 (bitmap) makes LanceDB return id 30 for
// "id = 32" and for "cat = 1", which a scan of fragment 3 never would.
func TestLanceDBAnswersFromOurSegments(t *testing.T) {
	lancedb.Require(t)
	f := lancedb.Indexed(t, "")
	h := openHandle(t, f.Dir)
	read, naming, err := h.ReadForWrite(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	frag3 := roaring.BitmapOf(3)
	op := &pb.Transaction_CreateIndex{}
	for _, name := range []string{"id_idx", "cat_idx"} {
		segs := meta.FindIndex(read.Indices, name)
		tf := fieldByID(read.Manifest, segs[0].GetFields()[0])
		e, err := Collect(t.Context(), h.Bucket, read.Manifest.GetVersion(), tf, frag3)
		if err != nil {
			t.Fatal(err)
		}
		// Row 0 of fragment 3 is id 30 (cat 2): file it under id 32 / cat 1.
		lie := int64(32)
		if name == "cat_idx" {
			lie = 1
		}
		switch e.Values.Type.Kind {
		case file.KindInt64:
			le.PutUint64(e.Values.Values[0:], uint64(lie))
		case file.KindInt32:
			le.PutUint32(e.Values.Values[0:], uint32(lie))
		}
		w, err := WriteSegment(t.Context(), h.Bucket, meta.IndexKind(segs[0]), tf, e)
		if err != nil {
			t.Fatal(err)
		}
		ix, err := SegmentMetadata(name, segs[0].GetFields(), meta.IndexKind(segs[0]), segs[0], read.Manifest.GetVersion(), frag3, w, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		op.NewIndices = append(op.NewIndices, ix)
	}
	txn := commit.NewTransaction(read.Manifest.GetVersion())
	txn.Operation = &pb.Transaction_CreateIndex_{CreateIndex: op}
	if _, err := h.Committer.Commit(t.Context(), &commit.Txn{Read: read, Naming: naming, Transaction: txn}); err != nil {
		t.Fatal(err)
	}
	out := f.Run(t, lancedb.ReadRows(lancedb.ReadOpts{Where: "id = 32"}), lancedb.ReadRows(lancedb.ReadOpts{Where: "cat = 1"}))
	t.Logf("id = 32: %v; cat = 1: %v", idsOf(t, out, 0), idsOf(t, out, 1))
	if got := idsOf(t, out, 0); !sameIDs(got, []int64{30, 32}) && !sameIDs(got, []int64{30}) {
		t.Errorf("id = 32 with the planted btree delta: %v, want id 30 among them (LanceDB did not read our segment)", got)
	}
	wantCat := append(want(0, 30, func(i int64) bool { return i%4 == 1 }), 30)
	if got := idsOf(t, out, 1); !containsAll(got, wantCat) {
		t.Errorf("cat = 1 with the planted bitmap delta: %v, want %v (LanceDB did not read our segment)", got, wantCat)
	}
}

func containsAll(got, want []int64) bool {
	m := map[int64]bool{}
	for _, g := range got {
		m[g] = true
	}
	for _, w := range want {
		if !m[w] {
			return false
		}
	}
	return true
}
