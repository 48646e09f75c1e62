// Package benchsuite is the harness behind `make bench` (issue #9): it
// generates reproducible data sets, runs compactord's jobs as subprocesses
// next to their I/O ceiling (cp of the same bytes, fsynced) and their peer
// (DuckDB rewriting the same Parquet files), interleaved trial by trial,
// measures commit latency against a bare put-if-absent and the idle
// daemon's footprint, and writes the figures into docs/benchmarks.md.
//
// The machine it runs on is shared, so every comparison is a ratio taken
// within one trial whose runs were interleaved (A, B, A, B, ...), and the
// reported figure is the median of the per-trial ratios.
package benchsuite

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Sections are the parts of the suite, in the order they run.
var Sections = []string{"compact", "rss", "merge", "commit", "idle"}

// Config is one run of the suite.
type Config struct {
	// Work holds the generated data sets (kept between runs, keyed by
	// their parameters) and the scratch copies of each trial.
	Work string
	// Compactord is the binary under test; Self is this program (it
	// generates data in child processes so that its own memory stays
	// small: a child's getrusage peak starts from its parent's).
	Compactord string
	Self       string
	// Baseline, when set, is an older compactord binary run next to
	// Compactord in the compaction and merge trials (interleaved, same
	// data), for before/after figures of a change.
	Baseline string
	// Node runs the DuckDB peer from BenchDir (bench/, with node_modules).
	Node     string
	BenchDir string
	// VersityGW, when set, adds an S3 backend (versitygw on loopback) to
	// the commit benchmark.
	VersityGW string

	// Threads is DuckDB's `threads` and compactord's --parallelism (and
	// GOMAXPROCS) alike.
	Threads int
	// Trials is how many interleaved trials each comparison takes.
	Trials int

	// CompactRows rows (about 34 bytes each: 31 457 280 is 1 GiB) in
	// CompactFragments fragments; RSSFragments is the many-fragment
	// variant of the same rows for the peak-RSS check.
	CompactRows      int
	CompactFragments int
	RSSFragments     int
	// RSSMergeUpserts upserts are merged into the compaction table (of
	// CompactFragments fragments) for the merge job's peak RSS; 0 skips
	// it.
	RSSMergeUpserts int

	// MergeBase rows in fragments of MergeFragmentRows, MergeUpserts
	// upserts of existing keys.
	MergeBase         int
	MergeFragmentRows int
	MergeUpserts      int

	// CommitSamples latencies of each kind; CommitWindow per committer
	// count of the throughput run.
	CommitSamples int
	CommitWindow  time.Duration

	// IdleTables tables watched by the idle daemon; IdleSettle before
	// sampling its RSS for IdleWindow.
	IdleTables int
	IdleSettle time.Duration
	IdleWindow time.Duration

	// Only restricts the run to these sections (nil: all).
	Only []string
	// Out is the Markdown file whose generated block is replaced.
	Out string
}

// DefaultConfig is `make bench` without overrides: about 1 GiB of
// compaction input, a 10 M-row merge with 1 M upserts, 100 idle tables.
func DefaultConfig() Config {
	return Config{
		Threads:           2,
		Trials:            3,
		CompactRows:       31_457_280,
		CompactFragments:  32,
		RSSFragments:      512,
		RSSMergeUpserts:   4 << 20,
		MergeBase:         10_000_000,
		MergeFragmentRows: 1_000_000,
		MergeUpserts:      1_000_000,
		CommitSamples:     500,
		CommitWindow:      3 * time.Second,
		IdleTables:        100,
		IdleSettle:        20 * time.Second,
		IdleWindow:        20 * time.Second,
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	var errs []string
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Sprintf(format, args...))
		}
	}
	check(c.Work != "", "work directory is required")
	check(c.Compactord != "" && c.Self != "", "compactord and benchsuite binaries are required")
	check(c.Threads >= 1, "threads must be at least 1, got %d", c.Threads)
	check(c.Trials >= 1, "trials must be at least 1, got %d", c.Trials)
	check(c.CompactFragments >= 1 && c.CompactRows >= c.CompactFragments && c.CompactRows%c.CompactFragments == 0,
		"compaction rows (%d) must be a positive multiple of its fragments (%d)", c.CompactRows, c.CompactFragments)
	check(c.RSSFragments >= 1 && c.CompactRows%c.RSSFragments == 0,
		"compaction rows (%d) must be a multiple of the many-fragment count (%d)", c.CompactRows, c.RSSFragments)
	check(c.RSSMergeUpserts >= 0 && c.RSSMergeUpserts <= c.CompactRows, "rss merge upserts must be in [0, compaction rows], got %d", c.RSSMergeUpserts)
	check(c.MergeFragmentRows >= 1 && c.MergeBase >= c.MergeFragmentRows && c.MergeBase%c.MergeFragmentRows == 0,
		"merge base rows (%d) must be a positive multiple of its fragment rows (%d)", c.MergeBase, c.MergeFragmentRows)
	check(c.MergeUpserts >= 1 && c.MergeUpserts <= c.MergeBase, "merge upserts must be in [1, base rows], got %d", c.MergeUpserts)
	check(c.CommitSamples >= 10, "commit samples must be at least 10, got %d", c.CommitSamples)
	check(c.CommitWindow > 0, "commit window must be positive")
	check(c.IdleTables >= 1, "idle tables must be at least 1, got %d", c.IdleTables)
	check(c.IdleWindow >= time.Second, "idle window must be at least 1s")
	for _, s := range c.Only {
		check(slices.Contains(Sections, s), "unknown section %q (sections: %s)", s, strings.Join(Sections, ", "))
	}
	if len(errs) > 0 {
		return fmt.Errorf("benchsuite: %s", strings.Join(errs, "; "))
	}
	return nil
}

func (c Config) runs(section string) bool {
	return len(c.Only) == 0 || slices.Contains(c.Only, section)
}
