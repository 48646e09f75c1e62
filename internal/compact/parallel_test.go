package compact_test

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/compact"
	"github.com/compactord/compactord/internal/ops"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testutil"
)

// gatedBucket holds the first data files opened until `want` are open at
// once (proving the groups run concurrently), and records the most ever
// open at once (which must never pass the limit).
type gatedBucket struct {
	storage.Bucket
	want   int
	mu     sync.Mutex
	cond   *sync.Cond
	open   int
	max    int
	opened bool // the first wave has met
}

func (g *gatedBucket) NewWriter(ctx context.Context, key string) (io.WriteCloser, error) {
	if !strings.HasPrefix(key, "data/") {
		return g.Bucket.NewWriter(ctx, key)
	}
	g.mu.Lock()
	g.open++
	g.max = max(g.max, g.open)
	if g.open >= g.want {
		g.opened = true
	}
	g.cond.Broadcast()
	for !g.opened {
		g.cond.Wait()
	}
	g.mu.Unlock()
	w, err := g.Bucket.NewWriter(ctx, key)
	if err != nil {
		return nil, err
	}
	return &gatedWriter{WriteCloser: w, g: g}, nil
}

type gatedWriter struct {
	io.WriteCloser
	g    *gatedBucket
	once sync.Once
}

func (w *gatedWriter) Close() error {
	err := w.WriteCloser.Close()
	w.once.Do(func() {
		w.g.mu.Lock()
		w.g.open--
		w.g.mu.Unlock()
	})
	return err
}

// The groups of one compaction run concurrently, up to the configured
// limit: the first wave provably reaches it (the gate holds it until it
// does), and no moment of the run is seen above it.
func TestGroupsRunInParallelUnderTheLimit(t *testing.T) {
	f := newFixture(t, "mem://"+testutil.UniqueName(t), 12, 100)
	g := &gatedBucket{Bucket: f.tb.Bucket, want: 2}
	g.cond = sync.NewCond(&g.mu)
	c, err := commit.NewCommitter(commit.Config{}, g, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tb := ops.NewTable(g, c, nil, nil)
	cp, err := compact.New(compact.Config{TargetRowsPerFragment: 200, Parallelism: 2}, tb, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := cp.Run(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Stats.Groups != 6 || g.max != 2 {
		t.Fatalf("%d groups, at most %d open at once; want 6 groups, 2 at once", out.Stats.Groups, g.max)
	}
	f.checkRows(1200, func(int64) bool { return false })
}
