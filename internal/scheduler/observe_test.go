package scheduler_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/scheduler"
	"github.com/compactord/compactord/internal/table"
)

func memWalManifest(compacted map[string]uint64, catchup map[string]map[string]uint64, maintained ...string) *pb.Manifest {
	d := &pb.MemWalIndexDetails{Shards: []string{"s0", "s1"}, MaintainedIndexes: maintained,
		CompactedSstables: compacted, IndexCatchup: map[string]*pb.ShardGenerations{}}
	for n, g := range catchup {
		d.IndexCatchup[n] = &pb.ShardGenerations{Generations: g}
	}
	return &pb.Manifest{Version: 9, Fragments: []*pb.Fragment{{Id: 1, PhysicalRows: 10, DataFile: &pb.DataFile{SizeBytes: 100},
		DeletionFile: &pb.DeletionFile{NumDeleted: 3}}},
		Indices: []*pb.IndexMetadata{
			{Name: "idx", Type: "btree", DatasetVersion: 4},
			{Name: "idx", Type: "btree", DatasetVersion: 7},
			{Name: table.MemWalIndexName, Type: "__mem_wal", Details: &pb.IndexMetadata_MemWal{MemWal: d}},
		}}
}

func shard(id string, current, trimmed uint64, gens ...uint64) *pb.ShardManifest {
	sm := &pb.ShardManifest{ShardId: id, Version: 3, CurrentGeneration: current, TrimmedThroughGeneration: trimmed}
	for _, g := range gens {
		sm.Sstables = append(sm.Sstables, &pb.SSTable{Generation: g, Bytes: 10 * g})
	}
	return sm
}

// The LSM-debt numbers per shard: what is flushed, merged, caught up and
// trimmed, and why each stored SSTable is kept.
func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		name   string
		m      *pb.Manifest
		shards map[string]*pb.ShardManifest
		want   string // JSON of Shards
	}{{
		name: "absent catch-up entry means not caught up",
		m:    memWalManifest(map[string]uint64{"s0": 3}, nil, "idx"),
		shards: map[string]*pb.ShardManifest{
			"s0": shard("s0", 6, 1, 2, 3, 4, 5),
		},
		want: `[{"id":"s0","claimed":true,"writer_epoch":0,"manifest_version":3,"flushed":5,"merged":3,"caught_up":0,"trimmed":1,"pending_generations":2,"sstables":4,"sstable_bytes":140,"retained_bytes":{"index_lag":50,"not_merged":90,"version_retention":0},"catchup_lag":{"idx":3},"catchup":{},"replay_after_wal_position":0},` +
			`{"id":"s1","claimed":false,"writer_epoch":0,"manifest_version":0,"flushed":0,"merged":0,"caught_up":0,"trimmed":0,"pending_generations":0,"sstables":0,"sstable_bytes":0,"retained_bytes":{"index_lag":0,"not_merged":0,"version_retention":0},"catchup_lag":{"idx":0},"catchup":{},"replay_after_wal_position":0}]`,
	}, {
		name: "caught up to 2 of 3 merged; shards independent",
		m:    memWalManifest(map[string]uint64{"s0": 3, "s1": 8}, map[string]map[string]uint64{"idx": {"s0": 2, "s1": 8}}, "idx"),
		shards: map[string]*pb.ShardManifest{
			"s0": shard("s0", 4, 0, 1, 2, 3),
			"s1": shard("s1", 9, 7, 8),
		},
		want: `[{"id":"s0","claimed":true,"writer_epoch":0,"manifest_version":3,"flushed":3,"merged":3,"caught_up":2,"trimmed":0,"pending_generations":0,"sstables":3,"sstable_bytes":60,"retained_bytes":{"index_lag":30,"not_merged":0,"version_retention":30},"catchup_lag":{"idx":1},"catchup":{"idx":2},"replay_after_wal_position":0},` +
			`{"id":"s1","claimed":true,"writer_epoch":0,"manifest_version":3,"flushed":8,"merged":8,"caught_up":8,"trimmed":7,"pending_generations":0,"sstables":1,"sstable_bytes":80,"retained_bytes":{"index_lag":0,"not_merged":0,"version_retention":80},"catchup_lag":{"idx":0},"catchup":{"idx":8},"replay_after_wal_position":0}]`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			s := scheduler.Summarize(tc.m, tc.shards)
			got, _ := json.Marshal(s.Shards)
			if string(got) != tc.want {
				t.Fatalf("shards\n got %s\nwant %s", got, tc.want)
			}
			if s.Fragments != 1 || s.DeletedRows != 3 || len(s.Indices) != 1 || s.Indices[0].Segments != 2 ||
				s.Indices[0].OldestDatasetVersion != 4 || !s.Indices[0].Maintained {
				t.Fatalf("table summary %+v", s)
			}
		})
	}
	if s := scheduler.Summarize(&pb.Manifest{Version: 1}, nil); s.MemWal || len(s.Shards) != 0 {
		t.Fatalf("no MemWAL: %+v", s)
	}
}

// A shard publishing an SSTable the base table has not merged triggers a
// merge (trigger "change") at the next poll, without waiting for the
// merge schedule; the debt gauges follow.
func TestChangePollingTriggersMerge(t *testing.T) {
	ctx := context.Background()
	url := memRoot(t) + "/t"
	tb := createTable(t, url)
	if _, err := memwal.Configure(ctx, tb, []string{"s0"}, nil); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.PollInterval = time.Second
	h := start(t, harnessOpts{cfg: cfg, kinds: []scheduler.Kind{scheduler.KindMerge}}, scheduler.TableSpec{Name: "t", URL: url})
	h.waitSynced("t")
	w := claimShard(t, tb, "s0")
	// A claim alone publishes no SSTable: no merge.
	h.idle(2)
	h.clk.Advance(time.Second)
	h.idle(2)
	if n := h.jobs.count("t", scheduler.KindMerge); n != 0 {
		t.Fatalf("%d merges without new SSTables", n)
	}
	flushRow(t, w)
	for i := 0; i < 10 && !within(func() bool { return h.jobs.count("t", scheduler.KindMerge) > 0 }); i++ {
		h.clk.Advance(time.Second)
	}
	calls := h.jobs.snapshot()
	if len(calls) == 0 || calls[0].trigger != scheduler.TriggerChange {
		t.Fatalf("calls %+v, want a merge triggered by the change", calls)
	}
	if got := h.metric("compactord_mem_wal_pending_generations", "table", "t", "shard", "s0"); got != 1 {
		t.Fatalf("pending generations = %v", got)
	}
	if got := h.metric("compactord_sstable_retained_bytes", "table", "t", "shard", "s0", "reason", "not_merged"); got == 0 {
		t.Fatal("retained not_merged bytes = 0")
	}
}
