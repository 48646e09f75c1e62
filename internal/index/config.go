package index

import (
	"fmt"

	"github.com/compactord/compactord/internal/clock"
)

// Config is the index job's settings: jobs.index in the daemon's
// configuration, built from DefaultConfig.
type Config struct {
	// Indices limits the job to these logical indices. Empty: every index,
	// or only the MemWAL's maintained ones when OnlyMaintained is set.
	Indices        []string `yaml:"indices"`
	OnlyMaintained bool     `yaml:"only_maintained"`
	// Replans bounds how often a step plans again after a retryable
	// conflict: a step commits in at most Replans+1 attempts.
	Replans int `yaml:"replans"`
	// RebuildSegmentsOver: an index with more segments than this (a
	// full-text index: more partitions) is rebuilt into one, whether or
	// not it lags, and catch-up rebuilds rather than pass it; 0 is off
	// (catch-up then rebuilds past DefaultMaxSegments).
	RebuildSegmentsOver int `yaml:"rebuild_segments_over"`
}

// DefaultConfig is the index job's defaults, the only place they are set.
func DefaultConfig() Config { return Config{Replans: 2} }

// Validate checks the config. A message starts with the setting's key.
func (c Config) Validate() error {
	if c.Replans < 0 {
		return fmt.Errorf("replans must not be negative, got %d", c.Replans)
	}
	if c.RebuildSegmentsOver < 0 {
		return fmt.Errorf("rebuild_segments_over must not be negative (0 is off), got %d", c.RebuildSegmentsOver)
	}
	return nil
}

// Options are the catch-up options the config gives.
func (c Config) Options(clk clock.Clock) Options {
	return Options{Indices: c.Indices, Clock: clk, Attempts: c.Replans + 1, MaxSegments: c.RebuildSegmentsOver}
}

// RebuildOptions are the options of the rebuilds RebuildSegmentsOver
// asks for.
func (c Config) RebuildOptions(clk clock.Clock) RebuildOptions {
	return RebuildOptions{Now: clk.Now, Attempts: c.Replans + 1}
}

// RemapJobOptions are the physical remap's options the config gives.
func (c Config) RemapJobOptions(clk clock.Clock) RemapJobOptions {
	return RemapJobOptions{Indices: c.Indices, Clock: clk, Attempts: c.Replans + 1}
}
