package scheduler_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/compactord/compactord/internal/scheduler"
)

// An outage is retried within a bounded budget, then the table halts with
// reason retry_budget and the last error. Every failed attempt counts in
// the streak the API and the metrics show, with the next attempt's time.
func TestRetryBudgetThenQuarantine(t *testing.T) {
	cfg := testConfig()
	cfg.Retry.Budget = 10 * time.Second
	h := start(t, harnessOpts{cfg: cfg}, specs(t, "t")...)
	h.waitSynced("t")
	refused := fmt.Errorf("list _versions/: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED})
	h.jobs.setBehave(func(ctx context.Context, c call) (scheduler.Outcome, error) { return scheduler.Outcome{}, refused })
	start := h.clk.Now()
	if err := h.s.Trigger("t", scheduler.KindMerge); err != nil {
		t.Fatal(err)
	}
	n := 0
	for h.status("t").Halted == nil {
		n++
		if n > 20 {
			t.Fatalf("not halted after %d attempts over %v", n-1, h.clk.Now().Sub(start))
		}
		eventually(t, fmt.Sprintf("attempt %d recorded", n), func() bool {
			st := h.status("t")
			return h.jobs.count("t", "") == n && st.Running == nil && (st.Halted != nil || len(st.Pending) == 1)
		})
		st := h.status("t")
		js := st.Jobs["merge"]
		if js.ConsecutiveFailures != n || js.ConsecutiveErrors != 0 || js.FailingSince == nil || !js.FailingSince.Equal(start) {
			t.Fatalf("attempt %d: streak %d (errors %d) since %v, want %d since %v", n, js.ConsecutiveFailures, js.ConsecutiveErrors, js.FailingSince, n, start)
		}
		if got := h.metric("compactord_job_consecutive_failures", "table", "t", "kind", "merge"); got != float64(n) {
			t.Fatalf("attempt %d: compactord_job_consecutive_failures = %v", n, got)
		}
		if st.Halted != nil {
			break
		}
		if js.NextAttempt == nil || !js.NextAttempt.Equal(*st.Pending[0].NotBefore) {
			t.Fatalf("attempt %d: next_attempt %v, pending %+v", n, js.NextAttempt, st.Pending[0])
		}
		if got, want := h.metric("compactord_job_next_run_timestamp_seconds", "table", "t", "kind", "merge"),
			float64(js.NextAttempt.UnixMilli())/1e3; got != want {
			t.Fatalf("attempt %d: next run metric %v, want %v", n, got, want)
		}
		h.idle(3)
		h.clk.Advance(js.NextAttempt.Sub(h.clk.Now()))
	}
	st := h.status("t")
	if st.Halted.Reason != scheduler.ReasonRetryBudget || st.Halted.Kind != "merge" || !strings.Contains(st.Halted.Error, "connection refused") {
		t.Fatalf("halt %+v", st.Halted)
	}
	// Halted once the budget was spent, not before: every earlier attempt
	// was inside it.
	if spent := st.Halted.Since.Sub(start); spent < cfg.Retry.Budget || n < cfg.Retry.QuarantineAfter {
		t.Fatalf("halted after %d attempts and %v, budget %v", n, spent, cfg.Retry.Budget)
	}
	if js := st.Jobs["merge"]; js.NextAttempt != nil {
		t.Fatalf("a halted table plans an attempt at %v", js.NextAttempt)
	}
	want := fmt.Sprintf(`
# HELP compactord_table_halted 1 when the table is quarantined for the reason (corrupt, failing, retry_budget, unsupported_feature: a newer Lance's feature flag holds it back); resume it through the API.
# TYPE compactord_table_halted gauge
compactord_table_halted{reason="corrupt",table="t"} 0
compactord_table_halted{reason="failing",table="t"} 0
compactord_table_halted{reason="retry_budget",table="t"} 1
compactord_table_halted{reason="unsupported_feature",table="t"} 0
# HELP compactord_job_failures_total Failed job attempts (results retry, error and fatal) by table and kind.
# TYPE compactord_job_failures_total counter
compactord_job_failures_total{kind="cleanup",table="t"} 0
compactord_job_failures_total{kind="compact",table="t"} 0
compactord_job_failures_total{kind="index",table="t"} 0
compactord_job_failures_total{kind="merge",table="t"} %d
compactord_job_failures_total{kind="trim",table="t"} 0
`, n)
	if err := testutil.GatherAndCompare(h.reg, strings.NewReader(want), "compactord_table_halted", "compactord_job_failures_total"); err != nil {
		t.Fatal(err)
	}
	if got := h.metric("compactord_job_next_run_timestamp_seconds", "table", "t", "kind", "merge"); got != 0 {
		t.Fatalf("next run of a halted table = %v", got)
	}
	// Resume clears the streak.
	if err := h.s.Resume(context.Background(), "t"); err != nil {
		t.Fatal(err)
	}
	if js := h.status("t").Jobs["merge"]; js.ConsecutiveFailures != 0 || js.FailingSince != nil {
		t.Fatalf("after resume: %+v", js)
	}
}

// The schedule's interval is exported per kind, so that the staleness
// alert needs no recording rule kept in step with the configuration.
func TestScheduleMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.Schedule.Merge = "@every 30s"
		cfg.Schedule.Cleanup = "0 * * * *"
		h := start(t, harnessOpts{bubble: true, cfg: cfg}, specs(t, "t")...)
		h.waitSynced("t")
		want := `
	# HELP compactord_job_schedule_interval_seconds The longest gap between two runs of the kind's schedule (an @every interval, or the widest gap of a cron spec over its next runs); 0 when the schedule is off or this build has no job of the kind.
	# TYPE compactord_job_schedule_interval_seconds gauge
	compactord_job_schedule_interval_seconds{kind="cleanup"} 3600
	compactord_job_schedule_interval_seconds{kind="compact"} 0
	compactord_job_schedule_interval_seconds{kind="index"} 0
	compactord_job_schedule_interval_seconds{kind="merge"} 30
	compactord_job_schedule_interval_seconds{kind="trim"} 0
	`
		if err := testutil.GatherAndCompare(h.reg, strings.NewReader(want), "compactord_job_schedule_interval_seconds"); err != nil {
			t.Fatal(err)
		}
		st := h.status("t")
		next := st.Jobs["merge"].Next
		if next == nil {
			t.Fatal("no next merge")
		}
		if got := h.metric("compactord_job_next_run_timestamp_seconds", "table", "t", "kind", "merge"); got != float64(next.UnixMilli())/1e3 {
			t.Fatalf("next merge metric %v, status %v", got, next)
		}
		if got := h.metric("compactord_job_next_run_timestamp_seconds", "table", "t", "kind", "trim"); got != 0 {
			t.Fatalf("next trim (off) = %v", got)
		}
	})
}
