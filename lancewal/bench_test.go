package lancewal

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/testing/lancedb"
)

func benchEnv(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// TestBenchWriter (LANCE_BENCH=1; LANCEWAL_BENCH_ROWS, LANCEWAL_BENCH_BATCH):
// the same upserts written through one MemWAL shard by LanceDB's writer
// (mergeInsert per batch, then closeLsmWriters, which flushes) and by the
// Go writer (Upsert per batch, then Close), each on a fresh table LanceDB
// built; both LSM views must equal the model. LanceDB's time is the sum of
// its steps' times inside node (the harness's JSON-to-Arrow conversion of
// each batch included); the Go writer's is its wall time.
func TestBenchWriter(t *testing.T) {
	if os.Getenv("LANCE_BENCH") == "" {
		t.Skip("set LANCE_BENCH=1 to run the writer benchmark")
	}
	lancedb.Require(t)
	n, batch := benchEnv("LANCEWAL_BENCH_ROWS", 100_000), benchEnv("LANCEWAL_BENCH_BATCH", 1000)
	var batches [][]Row
	for lo := 0; lo < n; lo += batch {
		batches = append(batches, goRows(int64(lo), int64(min(n, lo+batch)), "b-"))
	}
	want := map[int64]string{}
	for _, b := range batches {
		putModel(want, b)
	}

	// LanceDB.
	fl := lancedb.MemWAL(t, "", 1, 0)
	var steps []lancedb.Step
	for _, b := range batches {
		steps = append(steps, lancedb.MergeInsert("id", lanceRows(b)))
	}
	steps = append(steps, lancedb.CloseLsmWriters())
	res := fl.Run(t, steps...)
	ldb := 0
	for _, s := range res.Steps {
		ldb += s.Millis
	}
	base := map[int64]string{}
	for k, v := range fl.Want {
		base[k] = v
	}
	wantL := map[int64]string{}
	for k, v := range base {
		wantL[k] = v
	}
	for k, v := range want {
		wantL[k] = v
	}
	if d := lancedb.DiffByID(lsmView(t, fl), wantL); d != "" {
		t.Fatalf("LanceDB's writes: %s", d)
	}

	// The Go writer.
	fg := lancedb.MemWAL(t, "", 1, 0)
	tbl, err := OpenTable(t.Context(), fg.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Close()
	start := time.Now()
	shard, _ := tbl.ShardFor(t.Context(), int64(0))
	w, err := tbl.OpenWriter(t.Context(), shard, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range batches {
		if err := w.Upsert(t.Context(), b); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	goWall := time.Since(start)
	if d := lancedb.DiffByID(lsmView(t, fg), wantL); d != "" {
		t.Fatalf("the Go writer's writes: %s", d)
	}
	msg := fmt.Sprintf("%d rows in %d WAL entries + 1 flush: LanceDB %d ms (%.0f rows/s), Go writer %.0f ms (%.0f rows/s), ratio %.2fx",
		n, len(batches), ldb, float64(n)/(float64(ldb)/1000), float64(goWall.Milliseconds()), float64(n)/goWall.Seconds(),
		(float64(ldb)/1000)/goWall.Seconds())
	t.Log(msg)
	fmt.Println(msg)
}

// TestBenchFlushVector (LANCE_BENCH=1; LANCEWAL_BENCH_VEC_ROWS,
// LANCEWAL_BENCH_BATCH, LANCEWAL_BENCH_DIM): the Go writer's flush of one
// generation of float32 vectors on a table whose MemWAL maintains a btree
// only, and one that also maintains an IVF_PQ index (the flush then builds
// the generation's IVF_HNSW_SQ copy), on tables LanceDB built; and, as the
// peer, LanceDB's own writer on the second table (mergeInsert per batch,
// then closeLsmWriters: LanceDB grows its HNSW graph during the inserts,
// the Go writer at the flush). Every LSM view must read every row.
func TestBenchFlushVector(t *testing.T) {
	if os.Getenv("LANCE_BENCH") == "" {
		t.Skip("set LANCE_BENCH=1 to run the vector flush benchmark")
	}
	lancedb.Require(t)
	n, batch, dim := benchEnv("LANCEWAL_BENCH_VEC_ROWS", 10_000), benchEnv("LANCEWAL_BENCH_BATCH", 1000), benchEnv("LANCEWAL_BENCH_DIM", 128)
	schema := append(append([]lancedb.Column{}, lancedb.BasicSchema...), lancedb.Column{Name: "vec", Type: fmt.Sprintf("vector[%d]", dim), Nullable: true})
	rowsOf := func(lo, hi int64, tag string) []lancedb.Row {
		var out []lancedb.Row
		for id := lo; id < hi; id++ {
			r := lancedb.BasicRow(id, fmt.Sprintf("%s%d", tag, id))
			v := make([]float32, dim)
			x := uint64(id)*0x9e3779b97f4a7c15 + 1
			for e := range v {
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
				v[e] = float32(x>>40)/float32(1<<24)*2 - 1
			}
			r["vec"] = v
			out = append(out, r)
		}
		return out
	}
	const base = 2000
	table := func(maintained ...string) *lancedb.Fixture {
		dir := t.TempDir()
		f := &lancedb.Fixture{URI: dir, Table: "t", Dir: dir + "/t.lance"}
		f.Run(t, lancedb.Create(schema, rowsOf(0, base, "v")),
			lancedb.CreateVectorIndex("vec", "ivf_pq", "vec_idx", map[string]any{"numPartitions": 4, "numSubVectors": dim / 8}),
			lancedb.CreateIndex("id", "btree", "id_idx"), lancedb.SetPrimaryKey("id"),
			lancedb.SetLsmWriteSpec(lancedb.LsmWriteSpec{SpecType: "unsharded", MaintainedIndexes: maintained}))
		return f
	}
	var batches [][]lancedb.Row
	for lo := base; lo < base+n; lo += batch {
		batches = append(batches, rowsOf(int64(lo), int64(min(base+n, lo+batch)), "b-"))
	}
	// goWrite writes the batches and flushes them, alone (the flush's wall
	// and CPU time); then writes them again under new keys and flushes
	// while probe Upserts of probeRows rows go on beside the flush (their
	// latency; the probes stay in the WAL, unflushed).
	const probeRows, maxProbes = 10, 5000
	type goRun struct {
		upsert, flush, flushCPU time.Duration
		busyFlush               time.Duration   // the second flush, beside the probes
		probes                  []time.Duration // each probe Upsert's latency
	}
	goWrite := func(f *lancedb.Fixture) goRun {
		ctx := t.Context()
		tbl, err := OpenTable(ctx, f.Dir)
		if err != nil {
			t.Fatal(err)
		}
		defer tbl.Close()
		shard, _ := tbl.ShardFor(ctx, int64(0))
		w, err := tbl.OpenWriter(ctx, shard, WriterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var r goRun
		upsert := func(b []lancedb.Row, shift int64) {
			rows := make([]Row, len(b))
			for i, x := range b {
				row := Row{}
				for k, v := range x {
					row[k] = v
				}
				row["id"] = x["id"].(int64) + shift
				rows[i] = row
			}
			if err := w.Upsert(ctx, rows); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		for _, b := range batches {
			upsert(b, 0)
		}
		r.upsert = time.Since(start)
		var ru0, ru1 syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
		start = time.Now()
		if g, err := w.Flush(ctx); err != nil || g == nil || g.Rows != n {
			t.Fatalf("flush: %+v, %v", g, err)
		}
		r.flush = time.Since(start)
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
		r.flushCPU = time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())

		for _, b := range batches {
			upsert(b, int64(n))
		}
		done := make(chan error, 1)
		start = time.Now()
		go func() {
			g, err := w.Flush(ctx)
			if err == nil && (g == nil || g.Rows != n) {
				err = fmt.Errorf("generation %+v, want %d rows", g, n)
			}
			done <- err
		}()
		probe := rowsOf(int64(base+2*n), int64(base+2*n+probeRows), "p-")
		waitUntil(t, "the flush to freeze the MemTable", func() bool {
			w.mu.Lock()
			defer w.mu.Unlock()
			return w.mem.rows == 0
		})
	probing:
		for len(r.probes) < maxProbes {
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
				r.busyFlush = time.Since(start)
				break probing
			default:
			}
			p0 := time.Now()
			upsert(probe, 0)
			r.probes = append(r.probes, time.Since(p0))
		}
		if r.busyFlush == 0 {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			r.busyFlush = time.Since(start)
		}
		w.Abandon() // the probes stay in the WAL
		if got := len(lsmView(t, f)); got != base+2*n {
			t.Fatalf("the LSM view reads %d rows, want %d", got, base+2*n)
		}
		return r
	}
	plain := goWrite(table("id_idx"))
	vec := goWrite(table("id_idx", "vec_idx"))
	upPlain, flushPlain, cpuPlain := plain.upsert, plain.flush, plain.flushCPU
	upVec, flushVec, cpuVec := vec.upsert, vec.flush, vec.flushCPU
	probeStats := func(r goRun) string {
		ps := append([]time.Duration(nil), r.probes...)
		slices.Sort(ps)
		if len(ps) == 0 {
			return "no probe Upsert ran during the flush"
		}
		return fmt.Sprintf("%d probe Upserts of %d rows during the %.0f ms flush: median %.1f ms, max %.1f ms",
			len(ps), probeRows, float64(r.busyFlush.Microseconds())/1000, float64(ps[len(ps)/2].Microseconds())/1000, float64(ps[len(ps)-1].Microseconds())/1000)
	}

	fl := table("id_idx", "vec_idx")
	var steps []lancedb.Step
	for _, b := range batches {
		steps = append(steps, lancedb.MergeInsert("id", b))
	}
	steps = append(steps, lancedb.CloseLsmWriters())
	res := fl.Run(t, steps...)
	ldbInsert := 0
	for _, s := range res.Steps[:len(batches)] {
		ldbInsert += s.Millis
	}
	ldbClose := res.Steps[len(batches)].Millis
	if got := len(lsmView(t, fl)); got != base+n {
		t.Fatalf("LanceDB's LSM view reads %d rows, want %d", got, base+n)
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	msg := fmt.Sprintf("%d rows of vector[%d] in %d WAL entries + 1 flush: Go flush %.0f ms (CPU %.0f ms) with a btree copy, %.0f ms (CPU %.0f ms) with btree and vector copies (%.1fx); "+
		"Go upserts %.0f / %.0f ms; LanceDB (btree and vector maintained) mergeInserts %d ms + closeLsmWriters %d ms = %d ms, Go %.0f ms (ratio %.2fx)",
		n, dim, len(batches), ms(flushPlain), ms(cpuPlain), ms(flushVec), ms(cpuVec), ms(flushVec)/ms(flushPlain), ms(upPlain), ms(upVec),
		ldbInsert, ldbClose, ldbInsert+ldbClose, ms(upVec+flushVec), float64(ldbInsert+ldbClose)/ms(upVec+flushVec))
	msg += fmt.Sprintf("; Go Upsert of %d rows without a flush: %.1f ms on average; btree only: %s; btree and vector: %s",
		batch, ms(upVec)/float64(len(batches)), probeStats(plain), probeStats(vec))
	t.Log(msg)
	fmt.Println(msg)
}
