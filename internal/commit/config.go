package commit

import (
	"errors"
	"fmt"
	"time"

	"github.com/compactord/compactord/internal/jobclass"
)

// MaxDeadline bounds Config.Deadline: a put must not land long after the
// head it was built on was read.
const MaxDeadline = 4 * time.Minute

// Config bounds the commit loop.
type Config struct {
	MaxAttempts int           `yaml:"max_attempts"`
	BaseBackoff time.Duration `yaml:"base_backoff"`
	MaxBackoff  time.Duration `yaml:"max_backoff"`
	// Deadline bounds one Commit call, all attempts included.
	Deadline time.Duration `yaml:"deadline"`
	// ReadBackTimeout bounds resolving an ambiguous put.
	ReadBackTimeout time.Duration `yaml:"read_back_timeout"`
}

// DefaultConfig is the configuration used when a field is zero.
func DefaultConfig() Config {
	return Config{MaxAttempts: 20, BaseBackoff: 5 * time.Millisecond, MaxBackoff: 2 * time.Second,
		Deadline: 2 * time.Minute, ReadBackTimeout: 30 * time.Second}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.MaxAttempts < 1:
		return fmt.Errorf("commit.max_attempts must be at least 1, got %d", c.MaxAttempts)
	case c.BaseBackoff < 0 || c.MaxBackoff < c.BaseBackoff:
		return fmt.Errorf("commit backoff: need 0 <= base_backoff <= max_backoff")
	case c.Deadline <= 0:
		return fmt.Errorf("commit.deadline must be positive")
	case c.Deadline > MaxDeadline:
		return fmt.Errorf("commit.deadline must be at most %s, got %s", MaxDeadline, c.Deadline)
	}
	return nil
}

// Error classes. Check with errors.Is. Their job classes (internal/jobclass)
// are the scheduler's defaults: a conflict retries, a lost race is skipped.
var (
	// ErrRetryable: the job must re-plan from a fresh read (a conflict that
	// cannot be rebased, or retries exhausted).
	ErrRetryable = jobclass.Weak(jobclass.Retry, "", errors.New("retryable conflict"))
	// ErrIncompatible: the transaction can never commit (e.g. generations
	// another instance already merged). The job is skipped, not retried.
	ErrIncompatible = jobclass.Weak(jobclass.Skipped, "", errors.New("incompatible transaction"))
)

// ConflictError explains why a transaction did not commit.
type ConflictError struct {
	// Class is ErrRetryable or ErrIncompatible.
	Class error
	// Ours and Theirs are operation names; Version is the committed version
	// we conflicted with (0 when not one version).
	Ours, Theirs string
	Version      uint64
	Reason       string
}

func (e *ConflictError) Error() string {
	if e.Version > 0 {
		return fmt.Sprintf("%s: %s conflicts with %s committed as version %d: %s", e.Class, e.Ours, e.Theirs, e.Version, e.Reason)
	}
	return fmt.Sprintf("%s: %s: %s", e.Class, e.Ours, e.Reason)
}

// Unwrap returns the class, so errors.Is(err, ErrRetryable) works.
func (e *ConflictError) Unwrap() error { return e.Class }

// AmbiguousError is returned when the outcome of a put could not be decided
// before the deadline. The caller must not delete the transaction's files:
// the version may be live.
type AmbiguousError struct {
	Version uint64
	Err     error
}

func (e *AmbiguousError) Error() string {
	return fmt.Sprintf("commit of version %d has an unknown outcome (do not delete its files): %v", e.Version, e.Err)
}

func (e *AmbiguousError) Unwrap() error { return e.Err }

// JobClass: a job whose commit has an unknown outcome retries (the retry
// reads the head and finds out).
func (e *AmbiguousError) JobClass() jobclass.Class { return jobclass.Retry }

// Decision is how a transaction committed since our read version bears on ours.
type Decision int

const (
	// Compatible: commit on top of it unchanged.
	Compatible Decision = iota
	// Rebase: commit on top of it after rewriting our transaction.
	Rebase
	// Retryable: the job must re-plan from a fresh read.
	Retryable
	// Incompatible: the job can never commit.
	Incompatible
)

func (d Decision) String() string {
	return [...]string{"compatible", "rebase", "retryable", "incompatible"}[d]
}
