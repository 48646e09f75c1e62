package daemon

import (
	"fmt"
	"time"
)

// The jobs' settings (the jobs: section), mapped onto the options of the
// Lance packages by lance_jobs.go. Zero fields take the defaults of
// DefaultConfig.

// MergeConfig is jobs.merge.
type MergeConfig struct {
	// MaxGenerations bounds the generations one merge commit lands per
	// shard; 0 means no bound.
	MaxGenerations int `yaml:"max_generations"`
}

// Validate checks the configuration.
func (c MergeConfig) Validate() error {
	if c.MaxGenerations < 0 {
		return fmt.Errorf("max_generations must not be negative, got %d", c.MaxGenerations)
	}
	return nil
}

// CompactConfig is jobs.compact.
type CompactConfig struct {
	// TargetRowsPerFragment: fragments with fewer live rows are small, and
	// outputs hold at most this many.
	TargetRowsPerFragment uint64 `yaml:"target_rows_per_fragment"`
	// DeletionThreshold: deleted share of physical rows from which a
	// fragment is rewritten.
	DeletionThreshold float64 `yaml:"deletion_threshold"`
	// Parallelism bounds the groups rewritten at once (compact.BytesPerWorker
	// of input to re-encode per group in flight).
	Parallelism int `yaml:"parallelism"`
	// InlineRemap rewrites affected index segments in the compaction's own
	// commit instead of deferring them to the fragment-reuse index
	// (default true; see compact.Options.DeferRemap for the hazard of
	// false).
	InlineRemap bool `yaml:"inline_remap"`
	// Replans is how many times a compaction plans again after a
	// retryable conflict (another compaction took the same fragments).
	Replans int `yaml:"replans"`
	// MemoryBudgetMiB bounds the working memory of the groups all of the
	// daemon's compactions rewrite at once (compact.MemoryBudget): a
	// group waits until its estimate fits. 0: no bound.
	MemoryBudgetMiB int `yaml:"memory_budget_mib"`
}

// Validate checks the configuration.
func (c CompactConfig) Validate() error {
	switch {
	case c.TargetRowsPerFragment > 1<<32:
		return fmt.Errorf("target_rows_per_fragment must be at most 2^32, got %d", c.TargetRowsPerFragment)
	case !(c.DeletionThreshold > 0 && c.DeletionThreshold <= 1):
		return fmt.Errorf("deletion_threshold must be in (0, 1], got %v", c.DeletionThreshold)
	case c.Parallelism < 1:
		return fmt.Errorf("parallelism must be at least 1, got %d", c.Parallelism)
	case c.Replans < 0:
		return fmt.Errorf("replans must not be negative, got %d", c.Replans)
	case c.MemoryBudgetMiB < 0:
		return fmt.Errorf("memory_budget_mib must not be negative, got %d", c.MemoryBudgetMiB)
	}
	return nil
}

// IndexConfig is jobs.index.
type IndexConfig struct {
	// Indices limits the job to these logical indices. Empty: every index,
	// or only the MemWAL's maintained ones when OnlyMaintained is set.
	Indices        []string `yaml:"indices"`
	OnlyMaintained bool     `yaml:"only_maintained"`
	// Replans bounds how often a step plans again after a retryable
	// conflict.
	Replans int `yaml:"replans"`
}

// Validate checks the configuration.
func (c IndexConfig) Validate() error {
	if c.Replans < 0 {
		return fmt.Errorf("replans must not be negative, got %d", c.Replans)
	}
	return nil
}

// TrimConfig is jobs.trim.
type TrimConfig struct {
	// Concurrency bounds parallel deletes.
	Concurrency int `yaml:"concurrency"`
	// KeepShardManifests is how many newest shard-manifest versions to
	// keep (at least 2).
	KeepShardManifests int `yaml:"keep_shard_manifests"`
	// ReaderGrace is how long a version keeps the generations its LSM
	// view reads after it stopped being the latest.
	ReaderGrace time.Duration `yaml:"reader_grace"`
}

// Validate checks the configuration.
func (c TrimConfig) Validate() error {
	switch {
	case c.Concurrency < 1:
		return fmt.Errorf("concurrency must be at least 1, got %d", c.Concurrency)
	case c.KeepShardManifests < 2:
		return fmt.Errorf("keep_shard_manifests must be at least 2, got %d", c.KeepShardManifests)
	case c.ReaderGrace < 0:
		return fmt.Errorf("reader_grace must not be negative, got %s", c.ReaderGrace)
	}
	return nil
}

// CleanupPolicy says which versions cleanup keeps.
type CleanupPolicy struct {
	// RetainVersions keeps the newest N versions (>= 1).
	RetainVersions int `yaml:"retain_versions"`
	// OlderThan keeps every version younger than this (0: age does not
	// retain).
	OlderThan time.Duration `yaml:"older_than"`
	// MinAge: an unreferenced file younger than this is kept; it may belong
	// to a commit in progress.
	MinAge time.Duration `yaml:"min_age"`
}

// CleanupConfig is jobs.cleanup.
type CleanupConfig struct {
	Policy CleanupPolicy `yaml:",inline"`
	// Concurrency bounds parallel reads and deletes.
	Concurrency int `yaml:"concurrency"`
}

// Validate checks the configuration.
func (c CleanupConfig) Validate() error {
	switch {
	case c.Concurrency < 1:
		return fmt.Errorf("concurrency must be at least 1, got %d", c.Concurrency)
	case c.Policy.RetainVersions < 1:
		return fmt.Errorf("retain_versions must be at least 1 (the latest version is always kept), got %d", c.Policy.RetainVersions)
	case c.Policy.OlderThan < 0:
		return fmt.Errorf("older_than must not be negative, got %s", c.Policy.OlderThan)
	case c.Policy.MinAge < 0:
		return fmt.Errorf("min_age must not be negative, got %s", c.Policy.MinAge)
	}
	return nil
}
