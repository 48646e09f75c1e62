package commit

import "github.com/compactord/compactord/internal/commit"

// SharedMetrics counts the Lance commit loop into the private commit loop's
// series (same names and labels): a process that maintains tables of both
// formats registers commit.NewMetrics once and hands its metrics to both
// loops. The operations the Lance loop commits get their series
// pre-created, as NewMetrics does.
func SharedMetrics(m *commit.Metrics) *Metrics {
	v := m.Vecs()
	out := &Metrics{attempts: v.Attempts, conflicts: v.Conflicts, rebases: v.Rebases, ambiguous: v.Ambiguous, commits: v.Commits}
	for _, o := range []string{"append", "delete", "create_index", "rewrite", "update", "reserve_fragments"} {
		out.attempts.WithLabelValues(o)
		out.rebases.WithLabelValues(o)
		for _, r := range results {
			out.commits.WithLabelValues(o, r)
		}
	}
	return out
}
