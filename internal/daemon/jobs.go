package daemon

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/compactord/compactord/internal/scheduler"
)

// This file is the one place where the real jobs are wired to the
// scheduler; the jobs are lance_jobs.go's. Each JobFunc reads its settings
// through cfg() at the start of every attempt, so that a reload (SIGHUP)
// applies to the next attempt. An attempt that finds no work reports
// NothingToDo (result "skipped"). Errors are returned as the jobs produce
// them; scheduler.Classify turns the commit loop's ErrRetryable and
// ErrIncompatible into retry and skipped, lanceErr corrupt metadata into
// quarantine.
func jobSet(cfg func() JobsConfig, _ prometheus.Registerer) map[scheduler.Kind]scheduler.JobFunc {
	return map[scheduler.Kind]scheduler.JobFunc{
		scheduler.KindMerge:   lanceJob(lanceMergeJob(cfg)),
		scheduler.KindCompact: lanceJob(lanceCompactJob(cfg)),
		scheduler.KindIndex:   lanceJob(lanceIndexJob(cfg)),
		scheduler.KindTrim:    lanceJob(lanceTrimJob(cfg)),
		scheduler.KindCleanup: lanceJob(lanceCleanupJob(cfg)),
	}
}
