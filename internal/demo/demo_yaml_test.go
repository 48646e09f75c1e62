package demo_test

import (
	"context"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/compactord/compactord/internal/daemon"
	"github.com/compactord/compactord/internal/demo"
	"github.com/compactord/compactord/internal/scheduler"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

var trimmed = regexp.MustCompile(`deleted (\d+) generations`)

// TestMakeRunOnLance is `make run`: the daemon with configs/demo.yaml (only
// its listen address and the demo directory changed). Within a minute every
// demo table has had a merge, an index catch-up, a trim that deleted
// generations and (where this build has the job) a compaction; after the
// daemon drains, LanceDB opens every demo table and its LSM view reads the
// demo's model.
func TestMakeRunOnLance(t *testing.T) {
	lancedb.Require(t)
	dir := t.TempDir()
	cfg, err := daemon.Load("../../configs/demo.yaml", daemon.Overrides{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Demo.URL = (&url.URL{Scheme: "file", Path: dir}).String()
	// The demo wired in as the CLI's run command wires it.
	d, err := daemon.New(cfg, daemon.Deps{Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)), Demo: demo.Start})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()

	type seen struct{ merge, index, trim, compact bool }
	got := map[string]*seen{}
	for _, n := range cfg.Demo.Tables {
		got[n] = &seen{}
	}
	start := time.Now()
	deadline := start.Add(time.Minute)
	compactAvailable := false
	for {
		all := true
		for name, s := range got {
			st, ok := d.Scheduler().Table(name)
			if !ok {
				all = false
				continue
			}
			compactAvailable = st.Jobs[string(scheduler.KindCompact)].Available
			for _, r := range st.Recent {
				if r.Result != scheduler.ClassSuccess {
					continue
				}
				switch r.Kind {
				case scheduler.KindMerge:
					s.merge = true
				case scheduler.KindIndex:
					s.index = s.index || strings.Contains(r.Summary, "catch-up")
				case scheduler.KindTrim:
					if m := trimmed.FindStringSubmatch(r.Summary); m != nil {
						n, _ := strconv.Atoi(m[1])
						s.trim = s.trim || n > 0
					}
				case scheduler.KindCompact:
					s.compact = true
				}
			}
			all = all && s.merge && s.index && s.trim && (s.compact || !compactAvailable)
		}
		if all {
			break
		}
		if time.Now().After(deadline) {
			for n, s := range got {
				t.Errorf("table %s after a minute: %+v (compact job available: %v)", n, *s, compactAvailable)
			}
			t.FailNow()
		}
		select {
		case err := <-done:
			t.Fatalf("the daemon stopped: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Logf("merges, catch-ups, trims and compactions on every demo table after %.1f s", time.Since(start).Seconds())
	w, _ := d.Demo().(*demo.Workload)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("daemon: %v", err)
	}
	done <- nil
	if w == nil {
		t.Fatal("the daemon ran no demo workload")
	}
	if n := w.C.Errors.Load(); n != 0 {
		t.Errorf("%d demo errors (%s)", n, counters(w))
	}
	for _, name := range cfg.Demo.Tables {
		res := lancedb.MustRun(t, lancedb.Program{URI: dir, Table: name, Steps: []lancedb.Step{lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(true)})}})
		rows, err := res.Rows(0)
		if err != nil {
			t.Fatal(err)
		}
		if d := lancedb.DiffByID(readModel(t, rows), w.Model(name)); d != "" {
			t.Fatalf("table %s: LanceDB's LSM view after make run differs from the demo's model:\n%s", name, d)
		}
	}
}
