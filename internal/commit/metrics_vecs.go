package commit

import "github.com/prometheus/client_golang/prometheus"

// CounterVecs are the commit loop's counters. The Lance commit loop
// (internal/lance/commit.SharedMetrics) counts into them, so that a process
// maintaining tables of both formats registers one set of commit metrics.
type CounterVecs struct {
	Attempts, Conflicts, Rebases, Ambiguous, Commits *prometheus.CounterVec
}

// Vecs returns m's counters.
func (m *Metrics) Vecs() CounterVecs {
	return CounterVecs{Attempts: m.attempts, Conflicts: m.conflicts, Rebases: m.rebases, Ambiguous: m.ambiguous, Commits: m.commits}
}
