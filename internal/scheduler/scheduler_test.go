package scheduler_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/scheduler"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/lancewal"
)

func specs(t *testing.T, names ...string) []scheduler.TableSpec {
	root := memRoot(t)
	var out []scheduler.TableSpec
	for _, n := range names {
		u := root + "/" + n
		createTable(t, u)
		out = append(out, scheduler.TableSpec{Name: n, URL: u})
	}
	return out
}

// Pending kinds of one table run one at a time, in the order merge →
// compact → index → trim → cleanup, whatever order they were requested in.
func TestOrderWithinTableOneAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, harnessOpts{bubble: true, cfg: testConfig()}, specs(t, "t1")...)
		h.waitSynced("t1")
		g := newGate()
		h.jobs.setBehave(func(ctx context.Context, c call) (scheduler.Outcome, error) {
			if c.kind == scheduler.KindIndex && c.trigger == scheduler.TriggerManual && g != nil {
				return scheduler.Outcome{}, g.wait(ctx)
			}
			return scheduler.Outcome{}, nil
		})
		if err := h.s.Trigger("t1", scheduler.KindIndex); err != nil {
			t.Fatal(err)
		}
		eventually(t, "index running", func() bool { return h.status("t1").Running != nil })
		for _, k := range []scheduler.Kind{scheduler.KindCleanup, scheduler.KindTrim, scheduler.KindMerge, scheduler.KindCompact} {
			if err := h.s.Trigger("t1", k); err != nil {
				t.Fatal(err)
			}
		}
		if got := len(h.status("t1").Pending); got != 4 {
			t.Fatalf("pending = %d, want 4 while index runs", got)
		}
		g.open()
		eventually(t, "five attempts", func() bool { return h.jobs.count("t1", "") == 5 && h.status("t1").Running == nil })
		var order []scheduler.Kind
		for _, c := range h.jobs.snapshot() {
			order = append(order, c.kind)
		}
		want := []scheduler.Kind{scheduler.KindIndex, scheduler.KindMerge, scheduler.KindCompact, scheduler.KindTrim, scheduler.KindCleanup}
		if !slices.Equal(order, want) {
			t.Fatalf("order %v, want %v", order, want)
		}
		if perTable, _ := h.jobs.maxima(); perTable != 1 {
			t.Fatalf("%d attempts ran at once on one table", perTable)
		}
	})
}

// Schedules come due on the injected clock; the worker limit bounds the
// attempts running at once over all tables.
func TestCronAndWorkerLimit(t *testing.T) {
	cfg := testConfig()
	cfg.Workers = 2
	cfg.Schedule.Merge = "@every 1s"
	cfg.Schedule.Compact = "*/2 * * * * *" // six fields: seconds first
	names := []string{"a", "b", "c", "d", "e"}
	h := start(t, harnessOpts{cfg: cfg}, specs(t, names...)...)
	h.waitSynced(names...)
	release := make(chan struct{})
	h.jobs.setBehave(func(ctx context.Context, c call) (scheduler.Outcome, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return scheduler.Outcome{}, ctx.Err()
		}
		return scheduler.Outcome{}, nil
	})
	h.idle(3)
	h.clk.Advance(2 * time.Second)
	eventually(t, "two workers busy", func() bool {
		_, total := h.jobs.maxima()
		return h.metric("compactord_workers_busy") == 2 && total == 2
	})
	close(release)
	// Every table gets its merge and compact (in that order) in the end.
	eventually(t, "ten attempts", func() bool { return len(h.jobs.snapshot()) >= 10 && h.metric("compactord_workers_busy") == 0 })
	for _, n := range names {
		var ks []scheduler.Kind
		for _, c := range h.jobs.snapshot() {
			if c.table == n {
				ks = append(ks, c.kind)
			}
		}
		if len(ks) < 2 || ks[0] != scheduler.KindMerge || ks[1] != scheduler.KindCompact {
			t.Fatalf("table %s ran %v, want merge then compact", n, ks)
		}
	}
	if _, total := h.jobs.maxima(); total > 2 {
		t.Fatalf("%d attempts at once with workers: 2", total)
	}
}

// A table whose job keeps failing with a non-retryable error is
// quarantined after QuarantineAfter failures; the other table goes on.
func TestQuarantineWhileOthersContinue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.Schedule.Merge = "@every 1s"
		h := start(t, harnessOpts{bubble: true, cfg: cfg}, specs(t, "bad", "good")...)
		h.waitSynced("bad", "good")
		h.jobs.setBehave(func(ctx context.Context, c call) (scheduler.Outcome, error) {
			if c.table == "bad" {
				return scheduler.Outcome{}, errPlain
			}
			return scheduler.Outcome{Version: 1}, nil
		})
		for i := 0; i < 60 && h.status("bad").Halted == nil; i++ {
			h.idle(3)
			h.advance(time.Second)
		}
		st := h.status("bad")
		if st.Halted == nil || st.Halted.Reason != scheduler.ReasonFailing || st.State != "halted" {
			t.Fatalf("bad table not quarantined: %+v", st)
		}
		if got := h.metric("compactord_table_halted", "table", "bad", "reason", "failing"); got != 1 {
			t.Fatalf("halted{bad,failing} = %v", got)
		}
		if got := h.metric("compactord_table_halted", "table", "good", "reason", "failing"); got != 0 {
			t.Fatalf("halted{good,failing} = %v", got)
		}
		if got := h.metric("compactord_job_runs_total", "table", "bad", "kind", "merge", "result", "error"); got != 3 {
			t.Fatalf("runs{bad,error} = %v, want 3", got)
		}
		before, goodBefore := h.jobs.count("bad", ""), h.jobs.count("good", "")
		for range 5 {
			h.idle(3)
			h.advance(time.Second)
		}
		eventually(t, "the good table keeps running", func() bool { return h.jobs.count("good", "") >= goodBefore+4 })
		if got := h.jobs.count("bad", ""); got != before {
			t.Fatalf("the quarantined table ran %d more jobs", got-before)
		}
		// An operator resumes it.
		if err := h.s.Trigger("bad", scheduler.KindMerge); err == nil {
			t.Fatal("a quarantined table accepted a job")
		}
		if err := h.s.Resume(context.Background(), "bad"); err != nil {
			t.Fatal(err)
		}
		if h.metric("compactord_table_halted", "table", "bad", "reason", "failing") != 0 || h.status("bad").Halted != nil {
			t.Fatal("resume did not lift the quarantine")
		}
	})
}

// Retryable errors back off and never quarantine.
func TestRetryableErrorsBackOffAndNeverQuarantine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		h := start(t, harnessOpts{bubble: true, cfg: cfg}, specs(t, "t")...)
		h.waitSynced("t")
		h.jobs.setBehave(func(ctx context.Context, c call) (scheduler.Outcome, error) {
			return scheduler.Outcome{}, &commit.ConflictError{Class: commit.ErrRetryable, Ours: "update", Reason: "injected"}
		})
		if err := h.s.Trigger("t", scheduler.KindMerge); err != nil {
			t.Fatal(err)
		}
		for n := 1; n <= 10; n++ {
			eventually(t, "a retry pending", func() bool {
				// The count first: a status read before it could predate
				// attempt n.
				started := h.jobs.count("t", "")
				st := h.status("t")
				return started == n && len(st.Pending) == 1 && st.Pending[0].NotBefore != nil
			})
			st := h.status("t")
			wait := st.Pending[0].NotBefore.Sub(h.now())
			if wait <= 0 || wait > cfg.Retry.MaxBackoff {
				t.Fatalf("backoff %v out of (0, %v]", wait, cfg.Retry.MaxBackoff)
			}
			h.idle(3)
			h.advance(wait)
		}
		if st := h.status("t"); st.Halted != nil {
			t.Fatalf("retryable errors quarantined the table: %+v", st.Halted)
		}
		if got := h.metric("compactord_job_runs_total", "table", "t", "kind", "merge", "result", "retry"); got < 10 {
			t.Fatalf("runs{retry} = %v", got)
		}
	})
}

// commit.ErrIncompatible (another instance merged first) is skipped, not a
// failure.
func TestIncompatibleIsSkipped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, harnessOpts{bubble: true, cfg: testConfig()}, specs(t, "t")...)
		h.waitSynced("t")
		h.jobs.setBehave(func(ctx context.Context, c call) (scheduler.Outcome, error) {
			return scheduler.Outcome{}, &commit.ConflictError{Class: commit.ErrIncompatible, Ours: "update", Reason: "merged elsewhere"}
		})
		if err := h.s.Trigger("t", scheduler.KindMerge); err != nil {
			t.Fatal(err)
		}
		eventually(t, "skipped", func() bool {
			return h.metric("compactord_job_runs_total", "table", "t", "kind", "merge", "result", "skipped") == 1
		})
		if got := h.metric("compactord_job_failures_total", "table", "t", "kind", "merge"); got != 0 {
			t.Fatalf("failures = %v", got)
		}
	})
}

// An attempt past its time budget is canceled with ErrBudget: a retryable
// failure.
func TestBudgetExceededIsRetryable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.Timeouts.Compact = 10 * time.Second
		h := start(t, harnessOpts{bubble: true, cfg: cfg}, specs(t, "t")...)
		h.waitSynced("t")
		h.jobs.setBehave(func(ctx context.Context, c call) (scheduler.Outcome, error) {
			<-ctx.Done()
			if !errors.Is(context.Cause(ctx), scheduler.ErrBudget) {
				return scheduler.Outcome{}, errors.New("canceled for the wrong reason")
			}
			return scheduler.Outcome{}, ctx.Err()
		})
		if err := h.s.Trigger("t", scheduler.KindCompact); err != nil {
			t.Fatal(err)
		}
		eventually(t, "running", func() bool { return h.status("t").Running != nil })
		h.advance(10 * time.Second)
		eventually(t, "retry recorded", func() bool {
			return h.metric("compactord_job_runs_total", "table", "t", "kind", "compact", "result", "retry") == 1
		})
		if got := h.metric("compactord_job_failures_total", "table", "t", "kind", "compact"); got != 1 {
			t.Fatalf("failures = %v", got)
		}
	})
}

// SIGTERM's drain, in process: no new attempt starts; a running one that
// ignores the grace period is canceled with ErrShutdown, which is not a
// failure; Run returns nil.
func TestDrainCancelsAfterGraceWithoutFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, harnessOpts{bubble: true, cfg: testConfig()}, specs(t, "t")...)
		h.waitSynced("t")
		h.jobs.setBehave(func(ctx context.Context, c call) (scheduler.Outcome, error) {
			<-ctx.Done()
			return scheduler.Outcome{}, ctx.Err()
		})
		if err := h.s.Trigger("t", scheduler.KindMerge); err != nil {
			t.Fatal(err)
		}
		eventually(t, "running", func() bool { return h.status("t").Running != nil })
		h.cancel()
		eventually(t, "draining", func() bool { return !h.s.Ready() })
		if err := h.s.Trigger("t", scheduler.KindCompact); err == nil {
			t.Fatal("a draining scheduler accepted a job")
		}
		select {
		case err := <-h.done:
			t.Fatalf("Run returned %v before the grace period ended", err)
		default:
		}
		if err := h.stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if got := h.metric("compactord_job_runs_total", "table", "t", "kind", "merge", "result", "canceled"); got != 1 {
			t.Fatalf("runs{canceled} = %v", got)
		}
		if got := h.metric("compactord_job_failures_total", "table", "t", "kind", "merge"); got != 0 {
			t.Fatalf("a shutdown counted as a failure: %v", got)
		}
		if h.jobs.count("t", scheduler.KindCompact) != 0 {
			t.Fatal("a job started during the drain")
		}
	})
}

// A running attempt that finishes within the grace period completes.
func TestDrainLetsRunningJobFinish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, harnessOpts{bubble: true, cfg: testConfig()}, specs(t, "t")...)
		h.waitSynced("t")
		g := newGate()
		h.jobs.setBehave(func(ctx context.Context, c call) (scheduler.Outcome, error) {
			<-g.ch // ignores ctx: finishes when released
			return scheduler.Outcome{Version: 7}, nil
		})
		if err := h.s.Trigger("t", scheduler.KindMerge); err != nil {
			t.Fatal(err)
		}
		eventually(t, "running", func() bool { return h.status("t").Running != nil })
		h.cancel()
		eventually(t, "draining", func() bool { return !h.s.Ready() })
		g.open()
		if err := <-h.done; err != nil {
			t.Fatal(err)
		}
		h.done <- nil
		if got := h.metric("compactord_job_runs_total", "table", "t", "kind", "merge", "result", "success"); got != 1 {
			t.Fatalf("runs{success} = %v", got)
		}
	})
}

// Removing a table cancels its attempt with ErrTableRemoved: not a
// failure, and its series disappear.
func TestRemovedTableCancelsItsJob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sp := specs(t, "keep", "gone")
		h := start(t, harnessOpts{bubble: true, cfg: testConfig()}, sp...)
		h.waitSynced("keep", "gone")
		causes := make(chan error, 1)
		h.jobs.setBehave(func(ctx context.Context, c call) (scheduler.Outcome, error) {
			if c.table != "gone" {
				return scheduler.Outcome{}, nil
			}
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return scheduler.Outcome{}, ctx.Err()
		})
		if err := h.s.Trigger("gone", scheduler.KindTrim); err != nil {
			t.Fatal(err)
		}
		eventually(t, "running", func() bool { return h.status("gone").Running != nil })
		if err := h.s.SetTables(sp[:1]); err != nil {
			t.Fatal(err)
		}
		if c := <-causes; !errors.Is(c, scheduler.ErrTableRemoved) {
			t.Fatalf("cause %v", c)
		}
		if _, ok := h.s.Table("gone"); ok {
			t.Fatal("removed table still listed")
		}
		eventually(t, "worker freed", func() bool { return h.metric("compactord_workers_busy") == 0 })
		if got := h.metric("compactord_tables"); got != 1 {
			t.Fatalf("tables = %v", got)
		}
	})
}

// A fatal error stops Run with the error.
func TestFatalStopsRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, harnessOpts{bubble: true, cfg: testConfig()}, specs(t, "t")...)
		h.waitSynced("t")
		h.jobs.setBehave(func(ctx context.Context, c call) (scheduler.Outcome, error) {
			return scheduler.Outcome{}, scheduler.Fatal(errors.New("invariant broken"))
		})
		if err := h.s.Trigger("t", scheduler.KindIndex); err != nil {
			t.Fatal(err)
		}
		err := <-h.done
		h.done <- err
		if err == nil || !errors.Is(err, errors.Unwrap(errors.Unwrap(err))) {
			t.Fatalf("Run returned %v", err)
		}
	})
}

// A table whose manifest is corrupt is quarantined (reason corrupt) by the
// syncs, visible in the status and the metrics, while the other table keeps
// being served.
func TestCorruptManifestQuarantined(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.Schedule.Merge = "@every 1s"
		sp := specs(t, "corrupt", "fine")
		h := start(t, harnessOpts{bubble: true, cfg: cfg}, sp...)
		h.waitSynced("corrupt", "fine")
		b, err := storage.Open(context.Background(), sp[0].URL)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		// Version 2 with garbage: the commit's put-if-absent, then a torn body.
		if err := b.PutIfAbsent(context.Background(), meta.ManifestKey(meta.NamingV2, 2), []byte("not a manifest")); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 10 && h.status("corrupt").Halted == nil; i++ {
			h.idle(3)
			h.advance(cfg.SyncInterval)
		}
		st := h.status("corrupt")
		if st.Halted == nil || st.Halted.Reason != scheduler.ReasonCorrupt || st.Halted.Kind != "sync" {
			t.Fatalf("not quarantined as corrupt: %+v", st)
		}
		if got := h.metric("compactord_table_halted", "table", "corrupt", "reason", "corrupt"); got != 1 {
			t.Fatalf("halted{corrupt} = %v", got)
		}
		n := h.jobs.count("fine", "")
		for range 3 {
			h.idle(3)
			h.advance(time.Second)
		}
		eventually(t, "the other table served", func() bool { return h.jobs.count("fine", "") >= n+2 })
	})
}

// Reconfigure changes schedules without a restart.
func TestReconfigureSchedules(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, harnessOpts{bubble: true, cfg: testConfig()}, specs(t, "t")...)
		h.waitSynced("t")
		h.idle(2) // no schedule: the main loop waits without a timer
		h.advance(5 * time.Second)
		h.idle(2)
		if n := len(h.jobs.snapshot()); n != 0 {
			t.Fatalf("%d jobs ran with every schedule off", n)
		}
		cfg := testConfig()
		cfg.Schedule.Trim = "@every 2s"
		if err := h.s.Reconfigure(cfg); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			h.idle(3)
			h.advance(2 * time.Second)
		}
		eventually(t, "trim runs", func() bool { return h.jobs.count("t", scheduler.KindTrim) >= 2 })
		bad := testConfig()
		bad.Schedule.Trim = "every two seconds"
		if err := h.s.Reconfigure(bad); err == nil {
			t.Fatal("a bad cron spec was accepted")
		}
		if got := h.status("t").Jobs["trim"].Schedule; got != "@every 2s" {
			t.Fatalf("schedule after a rejected reload = %q", got)
		}
	})
}

// Pause stops scheduling; manual triggers are refused until resume.
func TestPauseResume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.Schedule.Merge = "@every 1s"
		h := start(t, harnessOpts{bubble: true, cfg: cfg}, specs(t, "t")...)
		h.waitSynced("t")
		if err := h.s.Pause(context.Background(), "t", "test"); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			h.idle(3)
			h.advance(time.Second)
		}
		h.idle(3)
		if n := h.jobs.count("t", ""); n != 0 {
			t.Fatalf("a paused table ran %d jobs", n)
		}
		var ae *scheduler.APIError
		if err := h.s.Trigger("t", scheduler.KindMerge); !errors.As(err, &ae) || ae.Status != 409 {
			t.Fatalf("trigger on a paused table: %v", err)
		}
		if got := h.metric("compactord_table_paused", "table", "t"); got != 1 {
			t.Fatalf("paused = %v", got)
		}
		if err := h.s.Resume(context.Background(), "t"); err != nil {
			t.Fatal(err)
		}
		h.advance(time.Second)
		eventually(t, "runs after resume", func() bool { return h.jobs.count("t", "") >= 1 })
		if err := h.s.Pause(context.Background(), "nope", "test"); !errors.As(err, &ae) || ae.Status != 404 {
			t.Fatalf("pause of an unknown table: %v", err)
		}
	})
}

// A job that panics fails its attempt, not the daemon.
func TestPanickingJobIsAnError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, harnessOpts{bubble: true, cfg: testConfig()}, specs(t, "t")...)
		h.waitSynced("t")
		h.jobs.setBehave(func(ctx context.Context, c call) (scheduler.Outcome, error) { panic("boom") })
		if err := h.s.Trigger("t", scheduler.KindCleanup); err != nil {
			t.Fatal(err)
		}
		eventually(t, "error recorded", func() bool {
			return h.metric("compactord_job_runs_total", "table", "t", "kind", "cleanup", "result", "error") == 1
		})
		if st := h.status("t"); st.Jobs["cleanup"].LastRun == nil || st.Jobs["cleanup"].LastRun.Error != "job panicked: boom" {
			t.Fatalf("last run %+v", st.Jobs["cleanup"].LastRun)
		}
	})
}

// The per-table series alerts need at 0 exist from the moment the table is
// added; the others are created by their first value (an idle table of
// many must not cost a hundred series).
func TestSeriesPreCreated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, harnessOpts{bubble: true, cfg: testConfig()}, specs(t, "t")...)
		h.waitSynced("t")
		want := `
	# HELP compactord_table_halted 1 when the table is quarantined for the reason (corrupt, failing, retry_budget, unsupported_feature: a newer Lance's feature flag holds it back); resume it through the API.
	# TYPE compactord_table_halted gauge
	compactord_table_halted{reason="corrupt",table="t"} 0
	compactord_table_halted{reason="failing",table="t"} 0
	compactord_table_halted{reason="retry_budget",table="t"} 0
	compactord_table_halted{reason="unsupported_feature",table="t"} 0
	# HELP compactord_job_failures_total Failed job attempts (results retry, error and fatal) by table and kind.
	# TYPE compactord_job_failures_total counter
	compactord_job_failures_total{kind="cleanup",table="t"} 0
	compactord_job_failures_total{kind="compact",table="t"} 0
	compactord_job_failures_total{kind="index",table="t"} 0
	compactord_job_failures_total{kind="merge",table="t"} 0
	compactord_job_failures_total{kind="trim",table="t"} 0
	# HELP compactord_lease_owned 1 when this instance serves the table: assigned to it by membership (any instance without) and no other instance's lease on it live; always 1 with leasing off.
	# TYPE compactord_lease_owned gauge
	compactord_lease_owned{table="t"} 1
	`
		if err := testutil.GatherAndCompare(h.reg, strings.NewReader(want),
			"compactord_table_halted", "compactord_job_failures_total", "compactord_lease_owned"); err != nil {
			t.Fatal(err)
		}
		// The staleness alert needs a kind that never succeeded at 0, and
		// when the table was first watched, from the first sync on.
		for _, k := range scheduler.Kinds {
			if got, ok := h.gauge("compactord_job_last_success_timestamp_seconds", "table", "t", "kind", string(k)); !ok || got != 0 {
				t.Errorf("last success of %s: %v (exists %v), want 0", k, got, ok)
			}
		}
		if got, _ := h.gauge("compactord_table_first_seen_timestamp_seconds", "table", "t"); got <= 0 {
			t.Errorf("first seen %v", got)
		}
		mfs, err := h.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			switch mf.GetName() {
			case "compactord_job_runs_total", "compactord_job_duration_seconds",
				"compactord_job_fragments_in_total", "compactord_job_fragments_out_total":
				for _, m := range mf.GetMetric() {
					for _, lp := range m.GetLabel() {
						if lp.GetName() == "kind" && lp.GetValue() == "index" {
							t.Errorf("%s%v exists before any index attempt", mf.GetName(), m.GetLabel())
						}
					}
				}
			}
		}
	})
}

// A scheduled run on a table that did not change since the kind last found
// nothing to do is elided: no attempt, no object-store request, but the
// kind counts as up to date. A change to the table brings the runs back;
// cleanup (clock-driven) is never elided.
func TestUnchangedTableElidesScheduledJobs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.Schedule.Merge = "@every 1s"
		cfg.Schedule.Cleanup = "@every 1s"
		sp := specs(t, "t")
		h := start(t, harnessOpts{bubble: true, cfg: cfg}, sp...)
		h.waitSynced("t")
		h.jobs.setBehave(func(ctx context.Context, c call) (scheduler.Outcome, error) {
			return scheduler.Outcome{Summary: "nothing to do"}, nil
		})
		advance := func(n int) { h.tick(n, 3) }
		advance(1)
		eventually(t, "first merge", func() bool { return h.jobs.count("t", scheduler.KindMerge) == 1 })
		advance(3)
		if n := h.jobs.count("t", scheduler.KindMerge); n != 1 {
			t.Fatalf("%d merges on an unchanged table", n)
		}
		if n := h.jobs.count("t", scheduler.KindCleanup); n < 3 {
			t.Fatalf("cleanup ran %d times; it is never elided", n)
		}
		if got := h.metric("compactord_job_runs_total", "table", "t", "kind", "merge", "result", "skipped"); got < 2 {
			t.Fatalf("elided runs not counted: %v", got)
		}
		st := h.status("t")
		if up := st.Jobs["merge"].UpToDate; up == nil || !up.Equal(h.now()) {
			t.Fatalf("up_to_date %v, now %v", up, h.now())
		}
		if got := h.metric("compactord_job_last_success_timestamp_seconds", "table", "t", "kind", "merge"); got != float64(h.now().UnixMilli())/1e3 {
			t.Fatalf("last success %v", got)
		}
		// A new version: the next scheduled merge runs.
		tb, err := lancewal.OpenTable(context.Background(), sp[0].URL)
		if err != nil {
			t.Fatal(err)
		}
		defer tb.Close()
		if err := tb.CreateIndex(context.Background(), "id_idx", "id", lancewal.BTree); err != nil {
			t.Fatal(err)
		}
		h.advance(cfg.SyncInterval)
		eventually(t, "the change seen", func() bool { st := h.status("t"); return st.Snapshot != nil && st.Snapshot.Version == 2 })
		advance(1)
		eventually(t, "merge again", func() bool { return h.jobs.count("t", scheduler.KindMerge) == 2 })
	})
}

// A run that reports Waiting (trim holding SSTables for the reader grace)
// is not elided: the table does not change when the grace passes, so the
// next scheduled run must happen. Once it reports nothing waiting, eliding
// resumes.
func TestWaitingOutcomeIsNotElided(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.Schedule.Merge = "@every 1s"
		cfg.Schedule.Trim = "@every 1s"
		h := start(t, harnessOpts{bubble: true, cfg: cfg}, specs(t, "t")...)
		h.waitSynced("t")
		var waiting atomic.Bool
		waiting.Store(true)
		h.jobs.setBehave(func(ctx context.Context, c call) (scheduler.Outcome, error) {
			return scheduler.Outcome{Summary: "nothing to do", Waiting: c.kind == scheduler.KindTrim && waiting.Load()}, nil
		})
		advance := func(n int) { h.tick(n, 3) }
		advance(4)
		eventually(t, "trims", func() bool { return h.jobs.count("t", scheduler.KindTrim) >= 4 })
		if n := h.jobs.count("t", scheduler.KindMerge); n != 1 {
			t.Fatalf("%d merges on an unchanged table", n)
		}
		waiting.Store(false)
		advance(1)
		n := h.jobs.count("t", scheduler.KindTrim)
		advance(3)
		if m := h.jobs.count("t", scheduler.KindTrim); m != n {
			t.Fatalf("trim ran %d more times after it stopped waiting", m-n)
		}
	})
}

// A table's own schedule (TableSpec.Schedule, the daemon's per-table
// policy) wins over the configuration's kind by kind; "off" turns a kind
// off for that table only; SetTables changes it in place; the interval
// gauge allows for the widest.
func TestTableOwnSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.Schedule.Trim = "@every 10s"
		sp := specs(t, "fast", "never", "slow")
		sp[0].Schedule.Trim = "@every 2s"
		sp[1].Schedule.Trim = "off"
		sp[2].Schedule.Trim = "@every 1h"
		h := start(t, harnessOpts{bubble: true, cfg: cfg}, sp...)
		h.waitSynced("fast", "never", "slow")
		if f, n := h.status("fast").Jobs["trim"].Schedule, h.status("never").Jobs["trim"].Schedule; f != "@every 2s" || n != "off" {
			t.Fatalf("trim schedules: fast %q, never %q", f, n)
		}
		for range 3 {
			h.idle(3)
			h.advance(2 * time.Second)
		}
		h.idle(3)
		if n := h.jobs.count("fast", scheduler.KindTrim); n < 1 {
			t.Fatal("the table's own 2s schedule did not run within 6s")
		}
		if n := h.jobs.count("never", scheduler.KindTrim); n != 0 {
			t.Fatalf("a kind the table turned off ran %d times", n)
		}
		if iv := h.metric("compactord_job_schedule_interval_seconds", "kind", "trim"); iv != 3600 {
			t.Fatalf("trim interval gauge %v, want the widest, 3600", iv)
		}
		// Back to the configuration's schedule, without removing the table.
		sp[1].Schedule.Trim = ""
		if err := h.s.SetTables(sp); err != nil {
			t.Fatal(err)
		}
		if got := h.status("never").Jobs["trim"].Schedule; got != "@every 10s" {
			t.Fatalf("schedule after SetTables %q", got)
		}
		for range 6 {
			h.idle(3)
			h.advance(2 * time.Second)
		}
		eventually(t, "the configured schedule runs", func() bool { return h.jobs.count("never", scheduler.KindTrim) >= 1 })
		bad := slices.Clone(sp)
		bad[0].Schedule.Trim = "every so often"
		if err := h.s.SetTables(bad); err == nil {
			t.Fatal("a bad table schedule was accepted")
		}
		if got := h.status("fast").Jobs["trim"].Schedule; got != "@every 2s" {
			t.Fatalf("schedule after a refused SetTables %q", got)
		}
	})
}
