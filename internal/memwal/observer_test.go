package memwal_test

import (
	"context"
	"io"
	"sync/atomic"
	"testing"

	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/observe"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

// requestCounter counts every request a bucket serves.
type requestCounter struct {
	storage.Bucket
	n atomic.Int64
}

func (c *requestCounter) Get(ctx context.Context, key string) ([]byte, error) {
	c.n.Add(1)
	return c.Bucket.Get(ctx, key)
}

func (c *requestCounter) NewRangeReader(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	c.n.Add(1)
	return c.Bucket.NewRangeReader(ctx, key, off, n)
}

func (c *requestCounter) Attributes(ctx context.Context, key string) (storage.Attrs, error) {
	c.n.Add(1)
	return c.Bucket.Attributes(ctx, key)
}

func (c *requestCounter) List(ctx context.Context, prefix string, fn func(storage.Attrs) error) error {
	c.n.Add(1)
	return c.Bucket.List(ctx, prefix, fn)
}

// TestObserverPollRequests: on a LanceDB MemWAL table with 4 shards, a change
// poll of the idle table costs one request per shard (a GET of the version
// after the known one, answered "not found"); after LanceDB flushes new
// generations the poll finds each shard's newest manifest (the one a full
// listing finds) with at most four requests per changed shard, and says a
// merge is due.
func TestObserverPollRequests(t *testing.T) {
	lancedb.Require(t)
	const shards = 4
	f := lancedb.MemWAL(t, "", shards, 2)
	ctx := context.Background()
	raw, err := storage.Open(ctx, "file://"+f.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	b := &requestCounter{Bucket: raw}
	o := memwal.NewObserver(b)
	snap, err := o.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The fixture's rows land in some of the buckets: a shard directory
	// exists for each bucket written.
	n := int64(len(snap.Shards))
	if snap.Format != observe.FormatLance || !snap.MemWal || n < 2 {
		t.Fatalf("snapshot: format %q, mem_wal %v, %d shards", snap.Format, snap.MemWal, len(snap.Shards))
	}
	if snap.PendingGenerations == 0 {
		t.Fatalf("the fixture's generations are not pending: %+v", snap.Shards)
	}
	t.Logf("sync of a 4-shard table: %d requests", b.n.Load())

	b.n.Store(0)
	unmerged, snap2, err := o.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.n.Load(); got != n {
		t.Errorf("idle poll: %d requests, want %d (one per shard)", got, n)
	}
	if unmerged || snap2 != nil {
		t.Errorf("idle poll reported a change: %v, %v", unmerged, snap2)
	}

	// LanceDB flushes one more generation on every shard it writes.
	f.Run(t, lancedb.MergeInsert("id", lancedb.TaggedRows(0, 40, "more-")), lancedb.CloseLsmWriters())
	b.n.Store(0)
	unmerged, snap2, err = o.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	busy := b.n.Load()
	t.Logf("poll after new generations on every shard: %d requests", busy)
	if busy > 4*n {
		t.Errorf("poll after a flush: %d requests, want at most %d", busy, 4*n)
	}
	if !unmerged || snap2 == nil {
		t.Fatalf("poll after a flush: unmerged %v, snapshot %v", unmerged, snap2)
	}
	for _, sh := range snap2.Shards {
		st, err := memwal.ReadShard(ctx, raw, sh.ID)
		if err != nil {
			t.Fatal(err)
		}
		if want := st.ManifestVersions[len(st.ManifestVersions)-1]; sh.ManifestVersion != want {
			t.Errorf("shard %s: poll found manifest version %d, the listing %d", sh.ID, sh.ManifestVersion, want)
		}
		var flushed uint64
		for _, s := range st.Manifest.GetSstables() {
			if s.GetGeneration() < st.Manifest.GetCurrentGeneration() {
				flushed = max(flushed, s.GetGeneration())
			}
		}
		if sh.Flushed != flushed || flushed == 0 || sh.Pending != sh.Flushed-sh.Merged {
			t.Errorf("shard %s: flushed %d (manifest: %d), merged %d, pending %d", sh.ID, sh.Flushed, flushed, sh.Merged, sh.Pending)
		}
	}
	// A shard created since the last sync is found by the next sync.
	if snap, err = o.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if len(snap.Shards) != shards {
		t.Errorf("sync after writes to every bucket: %d shards, want %d", len(snap.Shards), shards)
	}
}
