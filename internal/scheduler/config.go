package scheduler

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/compactord/compactord/internal/lease"
)

// Config is the scheduling part of the daemon configuration. The daemon
// inlines it at the top level of its YAML.
type Config struct {
	// Workers bounds the attempts running at once, over all tables.
	Workers int `yaml:"workers"`
	// Schedule is one cron spec per kind.
	Schedule Schedules `yaml:"schedule"`
	// Timeouts is the time budget of one attempt, per kind.
	Timeouts Timeouts `yaml:"timeouts"`
	// PollInterval is how often each shard's newest manifest is checked for
	// new SSTables, which trigger a merge. 0 turns change polling off.
	PollInterval time.Duration `yaml:"poll_interval"`
	// SyncInterval is how often each table's manifest and shard manifests
	// are read for the status API and the LSM-debt gauges. A table is also
	// re-read after each of its jobs.
	SyncInterval time.Duration `yaml:"sync_interval"`
	// SyncConcurrency bounds the tables read at once by syncs, polls and
	// lease rounds.
	SyncConcurrency int `yaml:"sync_concurrency"`
	// Retry is the failure policy.
	Retry RetryConfig `yaml:"retry"`
	// ShutdownGrace is how long running attempts may take to finish after
	// a shutdown starts, before they are canceled.
	ShutdownGrace time.Duration `yaml:"shutdown_grace"`
	// History is how many finished attempts are kept per table for the
	// status API.
	History int `yaml:"history"`
	// Lease configures the split of tables between instances.
	Lease lease.Config `yaml:"lease"`
}

// Schedules holds one cron spec per kind: five fields (minute first), six
// fields (seconds first), a descriptor such as @hourly, or "@every 30s".
// "off" disables a kind.
type Schedules struct {
	Merge   string `yaml:"merge"`
	Compact string `yaml:"compact"`
	Index   string `yaml:"index"`
	Trim    string `yaml:"trim"`
	Cleanup string `yaml:"cleanup"`
}

// Get returns the spec of kind k.
func (s Schedules) Get(k Kind) string {
	switch k {
	case KindMerge:
		return s.Merge
	case KindCompact:
		return s.Compact
	case KindIndex:
		return s.Index
	case KindTrim:
		return s.Trim
	case KindCleanup:
		return s.Cleanup
	}
	return ""
}

// Timeouts is the time budget of one attempt: Default, unless the kind's
// own field is set.
type Timeouts struct {
	Default time.Duration `yaml:"default"`
	Merge   time.Duration `yaml:"merge"`
	Compact time.Duration `yaml:"compact"`
	Index   time.Duration `yaml:"index"`
	Trim    time.Duration `yaml:"trim"`
	Cleanup time.Duration `yaml:"cleanup"`
}

// For returns the budget of kind k.
func (t Timeouts) For(k Kind) time.Duration {
	var d time.Duration
	switch k {
	case KindMerge:
		d = t.Merge
	case KindCompact:
		d = t.Compact
	case KindIndex:
		d = t.Index
	case KindTrim:
		d = t.Trim
	case KindCleanup:
		d = t.Cleanup
	}
	if d == 0 {
		return t.Default
	}
	return d
}

// RetryConfig is the failure policy.
type RetryConfig struct {
	// BaseBackoff is the wait after the first failure; it doubles with each
	// further failure in a row, up to MaxBackoff, with jitter.
	BaseBackoff time.Duration `yaml:"base_backoff"`
	MaxBackoff  time.Duration `yaml:"max_backoff"`
	// QuarantineAfter non-retryable failures in a row (of one kind, or of
	// table syncs) halt the table until an operator resumes it.
	QuarantineAfter int `yaml:"quarantine_after"`
	// Budget bounds retries of transient failures (network errors, 5xx
	// and throttling answers, commit conflicts, the time budget): once one
	// kind (or the table's sync) has failed for longer than Budget without
	// a success in between, and at least QuarantineAfter times, the table
	// halts with reason retry_budget and the last error. 0 retries forever.
	Budget time.Duration `yaml:"budget"`
}

// DefaultConfig is the single place defaults live.
func DefaultConfig() Config {
	return Config{
		Workers: 4,
		Schedule: Schedules{
			Merge:   "@every 30s",
			Compact: "@every 5m",
			Index:   "@every 1m",
			Trim:    "@every 5m",
			Cleanup: "@every 1h",
		},
		Timeouts:        Timeouts{Default: 30 * time.Minute},
		PollInterval:    10 * time.Second,
		SyncInterval:    30 * time.Second,
		SyncConcurrency: 8,
		Retry:           RetryConfig{BaseBackoff: 5 * time.Second, MaxBackoff: 10 * time.Minute, QuarantineAfter: 5, Budget: 30 * time.Minute},
		ShutdownGrace:   30 * time.Second,
		History:         20,
		Lease:           lease.DefaultConfig(),
	}
}

// cronParser accepts five fields, six with seconds first, and descriptors
// (@hourly, @every 30s).
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseSchedule parses one cron spec; "off" (or "") returns nil.
func ParseSchedule(spec string) (sched cron.Schedule, err error) {
	spec = strings.TrimSpace(spec)
	if spec == "" || spec == "off" {
		return nil, nil
	}
	// The parser is third-party code fed operator input: never let it
	// take the daemon down.
	defer func() {
		if r := recover(); r != nil {
			sched, err = nil, fmt.Errorf("invalid cron spec %q", spec)
		}
	}()
	if strings.HasPrefix(spec, "@every") {
		d, derr := time.ParseDuration(strings.TrimSpace(strings.TrimPrefix(spec, "@every")))
		if derr != nil || d <= 0 {
			return nil, fmt.Errorf("invalid schedule %q: @every needs a positive duration such as 30s or 5m", spec)
		}
	}
	s, err := cronParser.Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("invalid cron spec %q: %v (want e.g. \"*/30 * * * * *\", \"0 */5 * * * *\", \"@hourly\" or \"@every 30s\")", spec, err)
	}
	return s, nil
}

// Validate checks the configuration; key names in messages are those of
// the YAML file.
func (c Config) Validate() error {
	if c.Workers < 1 {
		return fmt.Errorf("workers must be at least 1, got %d", c.Workers)
	}
	for _, k := range Kinds {
		if _, err := ParseSchedule(c.Schedule.Get(k)); err != nil {
			return fmt.Errorf("schedule.%s: %w", k, err)
		}
	}
	if c.Timeouts.Default <= 0 {
		return fmt.Errorf("timeouts.default must be positive, got %s", c.Timeouts.Default)
	}
	for _, k := range Kinds {
		if d := c.Timeouts.For(k); d <= 0 {
			return fmt.Errorf("timeouts.%s must be positive, got %s", k, d)
		}
	}
	switch {
	case c.PollInterval < 0:
		return fmt.Errorf("poll_interval must not be negative, got %s", c.PollInterval)
	case c.SyncInterval <= 0:
		return fmt.Errorf("sync_interval must be positive, got %s", c.SyncInterval)
	case c.SyncConcurrency < 1:
		return fmt.Errorf("sync_concurrency must be at least 1, got %d", c.SyncConcurrency)
	case c.Retry.BaseBackoff <= 0 || c.Retry.MaxBackoff < c.Retry.BaseBackoff:
		return fmt.Errorf("retry: need 0 < base_backoff <= max_backoff, got %s and %s", c.Retry.BaseBackoff, c.Retry.MaxBackoff)
	case c.Retry.QuarantineAfter < 1:
		return fmt.Errorf("retry.quarantine_after must be at least 1, got %d", c.Retry.QuarantineAfter)
	case c.Retry.Budget < 0:
		return fmt.Errorf("retry.budget must not be negative, got %s (0s retries forever)", c.Retry.Budget)
	case c.ShutdownGrace < 0:
		return fmt.Errorf("shutdown_grace must not be negative, got %s", c.ShutdownGrace)
	case c.History < 1:
		return fmt.Errorf("history must be at least 1, got %d", c.History)
	}
	return c.Lease.Validate()
}
