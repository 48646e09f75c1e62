package daemon

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/compactord/compactord/internal/cleanup"
	"github.com/compactord/compactord/internal/compact"
	"github.com/compactord/compactord/internal/indexjob"
	"github.com/compactord/compactord/internal/merge"
	"github.com/compactord/compactord/internal/scheduler"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/trim"
)

// This file is the one place where the real jobs are wired to the
// scheduler. Each JobFunc reads its settings through cfg() at the start of
// every attempt, so that a reload (SIGHUP) applies to the next attempt.
// An attempt that finds no work reports NothingToDo (result "skipped").
// Errors are returned as the jobs produce them; scheduler.Classify turns
// commit.ErrRetryable, commit.ErrIncompatible and table.ErrCorrupt into
// retry, skipped and quarantine.
func jobSet(cfg func() JobsConfig, reg prometheus.Registerer) map[scheduler.Kind]scheduler.JobFunc {
	compactMetrics := compact.NewMetrics(reg)
	// Lance tables (TableHandle.Lance set) run the jobs of lance_jobs.go.
	return map[scheduler.Kind]scheduler.JobFunc{
		scheduler.KindMerge:   orLance(lanceMergeJob(cfg), mergeJob(cfg)),
		scheduler.KindCompact: orLance(lanceCompactJob(cfg), compactJob(cfg, compactMetrics)),
		scheduler.KindIndex:   orLance(lanceIndexJob(cfg), indexJob(cfg)),
		scheduler.KindTrim:    orLance(lanceTrimJob(cfg), trimJob(cfg)),
		scheduler.KindCleanup: orLance(lanceCleanupJob(cfg), cleanupJob(cfg)),
	}
}

func mergeJob(cfg func() JobsConfig) scheduler.JobFunc {
	return func(ctx context.Context, t *scheduler.TableHandle) (scheduler.Outcome, error) {
		head, err := table.ReadLatest(ctx, t.Bucket)
		if err != nil {
			return scheduler.Outcome{}, err
		}
		if table.MemWal(head) == nil {
			return scheduler.Outcome{Summary: "no MemWAL configured", NothingToDo: true}, nil
		}
		mc := cfg().Merge
		mc.Logger = t.Logger
		mg, err := merge.New(mc, t.Table)
		if err != nil {
			return scheduler.Outcome{}, err
		}
		results, err := mg.Run(ctx, "")
		var out scheduler.Outcome
		var gens, rows, skipped uint64
		for _, r := range results {
			if r.Skipped {
				skipped++
				continue
			}
			gens += r.Through - r.From + 1
			rows += r.Inserted + r.Updated + r.Deleted
			out.Stats.FragmentsOut += uint64(r.NewFragments)
			out.Version = max(out.Version, r.Version)
		}
		out.Stats.SSTablesMerged = gens
		switch {
		case gens > 0:
			out.Summary = fmt.Sprintf("merged %d generations (%d rows changed)", gens, rows)
		case skipped > 0:
			out.Summary = fmt.Sprintf("nothing merged; %d shards skipped or blocked", skipped)
		default:
			out.Summary = "nothing to merge"
			out.NothingToDo = err == nil
		}
		return out, err
	}
}

func compactJob(cfg func() JobsConfig, m *compact.Metrics) scheduler.JobFunc {
	return func(ctx context.Context, t *scheduler.TableHandle) (scheduler.Outcome, error) {
		c, err := compact.New(cfg().Compact, t.Table, t.Logger, m)
		if err != nil {
			return scheduler.Outcome{}, err
		}
		o, err := c.Run(ctx, nil)
		if err != nil {
			return scheduler.Outcome{}, err
		}
		if o.Result == nil {
			return scheduler.Outcome{Summary: "nothing to compact", NothingToDo: true}, nil
		}
		return scheduler.Outcome{
			Version: o.Result.Manifest.Version,
			Summary: fmt.Sprintf("%d groups: %d fragments into %d", o.Stats.Groups, o.Stats.FragmentsIn, o.Stats.FragmentsOut),
			Stats:   scheduler.Stats{FragmentsIn: uint64(o.Stats.FragmentsIn), FragmentsOut: uint64(o.Stats.FragmentsOut)},
		}, nil
	}
}

func indexJob(cfg func() JobsConfig) scheduler.JobFunc {
	return func(ctx context.Context, t *scheduler.TableHandle) (scheduler.Outcome, error) {
		j, err := indexjob.New(cfg().Index, t.Table, t.Logger)
		if err != nil {
			return scheduler.Outcome{}, err
		}
		o, err := j.Run(ctx)
		if err != nil {
			return scheduler.Outcome{}, err
		}
		var out scheduler.Outcome
		var parts []string
		note := func(name string, s *indexjob.Step, what string) {
			if s == nil || !s.Committed {
				return
			}
			out.Version = max(out.Version, s.Version)
			parts = append(parts, name+": "+what)
		}
		if s := o.CatchUp; s != nil {
			note("catch-up", s, fmt.Sprintf("%d segments", s.Segments))
		}
		if s := o.Remap; s != nil {
			note("remap", s, fmt.Sprintf("%d segments", s.Segments))
		}
		if s := o.Trim; s != nil {
			note("FRI trim", s, fmt.Sprintf("dropped %d versions, kept %d", s.Dropped, s.Kept))
		}
		out.Summary = "indices up to date"
		out.NothingToDo = len(parts) == 0
		if len(parts) > 0 {
			out.Summary = joinParts(parts)
		}
		return out, nil
	}
}

func trimJob(cfg func() JobsConfig) scheduler.JobFunc {
	return func(ctx context.Context, t *scheduler.TableHandle) (scheduler.Outcome, error) {
		tc := cfg().Trim
		tc.Now = t.Now
		res, err := trim.Run(ctx, t.Bucket, tc)
		if res == nil {
			return scheduler.Outcome{}, err
		}
		return scheduler.Outcome{
			Summary: fmt.Sprintf("retired %d SSTables (%d bytes), deleted %d WAL entries and %d shard manifests",
				res.RetiredSSTables, res.BytesTrimmed, res.WALDeleted, res.ManifestsPruned),
			Stats:       scheduler.Stats{BytesTrimmed: res.BytesTrimmed},
			Waiting:     res.Waiting(),
			NothingToDo: res.RetiredSSTables == 0 && res.WALDeleted == 0 && res.ManifestsPruned == 0 && res.BytesTrimmed == 0,
		}, err
	}
}

func cleanupJob(cfg func() JobsConfig) scheduler.JobFunc {
	return func(ctx context.Context, t *scheduler.TableHandle) (scheduler.Outcome, error) {
		res, err := cleanup.Run(ctx, t.Bucket, cfg().Cleanup, t.Now())
		if err != nil {
			return scheduler.Outcome{}, err
		}
		return scheduler.Outcome{
			Summary: fmt.Sprintf("deleted %d versions and %d files (%d bytes); kept %d versions",
				res.DeletedVersion, res.DeletedFiles, res.BytesReclaimed, len(res.Plan.KeptVersions)),
			NothingToDo: res.DeletedVersion == 0 && res.DeletedFiles == 0,
		}, nil
	}
}

func joinParts(p []string) string {
	s := p[0]
	for _, x := range p[1:] {
		s += "; " + x
	}
	return s
}
