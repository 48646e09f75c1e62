package jobclass_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/compactord/compactord/internal/jobclass"
)

var (
	errConflict = jobclass.Weak(jobclass.Retry, "", errors.New("conflict"))
	errLost     = jobclass.Weak(jobclass.Skipped, "", errors.New("lost"))
	errCorrupt  = jobclass.Weak(jobclass.Error, jobclass.ReasonCorrupt, errors.New("corrupt"))
)

type ambiguous struct{}

func (ambiguous) Error() string            { return "ambiguous" }
func (ambiguous) JobClass() jobclass.Class { return jobclass.Retry }

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		name           string
		err            error
		class          jobclass.Class
		reason         string
		strong, marked bool
	}{
		{"unmarked", errors.New("x"), "", "", false, false},
		{"nil", nil, "", "", false, false},
		{"weak sentinel wrapped", fmt.Errorf("a: %w", errConflict), jobclass.Retry, "", false, true},
		{"weak corrupt", fmt.Errorf("a: %w", errCorrupt), jobclass.Error, jobclass.ReasonCorrupt, false, true},
		{"least severe weak mark wins", errors.Join(errCorrupt, errConflict), jobclass.Retry, "", false, true},
		{"skip beats retry", errors.Join(errConflict, errLost), jobclass.Skipped, "", false, true},
		{"classer type", fmt.Errorf("w: %w", ambiguous{}), jobclass.Retry, "", false, true},
		{"strong beats weak", jobclass.Retryable(errCorrupt), jobclass.Retry, "", true, true},
		{"strong beats less severe weak", jobclass.Quarantine(jobclass.ReasonCorrupt, errLost), jobclass.Error, jobclass.ReasonCorrupt, true, true},
		{"outermost strong wins", jobclass.Skip(jobclass.Unrecoverable(errors.New("x"))), jobclass.Skipped, "", true, true},
		{"quarantine reason normalised", jobclass.Quarantine("whatever", errors.New("x")), jobclass.Error, jobclass.ReasonFailing, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, r, strong, ok := jobclass.Of(tc.err)
			if c != tc.class || r != tc.reason || strong != tc.strong || ok != tc.marked {
				t.Fatalf("Of = %q %q strong=%v ok=%v, want %q %q strong=%v ok=%v", c, r, strong, ok, tc.class, tc.reason, tc.strong, tc.marked)
			}
		})
	}
}

// A mark changes neither the message nor errors.Is.
func TestMarksAreTransparent(t *testing.T) {
	base := errors.New("base")
	for _, err := range []error{jobclass.Retryable(base), jobclass.Quarantine("", base), jobclass.Unrecoverable(base), jobclass.Skip(base)} {
		if err.Error() != "base" || !errors.Is(err, base) {
			t.Fatalf("%v: message or chain changed", err)
		}
	}
	if !errors.Is(fmt.Errorf("x: %w", errConflict), errConflict) {
		t.Fatal("a weak sentinel does not match itself")
	}
	if jobclass.Retryable(nil) != nil || jobclass.Weak(jobclass.Retry, "", nil) != nil {
		t.Fatal("marking nil must stay nil")
	}
}
