package compact

import (
	"fmt"
	"time"
)

// Config is the compaction job's configuration.
type Config struct {
	// TargetRowsPerFragment: fragments with fewer live rows are small, and
	// outputs hold at most this many.
	TargetRowsPerFragment uint64 `yaml:"target_rows_per_fragment"`
	// DeletionThreshold: deleted share of physical rows from which a
	// fragment is deletion-heavy.
	DeletionThreshold float64 `yaml:"deletion_threshold"`
	// MaxBytesPerGroup bounds one job's input bytes (0: unbounded).
	MaxBytesPerGroup uint64 `yaml:"max_bytes_per_group"`
	// Parallelism is how many groups are rewritten at once.
	Parallelism int `yaml:"parallelism"`
	// InlineRemap rewrites affected index segments in the compaction's own
	// commit instead of deferring them to the FRI (the default).
	InlineRemap bool `yaml:"inline_remap"`
	// BatchRows is how many rows a group decodes at a time when it must
	// filter deletions; it bounds memory per group.
	BatchRows int `yaml:"batch_rows"`
	// Replans is how many times Run plans again after a retryable
	// conflict (another compaction took the same fragments).
	Replans int `yaml:"replans"`
}

// DefaultConfig returns the defaults; zero fields of a Config take them.
func DefaultConfig() Config {
	return Config{
		TargetRowsPerFragment: 1 << 20,
		DeletionThreshold:     0.1,
		MaxBytesPerGroup:      1 << 30,
		Parallelism:           4,
		BatchRows:             1024,
		Replans:               2,
	}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.TargetRowsPerFragment == 0 {
		c.TargetRowsPerFragment = d.TargetRowsPerFragment
	}
	if c.DeletionThreshold == 0 {
		c.DeletionThreshold = d.DeletionThreshold
	}
	if c.Parallelism == 0 {
		c.Parallelism = d.Parallelism
	}
	if c.BatchRows == 0 {
		c.BatchRows = d.BatchRows
	}
	return c
}

// Validate checks the configuration (after defaults).
func (c Config) Validate() error {
	switch {
	case c.TargetRowsPerFragment > 1<<32:
		return fmt.Errorf("compact.target_rows_per_fragment must be at most 2^32, got %d", c.TargetRowsPerFragment)
	case !(c.DeletionThreshold > 0 && c.DeletionThreshold <= 1):
		return fmt.Errorf("compact.deletion_threshold must be in (0, 1], got %v", c.DeletionThreshold)
	case c.Parallelism < 1:
		return fmt.Errorf("compact.parallelism must be at least 1, got %d", c.Parallelism)
	case c.BatchRows < 1:
		return fmt.Errorf("compact.batch_rows must be at least 1, got %d", c.BatchRows)
	case c.Replans < 0:
		return fmt.Errorf("compact.replans must not be negative, got %d", c.Replans)
	}
	return nil
}

// Env returns the planner environment of this configuration.
func (c Config) Env(now time.Time, inFlight []uint32) Env {
	return Env{TargetRowsPerFragment: c.TargetRowsPerFragment, DeletionThreshold: c.DeletionThreshold,
		MaxBytesPerGroup: c.MaxBytesPerGroup, InFlight: inFlight, Now: now}
}
