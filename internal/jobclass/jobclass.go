// Package jobclass says what a failed maintenance job means to the
// scheduler: retry it, skip it, quarantine the table or stop the process.
// The class is marked where the failure happens (as Thanos's compactor
// marks halt and retry errors), so that the scheduler classifies errors
// without knowing the packages that made them. It imports nothing of
// compactord: the format packages mark their errors with it, the scheduler
// reads the marks.
//
// A mark is strong or weak. Strong marks (Retryable, Quarantine,
// Unrecoverable, Skip) are a job's explicit decision about one error, and the
// outermost one wins over everything else. Weak marks (Weak) give a
// package's sentinel error its default class (a commit conflict retries,
// corrupt metadata quarantines); when an error carries several, the class
// that is least severe for the table wins: skipped, then retry, then
// error.
package jobclass

// Class is what an attempt's outcome means.
type Class string

// Classes. Result label values of compactord_job_runs_total.
const (
	Success  Class = "success"
	Skipped  Class = "skipped"  // nothing to do that another instance did not do first
	Canceled Class = "canceled" // stopped by the scheduler; not a failure
	Retry    Class = "retry"    // transient: back off with jitter
	Error    Class = "error"    // non-retryable: counts toward quarantine
	Fatal    Class = "fatal"    // the process exits
)

// Halt reasons: label values of compactord_table_halted.
const (
	ReasonCorrupt = "corrupt" // metadata failed its checksum or does not decode
	ReasonFailing = "failing" // repeated non-retryable errors
	// ReasonRetryBudget: transient failures (outage, throttling, conflicts)
	// for longer than retry.budget.
	ReasonRetryBudget = "retry_budget"
	// ReasonUnsupported: the table uses a Lance feature (a feature flag)
	// compactord does not implement; a newer Lance wrote it. Nothing is
	// wrong with the table, and nothing changes until compactord learns
	// the feature, so it is held back rather than retried.
	ReasonUnsupported = "unsupported_feature"
)

// known reports whether reason is a halt reason of its own (the others
// normalise to ReasonFailing).
func known(reason string) bool { return reason == ReasonCorrupt || reason == ReasonUnsupported }

// marked carries a class chosen for err.
type marked struct {
	class  Class
	reason string
	weak   bool
	err    error
}

func (e *marked) Error() string { return e.err.Error() }
func (e *marked) Unwrap() error { return e.err }

func mark(c Class, reason string, weak bool, err error) error {
	if err == nil {
		return nil
	}
	return &marked{class: c, reason: reason, weak: weak, err: err}
}

// Retryable marks err as transient.
func Retryable(err error) error { return mark(Retry, "", false, err) }

// Quarantine marks err as non-retryable, with the halt reason it gives if
// it repeats (ReasonCorrupt, or ReasonFailing for any other reason).
func Quarantine(reason string, err error) error {
	if !known(reason) {
		reason = ReasonFailing
	}
	return mark(Error, reason, false, err)
}

// Unrecoverable marks err as one the process cannot continue after
// (class Fatal).
func Unrecoverable(err error) error { return mark(Fatal, "", false, err) }

// Skip marks err as "nothing to do": not a failure (class Skipped).
func Skip(err error) error { return mark(Skipped, "", false, err) }

// Weak gives a sentinel error its default class c (Skipped, Retry, or
// Error with reason). The returned error is the sentinel: compare with
// errors.Is against it, and wrap it as any error.
func Weak(c Class, reason string, err error) error {
	if c == Error && !known(reason) {
		reason = ReasonFailing
	}
	if c != Error {
		reason = ""
	}
	return mark(c, reason, true, err)
}

// Classer is implemented by error types that know their default class
// (a weak mark on a type rather than on a sentinel value).
type Classer interface {
	JobClass() Class
}

// Of returns the class marked on err: the outermost strong mark, else the
// least severe weak mark. strong reports which; ok is false when err
// carries no mark.
func Of(err error) (c Class, reason string, strong, ok bool) {
	var weakBest *marked
	walk(err, func(e error) bool {
		if m, isMark := e.(*marked); isMark {
			if !m.weak {
				c, reason, strong, ok = m.class, m.reason, true, true
				return false
			}
			if weakBest == nil || rank(m.class) < rank(weakBest.class) {
				weakBest = m
			}
		}
		if cl, isClasser := e.(Classer); isClasser {
			if k := cl.JobClass(); weakBest == nil || rank(k) < rank(weakBest.class) {
				weakBest = &marked{class: k, weak: true}
			}
		}
		return true
	})
	if strong {
		return c, reason, true, true
	}
	if weakBest != nil {
		return weakBest.class, weakBest.reason, false, true
	}
	return "", "", false, false
}

func rank(c Class) int {
	switch c {
	case Success:
		return 0
	case Skipped:
		return 1
	case Canceled:
		return 2
	case Retry:
		return 3
	case Error:
		return 4
	}
	return 5 // Fatal and unknown
}

// walk visits err and what it wraps, depth first, until visit returns
// false.
func walk(err error, visit func(error) bool) bool {
	for err != nil {
		if !visit(err) {
			return false
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if !walk(e, visit) {
					return false
				}
			}
			return true
		default:
			return true
		}
	}
	return true
}
