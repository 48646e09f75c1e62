package scheduler

import (
	"context"
	"errors"
	"fmt"

	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/lease"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
)

// Named causes with which the scheduler cancels attempts. An attempt that
// ends with context.Canceled and one of these causes was stopped on
// purpose: it is not a failure.
var (
	ErrShutdown     = errors.New("scheduler shutting down")
	ErrTableRemoved = errors.New("table removed from the configuration")
	ErrLeaseLost    = errors.New("table lease lost to another instance")
	// ErrBudget is the cause when an attempt exceeds its time budget; that
	// is a failure, and a retryable one.
	ErrBudget = errors.New("job exceeded its time budget")
)

// Class is what an attempt's outcome means to the scheduler.
type Class string

// Classes. Result label values of compactord_job_runs_total.
const (
	ClassSuccess  Class = "success"
	ClassSkipped  Class = "skipped"  // nothing to do that another instance did not do first
	ClassCanceled Class = "canceled" // stopped by the scheduler; not a failure
	ClassRetry    Class = "retry"    // transient: back off with jitter
	ClassError    Class = "error"    // non-retryable: counts toward quarantine
	ClassFatal    Class = "fatal"    // the process exits
)

var allClasses = []Class{ClassSuccess, ClassSkipped, ClassCanceled, ClassRetry, ClassError, ClassFatal}

// Halt reasons: label values of compactord_table_halted.
const (
	ReasonCorrupt = "corrupt" // metadata failed its checksum or does not decode
	ReasonFailing = "failing" // repeated non-retryable errors
	// ReasonRetryBudget: transient failures (outage, throttling, conflicts)
	// for longer than retry.budget.
	ReasonRetryBudget = "retry_budget"
)

var allReasons = []string{ReasonCorrupt, ReasonFailing, ReasonRetryBudget}

// classError carries an explicit class chosen by a job.
type classError struct {
	class  Class
	reason string
	err    error
}

func (e *classError) Error() string { return e.err.Error() }
func (e *classError) Unwrap() error { return e.err }

// Retryable marks err as transient.
func Retryable(err error) error {
	if err == nil {
		return nil
	}
	return &classError{class: ClassRetry, err: err}
}

// Quarantine marks err as non-retryable, with the halt reason it gives if
// it repeats (ReasonCorrupt or ReasonFailing).
func Quarantine(reason string, err error) error {
	if err == nil {
		return nil
	}
	if reason != ReasonCorrupt {
		reason = ReasonFailing
	}
	return &classError{class: ClassError, reason: reason, err: err}
}

// Fatal marks err as one the process cannot continue after.
func Fatal(err error) error {
	if err == nil {
		return nil
	}
	return &classError{class: ClassFatal, err: err}
}

// Skipped marks err as "nothing to do": not a failure.
func Skipped(err error) error {
	if err == nil {
		return nil
	}
	return &classError{class: ClassSkipped, err: err}
}

// Classify maps an attempt's error to its class. cause is the cause of the
// attempt's context (nil while it was not canceled). The halt reason is
// set for ClassError.
func Classify(err, cause error) (Class, string) {
	if err == nil {
		return ClassSuccess, ""
	}
	// An attempt the scheduler canceled failed because of that, whatever
	// its error says: some layers wrap a canceled read in another class
	// (a canceled read of a file can look corrupt), and a shutdown must never
	// quarantine a table.
	switch {
	case errors.Is(cause, ErrShutdown), errors.Is(cause, ErrTableRemoved), errors.Is(cause, ErrLeaseLost):
		return ClassCanceled, ""
	case errors.Is(cause, ErrBudget):
		return ClassRetry, ""
	}
	var ce *classError
	if errors.As(err, &ce) {
		return ce.class, ce.reason
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		// Not our cancellation: a deadline inside the job (a commit
		// deadline, a storage timeout) is transient.
		return ClassRetry, ""
	}
	var ambiguous *commit.AmbiguousError
	switch {
	case errors.Is(err, commit.ErrIncompatible):
		// Another instance already did this work (a merge whose
		// generations were merged is skipped, not retried).
		return ClassSkipped, ""
	case errors.Is(err, commit.ErrRetryable), errors.As(err, &ambiguous):
		return ClassRetry, ""
	case storage.IsTransient(err):
		// An object-store blip (refused, reset, 5xx, throttled) must not
		// quarantine every table: it retries with backoff.
		return ClassRetry, ""
	case errors.Is(err, meta.ErrCorrupt), errors.Is(err, lease.ErrCorrupt):
		return ClassError, ReasonCorrupt
	}
	return ClassError, ReasonFailing
}

// APIError is an error of the control API with its HTTP status.
type APIError struct {
	Status int
	Msg    string
}

func (e *APIError) Error() string { return e.Msg }

func apiErr(status int, format string, args ...any) error {
	return &APIError{Status: status, Msg: fmt.Sprintf(format, args...)}
}
