package scheduler

import (
	"context"
	"errors"
	"fmt"

	"github.com/compactord/compactord/internal/jobclass"
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

// Class is what an attempt's outcome means to the scheduler
// (internal/jobclass, where failures are marked).
type Class = jobclass.Class

// Classes. Result label values of compactord_job_runs_total.
const (
	ClassSuccess  = jobclass.Success
	ClassSkipped  = jobclass.Skipped  // nothing to do that another instance did not do first
	ClassCanceled = jobclass.Canceled // stopped by the scheduler; not a failure
	ClassRetry    = jobclass.Retry    // transient: back off with jitter
	ClassError    = jobclass.Error    // non-retryable: counts toward quarantine
	ClassFatal    = jobclass.Fatal    // the process exits
)

var allClasses = []Class{ClassSuccess, ClassSkipped, ClassCanceled, ClassRetry, ClassError, ClassFatal}

// Halt reasons: label values of compactord_table_halted.
const (
	ReasonCorrupt     = jobclass.ReasonCorrupt
	ReasonFailing     = jobclass.ReasonFailing
	ReasonRetryBudget = jobclass.ReasonRetryBudget
	ReasonUnsupported = jobclass.ReasonUnsupported
)

var allReasons = []string{ReasonCorrupt, ReasonFailing, ReasonRetryBudget, ReasonUnsupported}

// Retryable marks err as transient.
func Retryable(err error) error { return jobclass.Retryable(err) }

// Quarantine marks err as non-retryable, with the halt reason it gives if
// it repeats (ReasonCorrupt or ReasonFailing).
func Quarantine(reason string, err error) error { return jobclass.Quarantine(reason, err) }

// Fatal marks err as one the process cannot continue after.
func Fatal(err error) error { return jobclass.Unrecoverable(err) }

// Skipped marks err as "nothing to do": not a failure.
func Skipped(err error) error { return jobclass.Skip(err) }

// Classify maps an attempt's error to its class. cause is the cause of the
// attempt's context (nil while it was not canceled). The halt reason is
// set for ClassError. The scheduler knows no job's errors: the packages
// that fail mark the class (jobclass), and in order a cancellation the
// scheduler caused, a job's explicit (strong) mark, a cancellation or
// deadline inside the job, the least severe of the errors' default
// (weak) marks and an object-store blip decide; anything else is a
// failure that counts toward quarantine.
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
	class, reason, strong, marked := jobclass.Of(err)
	if strong {
		return class, reason
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		// Not our cancellation: a deadline inside the job (a commit
		// deadline, a storage timeout) is transient.
		return ClassRetry, ""
	}
	if marked && class != ClassError {
		// Another instance already did this work (skipped), or a conflict
		// or an unknown commit outcome (retry).
		return class, reason
	}
	if storage.IsTransient(err) {
		// An object-store blip (refused, reset, 5xx, throttled) must not
		// quarantine every table: it retries with backoff.
		return ClassRetry, ""
	}
	if marked {
		return class, reason
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
