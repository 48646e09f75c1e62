package merge

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/progress"
	"github.com/compactord/compactord/internal/table"
)

// Outcome is what RunAll did.
type Outcome struct {
	// Landed are the merges that committed, in commit order; a shard with
	// more pending generations than Env.MaxGenerations lands several.
	Landed []*Result
	// Skipped are the shards left alone, once each: those the planner
	// skipped (a gap, nothing flushed) and those whose merge lost to
	// another merger (reason "lost to another merger: ...").
	Skipped []Skip
}

// Planned is a plan against the latest version.
type Planned struct {
	Read   *meta.ManifestFile
	Naming meta.Naming
	Jobs   []Job
	Skips  []Skip
}

// PlanLatest reads the latest version and every shard's newest manifest
// (env.Shard's alone when set; a shard with no directory under _mem_wal/
// is an error) and plans against them. Shards in exclude are not read.
func PlanLatest(ctx context.Context, h *table.Handle, env Env, exclude map[string]bool) (*Planned, error) {
	read, naming, err := h.ReadForWrite(ctx)
	if err != nil {
		return nil, err
	}
	ids, err := memwal.ListShards(ctx, h.Bucket)
	if err != nil {
		return nil, err
	}
	if env.Shard != "" {
		if !slices.Contains(ids, env.Shard) {
			return nil, fmt.Errorf("merge: no shard %s under %s", env.Shard, meta.MemWalDir)
		}
		ids = []string{env.Shard}
	}
	var shards []*memwal.ShardState
	for _, id := range ids {
		if exclude[id] {
			continue
		}
		st, err := memwal.ReadShard(ctx, h.Bucket, id)
		if err != nil {
			return nil, err
		}
		shards = append(shards, st)
	}
	jobs, skips, err := Plan(read, shards, env)
	if err != nil {
		return nil, err
	}
	return &Planned{Read: read, Naming: naming, Jobs: jobs, Skips: skips}, nil
}

// cleanedReplans bounds RunAll's re-plans after a cleanup removed the
// version a job read (table.ErrReadCleanedUp).
const cleanedReplans = 3

// RunAll plans against the latest version and runs one job at a time,
// replanning after every commit (a commit changes the read version every
// other job was planned at), until no shard has a flushed generation left
// above its compacted position. A job that loses to another merger
// (commit.ErrIncompatible) is recorded as skipped and its shard is not
// planned again in this run: the other merger's commit moved it, and a
// lost merge is never retried. A job whose read version a cleanup removed
// meanwhile plans again (up to cleanedReplans times). Any other error stops
// the run; what landed before it stays landed and is in the outcome.
func RunAll(ctx context.Context, h *table.Handle, env Env) (*Outcome, error) {
	out := &Outcome{Landed: []*Result{}, Skipped: []Skip{}}
	// One phase for the run; every job adds its generations' rows to the
	// total as it starts (the later jobs are not planned yet).
	progress.From(ctx).Start("merge", progress.Units{})
	skipped := map[string]bool{}
	skip := func(s Skip) {
		if !skipped[s.Shard] {
			skipped[s.Shard] = true
			out.Skipped = append(out.Skipped, s)
		}
	}
	cleaned := 0 // re-plans after a cleanup removed the version read
	for {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		p, err := PlanLatest(ctx, h, env, skipped)
		if err != nil {
			return out, err
		}
		for _, s := range p.Skips {
			skip(s)
		}
		if len(p.Jobs) == 0 {
			return out, nil
		}
		job := p.Jobs[0]
		res, err := Execute(ctx, h, p.Read, p.Naming, job)
		if errors.Is(err, commit.ErrIncompatible) {
			skip(Skip{Shard: job.Shard, Reason: fmt.Sprintf("lost to another merger: %v", err)})
			continue
		}
		if errors.Is(err, table.ErrReadCleanedUp) && cleaned < cleanedReplans {
			cleaned++
			continue
		}
		if err != nil {
			return out, fmt.Errorf("merge shard %s generations %d..%d: %w", job.Shard, job.Generations[0].GetGeneration(), job.Through(), err)
		}
		out.Landed = append(out.Landed, res)
	}
}
