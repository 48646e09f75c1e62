package lancewal

import (
	"fmt"
	"os"
	"strconv"
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
