package compact

import (
	"fmt"

	"github.com/compactord/compactord/internal/clock"
)

// MaxTargetRows is the largest TargetRowsPerFragment: a fragment's row
// offsets are 32-bit in a row address.
const MaxTargetRows = 1<<32 - 1

// Config is compaction's settings: jobs.compact in the daemon's
// configuration and the flags of `compactord compact`, both built from
// DefaultConfig.
type Config struct {
	// TargetRowsPerFragment: fragments with fewer live rows are small, and
	// each group of a plan holds at least this many (its rows spread
	// evenly over as many fragments as this fits in, as LanceDB writes
	// them: see Options).
	TargetRowsPerFragment uint64 `yaml:"target_rows_per_fragment"`
	// DeletionThreshold: deleted share of physical rows from which a
	// fragment is rewritten.
	DeletionThreshold float64 `yaml:"deletion_threshold"`
	// Parallelism bounds the groups rewritten at once (BytesPerWorker of
	// input to re-encode per group in flight).
	Parallelism int `yaml:"parallelism"`
	// InlineRemap rewrites affected index segments in the compaction's own
	// commit instead of deferring them to the fragment-reuse index. The
	// CLI's --defer-remap is its negation, with the default derived from
	// here.
	InlineRemap bool `yaml:"inline_remap"`
	// Replans is how many times a compaction plans again after a
	// retryable conflict (another compaction took the same fragments).
	Replans int `yaml:"replans"`
	// MemoryBudgetMiB bounds the working memory of the groups all of the
	// daemon's compactions rewrite at once (MemoryBudget): a group waits
	// until its estimate fits. 0: no bound.
	MemoryBudgetMiB int `yaml:"memory_budget_mib"`
}

// DefaultConfig is compaction's defaults, the only place they are set:
// Lance's target rows and deletion threshold, and the indexes remapped in
// the compaction's own commit, as LanceDB's optimize() does (a deferred
// remap leaves a fragment-reuse version that LanceDB's own compaction
// mishandles until it is absorbed).
func DefaultConfig() Config {
	return Config{TargetRowsPerFragment: 1 << 20, DeletionThreshold: 0.1, Parallelism: 4, InlineRemap: true, Replans: 2, MemoryBudgetMiB: 256}
}

// Validate checks the config. A message starts with the setting's key.
func (c Config) Validate() error {
	if err := validateTargetRows(c.TargetRowsPerFragment); err != nil {
		return err
	}
	if err := validateDeletionThreshold(c.DeletionThreshold); err != nil {
		return err
	}
	switch {
	case c.Parallelism < 1:
		return fmt.Errorf("parallelism must be at least 1, got %d", c.Parallelism)
	case c.Replans < 0:
		return fmt.Errorf("replans must not be negative, got %d", c.Replans)
	case c.MemoryBudgetMiB < 0:
		return fmt.Errorf("memory_budget_mib must not be negative, got %d", c.MemoryBudgetMiB)
	}
	return nil
}

// Options are the planning options the config gives, Lance's for the rest.
func (c Config) Options() Options {
	return Options{TargetRowsPerFragment: c.TargetRowsPerFragment, MaxRowsPerGroup: 1024, MaterializeDeletions: true,
		DeletionThreshold: c.DeletionThreshold, DeferRemap: !c.InlineRemap}
}

// Env is the run environment the config gives; mem is the process's shared
// budget (nil: none).
func (c Config) Env(clk clock.Clock, mem *MemoryBudget) Env {
	return Env{Clock: clk, Attempts: c.Replans + 1, Parallelism: c.Parallelism, Memory: mem}
}

// validateTargetRows is the one rule for the target rows per fragment.
func validateTargetRows(n uint64) error {
	if n == 0 || n > MaxTargetRows {
		return fmt.Errorf("target_rows_per_fragment must be in [1, %d], got %d", uint64(MaxTargetRows), n)
	}
	return nil
}

// validateDeletionThreshold is the one rule for the deletion threshold: a
// share in (0, 1]. 0 would rewrite every fragment with a single deleted
// row; 1 never rewrites a fragment for its deletions alone.
func validateDeletionThreshold(f float64) error {
	if !(f > 0 && f <= 1) {
		return fmt.Errorf("deletion_threshold must be in (0, 1], got %v", f)
	}
	return nil
}
