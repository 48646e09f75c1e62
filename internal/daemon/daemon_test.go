package daemon_test

import (
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/daemon"
	"github.com/compactord/compactord/internal/scheduler"
)

// The startup line counts the tables the scheduler runs (the demo table
// too), and an attempt that finds no work is "skipped", as the docs define
// it, with log fields that say what they are: its start at info, its end
// at debug (most attempts of a quiet fleet find nothing to do).
func TestStartupLineAndNothingToDo(t *testing.T) {
	root := memRoot(t)
	createTable(t, root+"/t1")
	cfg := baseConfig()
	cfg.Tables = []daemon.TableConfig{{URL: root + "/t1"}}
	cfg.Demo.Enabled = true
	cfg.Demo.URL = root + "/demo"
	core, logs := observer.New(zap.DebugLevel)
	r := run(t, cfg, daemon.Deps{Logger: zap.New(core)})
	eventually(t, "startup line", func() bool { return logs.FilterMessage("compactord running").Len() == 1 })
	line := logs.FilterMessage("compactord running").All()[0].ContextMap()
	if line["tables"] != int64(2) || line["configured_tables"] != int64(1) || line["demo"] != true {
		t.Fatalf("startup line %v", line)
	}
	s := r.d.Scheduler()
	eventually(t, "t1 synced", func() bool { st, _ := s.Table("t1"); return st.Synced })
	if err := s.Trigger("t1", scheduler.KindCompact); err != nil {
		t.Fatal(err)
	}
	eventually(t, "compact ran", func() bool { st, _ := s.Table("t1"); return st.Jobs["compact"].LastRun != nil })
	st, _ := s.Table("t1")
	if lr := st.Jobs["compact"].LastRun; lr.Result != scheduler.ClassSkipped || lr.Summary != "nothing to compact at version 1" {
		t.Fatalf("compact on an empty table: %+v", lr)
	}
	var fin map[string]any
	for _, e := range logs.FilterMessage("job finished").All() {
		if m := e.ContextMap(); m["table"] == "t1" && m["kind"] == "compact" {
			fin = m
			if e.Level != zap.DebugLevel {
				t.Errorf("a skipped job's end is logged at %s, want debug", e.Level)
			}
		}
	}
	if fin == nil {
		t.Fatal("no job finished line for t1's compact")
	}
	started := logs.FilterMessage("job started").FilterField(zap.String("table", "t1")).FilterField(zap.String("kind", "compact")).All()
	if len(started) != 1 || started[0].Level != zap.InfoLevel || started[0].ContextMap()["trigger"] != "manual" {
		t.Fatalf("job started lines %+v, want one at info with the trigger", started)
	}
	if _, ok := fin["job_id"].(uint64); !ok || fin["result"] != "skipped" || fin["attempt"] != nil || fin["duration"] != nil {
		t.Fatalf("job finished fields %v", fin)
	}
	if _, ok := fin["duration_seconds"].(float64); !ok {
		t.Fatalf("duration_seconds %T in %v", fin["duration_seconds"], fin)
	}
}

// A daemon restarted more often than its cleanup schedule still cleans up
// on time, and its last success is exported from the start: both come
// from the job state the daemon keeps in the table's bucket. Before, each
// start put cleanup an hour away and the last-success series did not
// exist until a success, so neither the cleanup nor the alert came.
func TestCleanupScheduleSurvivesRestarts(t *testing.T) {
	url := memRoot(t) + "/t"
	createTable(t, url)
	t0 := time.Date(2026, 3, 4, 5, 0, 0, 0, time.UTC)
	fc := clock.NewFake(t0)
	cfg := baseConfig()
	cfg.Tables = []daemon.TableConfig{{URL: url}}
	cfg.Scheduler.Schedule.Cleanup = "@every 1h"
	cfg.Scheduler.Timeouts.Default = 1000 * time.Hour // budgets run on the fake clock
	start := func() (*running, *scheduler.Scheduler) {
		r := run(t, cfg, daemon.Deps{Clock: fc})
		s := r.d.Scheduler()
		eventually(t, "the job state read", func() bool {
			v, _ := gauge(t, r.d, "compactord_table_first_seen_timestamp_seconds", "table", "t")
			return v == float64(t0.Unix())
		})
		return r, s
	}
	lastCleanup := func(s *scheduler.Scheduler) *scheduler.JobRecord {
		st, _ := s.Table("t")
		return st.Jobs["cleanup"].LastRun
	}

	r, s := start()
	if v, ok := gauge(t, r.d, "compactord_job_last_success_timestamp_seconds", "table", "t", "kind", "cleanup"); !ok || v != 0 {
		t.Fatalf("last success of a cleanup that never ran: %v (present %v), want 0", v, ok)
	}
	fc.Advance(50 * time.Minute)
	if lr := lastCleanup(s); lr != nil {
		t.Fatalf("cleanup ran before its hour: %+v", lr)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}

	// Restarted 50 minutes in: the cleanup comes an hour after the table
	// was first watched, 10 minutes from now.
	r, s = start()
	fc.Advance(t0.Add(time.Hour).Sub(fc.Now()))
	eventually(t, "the cleanup on the hour", func() bool { lr := lastCleanup(s); return lr != nil && lr.Result == scheduler.ClassSkipped })
	ended := lastCleanup(s).Finished
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}

	// Restarted again: the last success is exported before any attempt.
	r, s = start()
	eventually(t, "the last success from the bucket", func() bool {
		v, _ := gauge(t, r.d, "compactord_job_last_success_timestamp_seconds", "table", "t", "kind", "cleanup")
		return v == float64(ended.UnixMilli())/1e3
	})
	if lr := lastCleanup(s); lr != nil {
		t.Fatalf("cleanup ran again at start, less than an hour after the last: %+v", lr)
	}
}
