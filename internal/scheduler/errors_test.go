package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"

	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/scheduler"
	"github.com/compactord/compactord/internal/testing/faults"
)

func TestClassify(t *testing.T) {
	corruptCanceled := fmt.Errorf("data file x: %w: %v", meta.ErrCorrupt, context.Canceled)
	for _, tc := range []struct {
		name   string
		err    error
		cause  error
		class  scheduler.Class
		reason string
	}{
		{"success", nil, nil, scheduler.ClassSuccess, ""},
		{"shutdown", context.Canceled, scheduler.ErrShutdown, scheduler.ClassCanceled, ""},
		{"table removed", fmt.Errorf("merge: %w", context.Canceled), scheduler.ErrTableRemoved, scheduler.ClassCanceled, ""},
		{"lease lost", context.Canceled, scheduler.ErrLeaseLost, scheduler.ClassCanceled, ""},
		// A layer that reports a canceled read as corruption must not get a
		// table quarantined by a shutdown.
		{"shutdown disguised as corruption", corruptCanceled, scheduler.ErrShutdown, scheduler.ClassCanceled, ""},
		{"budget", context.Canceled, scheduler.ErrBudget, scheduler.ClassRetry, ""},
		{"deadline inside the job", fmt.Errorf("commit: %w", context.DeadlineExceeded), nil, scheduler.ClassRetry, ""},
		{"retryable conflict", &commit.ConflictError{Class: commit.ErrRetryable}, nil, scheduler.ClassRetry, ""},
		{"ambiguous commit", &commit.AmbiguousError{Version: 3, Err: errors.New("reset")}, nil, scheduler.ClassRetry, ""},
		{"network timeout", fmt.Errorf("get: %w", faults.ErrInjectedTimeout), nil, scheduler.ClassRetry, ""},
		{"already merged elsewhere", fmt.Errorf("merge: %w", &commit.ConflictError{Class: commit.ErrIncompatible}), nil, scheduler.ClassSkipped, ""},
		{"corrupt", fmt.Errorf("manifest 3: %w", meta.ErrCorrupt), nil, scheduler.ClassError, scheduler.ReasonCorrupt},
		{"anything else", errors.New("boom"), nil, scheduler.ClassError, scheduler.ReasonFailing},
		// A newer Lance's feature holds the table back: quarantined as
		// unsupported_feature (compactord_table_halted), not as failing.
		{"newer Lance's writer flag", fmt.Errorf("trim stopped, nothing deleted: %w", &meta.FeatureError{Write: true, Bits: meta.FlagFragmentReuseIndex}), nil, scheduler.ClassError, scheduler.ReasonUnsupported},
		{"newer Lance's index version", fmt.Errorf("compact: %w", &meta.IndexVersionError{Name: "id_idx", Kind: "btree", Version: 1}), nil, scheduler.ClassError, scheduler.ReasonUnsupported},
		// syscall.Errno has the methods of net.Error; a missing or
		// unreadable file is still not a network blip.
		{"missing data file", fmt.Errorf("data/f1.lance: %w", &fs.PathError{Op: "open", Path: "/t/data/f1.lance", Err: syscall.ENOENT}), nil, scheduler.ClassError, scheduler.ReasonFailing},
		{"unreadable data file", &fs.PathError{Op: "open", Path: "/t/data/f1.lance", Err: syscall.EACCES}, nil, scheduler.ClassError, scheduler.ReasonFailing},
		{"explicit retry", scheduler.Retryable(meta.ErrCorrupt), nil, scheduler.ClassRetry, ""},
		{"explicit quarantine", scheduler.Quarantine(scheduler.ReasonCorrupt, errors.New("x")), nil, scheduler.ClassError, scheduler.ReasonCorrupt},
		{"explicit fatal", fmt.Errorf("w: %w", scheduler.Fatal(errors.New("x"))), nil, scheduler.ClassFatal, ""},
		{"explicit skip", scheduler.Skipped(errors.New("x")), nil, scheduler.ClassSkipped, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, r := scheduler.Classify(tc.err, tc.cause)
			if c != tc.class || r != tc.reason {
				t.Fatalf("Classify = %s/%q, want %s/%q", c, r, tc.class, tc.reason)
			}
		})
	}
}

func TestParseSchedule(t *testing.T) {
	for _, ok := range []string{"@every 1s", "@every 1m30s", "*/5 * * * *", "0 */5 * * * *", "@hourly", "off", ""} {
		if _, err := scheduler.ParseSchedule(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"@every", "@every -1s", "@every soon", "* * *", "61 * * * *", "@fortnightly", "TZ=Nowhere/Bogus * * * * *"} {
		if _, err := scheduler.ParseSchedule(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
