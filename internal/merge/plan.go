// Package merge is the merge job: it lands a shard's flushed
// SSTables in the base table, in ascending generation order, by
// merge-insert on the primary key, and commits one MergeSSTables that
// moves compacted_sstables[shard] in the same version as the rows.
//
// Plan is a pure function of the base manifest and the shard manifests;
// Execute writes files that stay invisible until its commit; the commit
// uses the plan's read version, never the head (Lance #6653), so a
// concurrent delete is rebased, not hidden.
//
// REQUIRES: shards partition the key space (a key is written through one
// shard). Merges of different shards commit concurrently by rebasing their
// deletions; two shards upserting one key could both insert it.
package merge

import (
	"fmt"
	"slices"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/table"
)

// Env is the environment of a plan.
type Env struct {
	// Shard limits the plan to one shard; "" plans every shard.
	Shard string
	// MaxGenerations bounds the generations one job merges (and so the
	// memory it needs); 0 means no bound.
	MaxGenerations int
}

// Job merges generations From..Through of one shard into the base table as
// it was at ReadVersion.
type Job struct {
	Shard         string
	ReadVersion   uint64
	From, Through uint64
	// SSTables are the generations From..Through, ascending.
	SSTables []*pb.SSTable
}

// Blocked is a shard with flushed generations that cannot be merged.
type Blocked struct {
	Shard  string
	Reason string
}

// Plan returns, per shard in name order, the job merging the flushed
// generations above compacted_sstables[shard], ascending and contiguous.
// A shard whose next generation is missing from its shard manifest is
// Blocked: merging a later one would skip rows, and positions only move
// forward, so the skipped rows could never land.
func Plan(base *pb.Manifest, shards map[string]*pb.ShardManifest, env Env) ([]Job, []Blocked) {
	d := table.MemWal(base)
	if d == nil {
		return nil, nil
	}
	names := slices.Clone(d.Shards)
	slices.Sort(names)
	var jobs []Job
	var blocked []Blocked
	for _, s := range names {
		if env.Shard != "" && s != env.Shard {
			continue
		}
		sm := shards[s]
		if sm == nil {
			continue // never claimed: nothing flushed
		}
		compacted := d.CompactedSstables[s]
		var pending []*pb.SSTable
		for _, sst := range sm.Sstables {
			if sst.Generation > compacted {
				pending = append(pending, sst)
			}
		}
		if len(pending) == 0 {
			continue
		}
		slices.SortStableFunc(pending, func(a, b *pb.SSTable) int {
			switch {
			case a.Generation < b.Generation:
				return -1
			case a.Generation > b.Generation:
				return 1
			}
			return 0
		})
		job := Job{Shard: s, ReadVersion: base.Version, From: compacted + 1}
		next := compacted + 1
		for _, sst := range pending {
			if sst.Generation != next {
				break
			}
			if env.MaxGenerations > 0 && len(job.SSTables) == env.MaxGenerations {
				break
			}
			job.SSTables = append(job.SSTables, sst)
			next++
		}
		if len(job.SSTables) == 0 {
			blocked = append(blocked, Blocked{Shard: s, Reason: fmt.Sprintf(
				"generation %d is not in the shard manifest (compacted through %d, lowest flushed above it is %d)",
				compacted+1, compacted, pending[0].Generation)})
			continue
		}
		job.Through = next - 1
		jobs = append(jobs, job)
	}
	return jobs, blocked
}
