package demo_test

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/demo"
	"github.com/compactord/compactord/internal/merge"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

func fastConfig(dir string) demo.Config {
	c := demo.DefaultConfig()
	c.Enabled = true
	c.Tables = []string{"demo", "events"}
	c.URL = (&url.URL{Scheme: "file", Path: dir}).String()
	c.KeySpace = 300
	c.WriteInterval = 5 * time.Millisecond
	c.FlushInterval = 60 * time.Millisecond
	c.BaseInterval = 80 * time.Millisecond
	c.BaseRows = 30
	c.DeleteFraction = 0.3
	return c
}

// runUntil runs the workload until cond holds (polled), then stops it and
// waits for Run to return (which flushes every writer).
func runUntil(t *testing.T, w *demo.Workload, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("the workload did not get there in 2 minutes: %+v", counters(w))
		}
		select {
		case err := <-done:
			cancel()
			t.Fatalf("the workload stopped early: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func counters(w *demo.Workload) string {
	return fmt.Sprintf("upserts %d deletes %d generations %d base appends %d base deletes %d errors %d", w.C.Upserts.Load(), w.C.Deletes.Load(),
		w.C.Generations.Load(), w.C.BaseAppends.Load(), w.C.BaseDeletes.Load(), w.C.Errors.Load())
}

func readModel(t *testing.T, rows []lancedb.Row) map[int64]string {
	t.Helper()
	out := map[int64]string{}
	for _, r := range rows {
		id, ok := r.Int("id")
		if !ok {
			t.Fatalf("row without id: %v", r)
		}
		if _, dup := out[id]; dup {
			t.Fatalf("id %d read twice", id)
		}
		v, _ := r.Float("val")
		out[id] = fmt.Sprintf("%s/%g", r.Str("cat"), v)
	}
	return out
}

func lanceHandle(t *testing.T, u string) *table.Handle {
	t.Helper()
	b, err := storage.Open(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
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

// TestLanceDBReadsDemoTables: the workload creates its tables (btree and
// bitmap indices, a bucket-sharded MemWAL maintaining the btree), writes
// through the Go MemWAL writer and appends and deletes base fragments;
// LanceDB opens every table, sees the indices and the write spec, and its
// LSM view reads exactly the workload's model; after compactord merges the
// generations, LanceDB's base view reads it too.
func TestLanceDBReadsDemoTables(t *testing.T) {
	lancedb.Require(t)
	dir := t.TempDir()
	cfg := fastConfig(dir)
	w, err := demo.New(cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	runUntil(t, w, func() bool {
		return w.C.Generations.Load() >= 6 && w.C.BaseDeletes.Load() >= 2 && w.C.Deletes.Load() > 0
	})
	if n := w.C.Errors.Load(); n != 0 {
		t.Errorf("%d workload errors (%s)", n, counters(w))
	}
	for _, name := range cfg.Tables {
		want := w.Model(name)
		res := lancedb.MustRun(t, lancedb.Program{URI: dir, Table: name, Steps: []lancedb.Step{
			lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(true)}),
			lancedb.ListIndices(),
			lancedb.GetLsmWriteSpec(),
		}})
		rows, err := res.Rows(0)
		if err != nil {
			t.Fatal(err)
		}
		if d := lancedb.DiffByID(readModel(t, rows), want); d != "" {
			t.Fatalf("table %s: LanceDB's LSM view differs from the workload's model:\n%s", name, d)
		}
		ixs, err := res.Indices(1)
		if err != nil {
			t.Fatal(err)
		}
		types := map[string]string{}
		for _, ix := range ixs {
			types[ix.Name] = ix.IndexType
		}
		if types[demo.KeyIndex] != "BTree" || types[demo.CatIndex] != "Bitmap" {
			t.Errorf("table %s: LanceDB lists indices %v", name, types)
		}
		spec, err := res.LsmWriteSpec(2)
		if err != nil {
			t.Fatal(err)
		}
		if spec == nil || spec.SpecType != "bucket" || spec.NumBuckets != cfg.Shards || fmt.Sprint(spec.MaintainedIndexes) != "[id_idx]" {
			t.Errorf("table %s: LanceDB's write spec %+v", name, spec)
		}

		h := lanceHandle(t, cfg.TableURL(name))
		if _, err := merge.RunAll(t.Context(), h, merge.Env{MaxGenerations: 64}); err != nil {
			t.Fatalf("table %s: merge: %v", name, err)
		}
		res = lancedb.MustRun(t, lancedb.Program{URI: dir, Table: name, Steps: []lancedb.Step{lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(false)})}})
		rows, err = res.Rows(0)
		if err != nil {
			t.Fatal(err)
		}
		if d := lancedb.DiffByID(readModel(t, rows), want); d != "" {
			t.Fatalf("table %s: LanceDB's base view after the merge differs from the model:\n%s", name, d)
		}
	}
}

// TestSetupIsIdempotent: a second workload on the same tables finds them
// set up and keeps writing; nothing is created twice.
func TestSetupIsIdempotent(t *testing.T) {
	dir := t.TempDir()
	cfg := fastConfig(dir)
	for i := 0; i < 2; i++ {
		w, err := demo.New(cfg, zaptest.NewLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Setup(t.Context()); err != nil {
			t.Fatalf("setup %d: %v", i, err)
		}
		runUntil(t, w, func() bool { return w.C.Generations.Load() >= 2 })
		if n := w.C.Errors.Load(); n != 0 {
			t.Errorf("run %d: %d errors", i, n)
		}
	}
	h := lanceHandle(t, cfg.TableURL(cfg.Tables[0]))
	read, _, err := h.ReadForWrite(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]int{}
	for _, ix := range read.Indices {
		names[ix.GetName()]++
	}
	if names[demo.KeyIndex] != 1 || names[demo.CatIndex] != 1 || names["__lance_mem_wal"] != 1 {
		t.Errorf("indices after two setups: %v", names)
	}
}

func TestConfigValidate(t *testing.T) {
	good := demo.DefaultConfig()
	good.Enabled = true
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*demo.Config){
		"no url":       func(c *demo.Config) { c.URL = "" },
		"no tables":    func(c *demo.Config) { c.Tables = nil },
		"dup table":    func(c *demo.Config) { c.Tables = []string{"a", "a"} },
		"slash":        func(c *demo.Config) { c.Tables = []string{"a/b"} },
		"zero shards":  func(c *demo.Config) { c.Shards = 0 },
		"key space":    func(c *demo.Config) { c.KeySpace = demo.BaseKeyStart },
		"interval":     func(c *demo.Config) { c.WriteInterval = 0 },
		"batch":        func(c *demo.Config) { c.BatchSize = 0 },
		"delete share": func(c *demo.Config) { c.DeleteFraction = 2 },
	} {
		c := good
		c.Tables = append([]string(nil), good.Tables...)
		mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	off := demo.Config{}
	if err := off.Validate(); err != nil {
		t.Errorf("a disabled demo needs no settings: %v", err)
	}
}
