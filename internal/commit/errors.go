// Package commit publishes table versions with optimistic concurrency.
//
// A transaction is planned against a read version. Commit captures that
// version's state once, then loops: find the head, classify every
// transaction committed since the read version against ours, rebase where
// that is provably safe, build the next manifest with the pure
// BuildManifest, and put-if-absent it. The put is the commit; a lost race
// goes round again and an ambiguous outcome is resolved by reading the
// version back.
package commit

import (
	"errors"
	"fmt"
)

// Error classes. Check with errors.Is.
var (
	// ErrRetryable: the job must re-plan from a fresh read (a conflict that
	// cannot be rebased, or retries exhausted).
	ErrRetryable = errors.New("retryable conflict")
	// ErrIncompatible: the transaction can never commit (e.g. generations
	// another instance already merged). The job is skipped, not retried.
	ErrIncompatible = errors.New("incompatible transaction")
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
