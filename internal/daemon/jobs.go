package daemon

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/compactord/compactord/internal/compact"
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
func jobSet(cfg func() JobsConfig, reg prometheus.Registerer) map[scheduler.Kind]scheduler.JobFunc {
	cm := newCompactMetrics(reg)
	return map[scheduler.Kind]scheduler.JobFunc{
		scheduler.KindMerge:   lanceJob(lanceMergeJob(cfg)),
		scheduler.KindCompact: lanceJob(lanceCompactJob(cfg, cm)),
		scheduler.KindIndex:   lanceJob(lanceIndexJob(cfg)),
		scheduler.KindTrim:    lanceJob(lanceTrimJob(cfg)),
		scheduler.KindCleanup: lanceJob(lanceCleanupJob(cfg)),
	}
}

// compactMetrics count the work of committed compactions
// (compactord_compact_*).
type compactMetrics struct {
	bytesRead, bytesWritten, fragmentsIn, fragmentsOut, fragmentsCopied, rowsRewritten prometheus.Counter
}

func newCompactMetrics(reg prometheus.Registerer) *compactMetrics {
	f := promauto.With(reg)
	c := func(name, help string) prometheus.Counter {
		return f.NewCounter(prometheus.CounterOpts{Name: "compactord_compact_" + name + "_total", Help: help})
	}
	return &compactMetrics{
		bytesRead:       c("bytes_read", "Data-file bytes read by committed compactions."),
		bytesWritten:    c("bytes_written", "Data-file bytes written by committed compactions."),
		fragmentsIn:     c("fragments_in", "Fragments rewritten away by committed compactions."),
		fragmentsOut:    c("fragments_out", "Fragments written by committed compactions."),
		fragmentsCopied: c("fragments_copied", "Input fragments whose rows were copied without dropping any (no deletions)."),
		rowsRewritten:   c("rows_rewritten", "Rows re-encoded to drop deleted rows."),
	}
}

func (m *compactMetrics) add(s compact.Stats) {
	if m == nil {
		return
	}
	m.bytesRead.Add(float64(s.BytesRead))
	m.bytesWritten.Add(float64(s.BytesWritten))
	m.fragmentsIn.Add(float64(s.FragmentsIn))
	m.fragmentsOut.Add(float64(s.FragmentsOut))
	m.fragmentsCopied.Add(float64(s.FragmentsCopied))
	m.rowsRewritten.Add(float64(s.RowsRewritten))
}
