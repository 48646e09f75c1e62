package memwal_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/ops"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// configureTable makes a table with the MemWAL on shards; the returned
// handle parks its table-version puts while the rule is in place.
func configureTable(t *testing.T, shards ...string) (storage.Bucket, *ops.Table, *storage.Faulty) {
	t.Helper()
	b := openBucket(t, "mem://")
	faulty := storage.NewFaulty(b)
	c, err := commit.NewCommitter(commit.Config{}, faulty, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tb := ops.NewTable(faulty, c, nil, nil)
	if _, err := tb.Create(context.Background(), testSchema(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := memwal.Configure(context.Background(), tb, shards, nil); err != nil {
		t.Fatal(err)
	}
	return b, tb, faulty
}

// Dropping a shard races a writer of it: the configure checks the shard
// is drained, and before its commit lands the writer appends. The check
// runs after a seal, so the writer's append is fenced (never acknowledged)
// and no writer can claim the shard; the drop then commits. Before the
// seal both succeeded and the acknowledged record was lost.
func TestConfigureDropRacesAWriter(t *testing.T) {
	ctx := context.Background()
	b, tb, faulty := configureTable(t, "s0", "s1")
	w := newWriter(t, b, "s1")
	claim(t, w)

	gate := make(chan struct{})
	rule := faulty.Add(storage.Fault{Ops: []storage.Op{storage.OpPutIfAbsent}, KeyPrefix: table.VersionsDir, Action: storage.Block(gate)})
	done := make(chan error, 1)
	go func() {
		_, err := memwal.Configure(ctx, tb, []string{"s0"}, nil)
		done <- err
	}()
	waitFor(t, "configure parked at its commit", func() bool { return rule.Matched() > 0 })
	_, err := w.Append(ctx, []memwal.Record{up(1, "acked?")})
	if !errors.Is(err, memwal.ErrFenced) {
		t.Fatalf("the writer's append during the drop: got %v, want fenced", err)
	}
	if _, err := newWriter(t, b, "s1").Claim(ctx); !errors.Is(err, memwal.ErrSealed) {
		t.Fatalf("a claim during the drop: got %v, want sealed", err)
	}
	faulty.Remove(rule)
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	head, err := table.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if got := table.MemWal(head).Shards; !slices.Equal(got, []string{"s0"}) {
		t.Fatalf("shards %v", got)
	}
}

// A drop that fails after sealing (its commit conflicts with another
// configure, which kept the shard and committed first) leaves the shard
// unsealed, and a configure listing a shard left sealed unseals it.
func TestConfigureUnseals(t *testing.T) {
	ctx := context.Background()
	b, tb, faulty := configureTable(t, "s0", "s1")
	gate := make(chan struct{})
	rule := faulty.Add(storage.Fault{Ops: []storage.Op{storage.OpPutIfAbsent}, KeyPrefix: table.VersionsDir, Action: storage.Block(gate)})
	done := make(chan error, 1)
	go func() {
		_, err := memwal.Configure(ctx, tb, []string{"s0"}, nil)
		done <- err
	}()
	waitFor(t, "the drop parked at its commit", func() bool { return rule.Matched() > 0 })
	c, err := commit.NewCommitter(commit.Config{}, b, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := memwal.Configure(ctx, ops.NewTable(b, c, nil, nil), []string{"s0", "s1", "s2"}, nil); err != nil {
		t.Fatal(err)
	}
	faulty.Remove(rule)
	close(gate)
	if err := <-done; !errors.Is(err, commit.ErrRetryable) {
		t.Fatalf("the drop: got %v, want a retryable conflict", err)
	}
	if sm := latest(t, b, "s1"); sm.Status != pb.ShardStatus_SHARD_STATUS_ACTIVE {
		t.Fatalf("after a failed drop: status %v", sm.Status)
	}
	claim(t, newWriter(t, b, "s1"))

	// A seal left behind (a configure that crashed before unsealing).
	sealed := proto.Clone(latest(t, b, "s1")).(*pb.ShardManifest)
	sealed.Version++
	sealed.WriterEpoch++
	sealed.Status = pb.ShardStatus_SHARD_STATUS_SEALED
	data, _ := table.EncodeProto(sealed)
	if err := b.PutIfAbsent(ctx, memwal.ShardManifestKey("s1", sealed.Version), data); err != nil {
		t.Fatal(err)
	}
	if _, err := newWriter(t, b, "s1").Claim(ctx); !errors.Is(err, memwal.ErrSealed) {
		t.Fatalf("claim of a sealed shard: %v", err)
	}
	if _, err := memwal.Configure(ctx, tb, []string{"s0", "s1"}, nil); err != nil {
		t.Fatal(err)
	}
	claim(t, newWriter(t, b, "s1"))
}
