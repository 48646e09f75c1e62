// Package merge lands flushed MemWAL generations in the base table of a
// Lance dataset, per shard, in generation order.
//
// Plan is pure: the read version's manifest file and each shard's newest
// manifest in, the jobs out, sorted by shard. A job names a run of
// consecutive flushed generations above the shard's compacted position; it
// never reaches past a generation that is not flushed (not in the shard
// manifest's sstables) and never skips one.
package merge

import (
	"fmt"
	"sort"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/meta"
)

// Env bounds the plan.
type Env struct {
	// MaxGenerations caps the generations one job merges (and so the
	// memory and the size of one commit). At least 1.
	MaxGenerations int
	// Shard plans only this shard ("" for every shard).
	Shard string
}

// Job merges Generations (ascending, consecutive, all flushed) of one shard
// into the base table as of ReadVersion.
type Job struct {
	Shard       string
	ReadVersion uint64
	// Compacted is the shard's position at the read version; the job
	// records Generations[len-1].Generation.
	Compacted   uint64
	Generations []*pb.SsTable
}

// Through is the generation the job's commit records as compacted.
func (j Job) Through() uint64 { return j.Generations[len(j.Generations)-1].GetGeneration() }

// Skip says why a shard with pending generations gets no job.
type Skip struct {
	Shard  string
	Reason string
}

// Plan returns one job per shard with flushed generations above its
// compacted position, and the shards it had to skip.
func Plan(read *meta.ManifestFile, shards []*memwal.ShardState, env Env) ([]Job, []Skip, error) {
	if env.MaxGenerations < 1 {
		return nil, nil, fmt.Errorf("merge: max generations must be at least 1, got %d", env.MaxGenerations)
	}
	ix := memwal.Index(read.Indices)
	if ix == nil {
		return nil, nil, nil
	}
	d, err := memwal.Details(ix)
	if err != nil {
		return nil, nil, err
	}
	compacted := memwal.Compacted(d)
	var jobs []Job
	var skips []Skip
	for _, st := range shards {
		if env.Shard != "" && st.ID != env.Shard {
			continue
		}
		if st.Manifest == nil {
			skips = append(skips, Skip{st.ID, "the shard has no manifest yet"})
			continue
		}
		if got := meta.UUIDString(st.Manifest.GetShardId()); got != st.ID {
			return nil, nil, fmt.Errorf("merge: shard directory %s holds a manifest of shard %s", st.ID, got)
		}
		done := compacted[st.ID]
		var pending []*pb.SsTable
		for _, s := range st.Manifest.GetSstables() {
			if s.GetGeneration() > done {
				pending = append(pending, s)
			}
		}
		if len(pending) == 0 {
			continue
		}
		sort.Slice(pending, func(i, j int) bool { return pending[i].GetGeneration() < pending[j].GetGeneration() })
		// INVARIANT: generations land in order, none skipped. A gap means
		// the manifest lost a flushed generation (or a writer flushed out
		// of order); merging past it would land newer rows under older.
		if pending[0].GetGeneration() != done+1 {
			skips = append(skips, Skip{st.ID, fmt.Sprintf("generation %d is next but the shard manifest lists %d first", done+1, pending[0].GetGeneration())})
			continue
		}
		run := pending[:1]
		for _, s := range pending[1:] {
			if len(run) == env.MaxGenerations || s.GetGeneration() != run[len(run)-1].GetGeneration()+1 {
				break
			}
			run = append(run, s)
		}
		// A generation at or above current_generation is not flushed yet,
		// whatever the list says.
		for len(run) > 0 && run[len(run)-1].GetGeneration() >= st.Manifest.GetCurrentGeneration() {
			run = run[:len(run)-1]
		}
		if len(run) == 0 {
			skips = append(skips, Skip{st.ID, fmt.Sprintf("generation %d is not flushed (current generation %d)", done+1, st.Manifest.GetCurrentGeneration())})
			continue
		}
		jobs = append(jobs, Job{Shard: st.ID, ReadVersion: read.Manifest.GetVersion(), Compacted: done, Generations: run})
	}
	sort.Slice(jobs, func(i, j int) bool { return jobs[i].Shard < jobs[j].Shard })
	sort.Slice(skips, func(i, j int) bool { return skips[i].Shard < skips[j].Shard })
	return jobs, skips, nil
}
