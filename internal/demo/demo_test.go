package demo_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/demo"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/ops"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

var seq atomic.Int64

func open(t *testing.T, url string) *ops.Table {
	t.Helper()
	b, err := storage.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	c, err := commit.NewCommitter(commit.Config{}, b, nil, nil, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	return ops.NewTable(b, c, nil, nil)
}

func fastConfig() demo.Config {
	c := demo.DefaultConfig()
	c.Enabled = true
	c.WriteInterval = 2 * time.Millisecond
	c.FlushInterval = 15 * time.Millisecond
	c.BaseInterval = 20 * time.Millisecond
	c.BaseRows = 30
	c.DeleteFraction = 0.3
	return c
}

// Setup creates the table, both indices and the MemWAL maintaining them,
// and a second Setup changes nothing.
func TestSetupIsIdempotent(t *testing.T) {
	ctx := context.Background()
	tb := open(t, fmt.Sprintf("mem://demo-setup-%d/t", seq.Add(1)))
	w, err := demo.New(fastConfig(), tb, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	m, err := table.ReadLatest(ctx, tb.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	for _, ix := range demo.Indices {
		if table.FindIndex(m, ix.Name) == nil {
			t.Fatalf("no index %s", ix.Name)
		}
	}
	mw := table.MemWal(m)
	maintained := slices.Sorted(slices.Values(mw.GetMaintainedIndexes()))
	if mw == nil || !slices.Equal(mw.Shards, []string{"s0", "s1"}) || !slices.Equal(maintained, []string{"cat_idx", "id_idx"}) {
		t.Fatalf("MemWAL %+v", mw)
	}
	w2, err := demo.New(fastConfig(), tb, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w2.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	if v, _ := table.LatestVersion(ctx, tb.Bucket); v != m.Version {
		t.Fatalf("a second setup committed version %d", v)
	}
}

// The workload streams upserts and tombstones through the MemWAL (flushed
// to SSTables) and appends and deletes on the base table, without errors,
// and a restarted workload carries on without repeating a key.
func TestWorkloadStreams(t *testing.T) {
	ctx := context.Background()
	tb := open(t, fmt.Sprintf("mem://demo-run-%d/t", seq.Add(1)))
	for round := range 2 {
		w, err := demo.New(fastConfig(), tb, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- w.Run(rctx) }()
		deadline := time.Now().Add(30 * time.Second)
		for w.C.SSTables.Load() < 4 || w.C.BaseAppends.Load() < 3 || w.C.BaseDeletes.Load() < 1 ||
			w.C.Upserts.Load() == 0 || w.C.Tombstones.Load() == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the workload did too little: sstables %d, appends %d, deletes %d",
					round, w.C.SSTables.Load(), w.C.BaseAppends.Load(), w.C.BaseDeletes.Load())
			}
			time.Sleep(time.Millisecond)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if n := w.C.Errors.Load(); n != 0 {
			t.Fatalf("round %d: %d errors", round, n)
		}
	}
	for _, s := range []string{"s0", "s1"} {
		sm, err := memwal.ReadShardManifest(ctx, tb.Bucket, s)
		if err != nil || sm == nil || len(sm.Sstables) == 0 {
			t.Fatalf("shard %s: %v %v", s, sm, err)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	ok := fastConfig()
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, mut := range []func(*demo.Config){
		func(c *demo.Config) { c.Shards = nil },
		func(c *demo.Config) { c.Shards = []string{"bad/shard"} },
		func(c *demo.Config) { c.KeySpace = demo.BaseKeyStart },
		func(c *demo.Config) { c.WriteInterval = 0 },
		func(c *demo.Config) { c.DeleteFraction = 2 },
		func(c *demo.Config) { c.BatchSize = 0 },
	} {
		c := fastConfig()
		mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("accepted %+v", c)
		}
	}
	off := demo.Config{}
	if err := off.Validate(); err != nil {
		t.Fatalf("a disabled demo is checked: %v", err)
	}
}
