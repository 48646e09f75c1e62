package merge

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

// racingBucket runs race once, before the first data file a merge writes
// reaches the bucket: the merge then commits against a version another
// merger has already moved.
type racingBucket struct {
	storage.Bucket
	once sync.Once
	race func()
}

func (b *racingBucket) Put(ctx context.Context, key string, data []byte) error {
	if strings.HasPrefix(key, meta.DataKey("")) {
		b.once.Do(b.race)
	}
	return b.Bucket.Put(ctx, key, data)
}

func (b *racingBucket) NewWriter(ctx context.Context, key string) (io.WriteCloser, error) {
	if strings.HasPrefix(key, meta.DataKey("")) {
		b.once.Do(b.race)
	}
	return b.Bucket.NewWriter(ctx, key)
}

// TestRunAllSkipsLostMerge: RunAll reports a merge that lost to another
// merger as a skip of its shard (not an error, not retried), and what the
// other merger landed is the table's state.
func TestRunAllSkipsLostMerge(t *testing.T) {
	lancedb.Require(t)
	f := lancedb.MemWAL(t, "", 1, 2)
	other := openHandle(t, f.Dir)
	h := openHandle(t, f.Dir)
	var raced *Outcome
	var raceErr error
	h.Bucket = &racingBucket{Bucket: h.Bucket, race: func() {
		raced, raceErr = RunAll(t.Context(), other, Env{MaxGenerations: 8})
	}}
	out, err := RunAll(t.Context(), h, Env{MaxGenerations: 8})
	if err != nil {
		t.Fatalf("RunAll: %v", err)
	}
	if raceErr != nil || raced == nil || len(raced.Landed) != 1 {
		t.Fatalf("the other merger: %+v, %v", raced, raceErr)
	}
	if len(out.Landed) != 0 || len(out.Skipped) != 1 || !strings.Contains(out.Skipped[0].Reason, "lost to another merger") {
		t.Fatalf("outcome: landed %d, skipped %+v", len(out.Landed), out.Skipped)
	}
	res := f.Run(t, lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(false)}))
	if d := lancedb.DiffByID(rowsOf(t, res, 0), f.Want); d != "" {
		t.Errorf("base view: %s", d)
	}
}

// TestRunAllBounded: with one generation per job, RunAll lands one commit
// per generation, each recording the next generation, and stops when
// nothing is left; Env.Shard confines it to one shard.
func TestRunAllBounded(t *testing.T) {
	lancedb.Require(t)
	f := lancedb.MemWAL(t, "", 4, 2)
	h := openHandle(t, f.Dir)
	ids, err := memwal.ListShards(t.Context(), h.Bucket)
	if err != nil || len(ids) < 2 {
		t.Fatalf("shards %v: %v", ids, err)
	}
	one, err := RunAll(t.Context(), h, Env{MaxGenerations: 1, Shard: ids[0]})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range one.Landed {
		if r.Shard != ids[0] || len(r.Generations) != 1 {
			t.Errorf("landed %s generations %v", r.Shard, r.Generations)
		}
	}
	if len(one.Landed) == 0 {
		t.Fatal("nothing landed for the named shard")
	}
	p, err := PlanLatest(t.Context(), h, Env{MaxGenerations: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range p.Jobs {
		if j.Shard == ids[0] {
			t.Errorf("shard %s still has a job after its merge: %+v", ids[0], j)
		}
	}
	rest, err := RunAll(t.Context(), h, Env{MaxGenerations: 1})
	if err != nil {
		t.Fatal(err)
	}
	last := map[string]uint64{}
	version := uint64(0)
	for _, r := range append(one.Landed, rest.Landed...) {
		if g := r.Generations[0]; g != last[r.Shard]+1 {
			t.Errorf("shard %s merged generation %d after %d", r.Shard, g, last[r.Shard])
		}
		last[r.Shard] = r.Generations[0]
		if r.Commit.Version <= version {
			t.Errorf("version %d after %d", r.Commit.Version, version)
		}
		version = r.Commit.Version
	}
	if _, err := RunAll(t.Context(), h, Env{MaxGenerations: 1, Shard: "00000000-0000-0000-0000-000000000000"}); err == nil {
		t.Error("an unknown shard is not an error")
	}
	res := f.Run(t, lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(false)}))
	if d := lancedb.DiffByID(rowsOf(t, res, 0), f.Want); d != "" {
		t.Errorf("base view: %s", d)
	}
}
