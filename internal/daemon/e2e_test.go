package daemon_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/compact"
	"github.com/compactord/compactord/internal/daemon"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/ops"
	"github.com/compactord/compactord/internal/scheduler"
	"github.com/compactord/compactord/internal/scheduler/clock"
	"github.com/compactord/compactord/internal/table"
)

// pendingWork builds a table with every kind of pending work: small
// fragments (one deletion-heavy), a maintained index, and three flushed
// generations per shard of upserts and tombstones. It returns the keys that
// must be live once everything is merged.
func pendingWork(t *testing.T, url string) (*ops.Table, map[int64]bool) {
	t.Helper()
	ctx := context.Background()
	tb := createTable(t, url)
	live := map[int64]bool{}
	for f := range 4 {
		var rows []table.Row
		for i := range 50 {
			id := int64(1_000_000 + f*50 + i)
			rows = append(rows, table.Row{id, "base", float64(i)})
			live[id] = true
		}
		if _, err := tb.Append(ctx, rows); err != nil {
			t.Fatal(err)
		}
	}
	var dels []table.Row
	for i := range 20 {
		id := int64(1_000_000 + i)
		dels = append(dels, table.Row{id, nil, nil})
		delete(live, id)
	}
	if _, _, err := tb.Delete(ctx, nil, ops.DeleteSpec{Keys: dels}); err != nil {
		t.Fatal(err)
	}
	if _, err := index.Create(ctx, tb, index.Spec{Name: "id_idx", Column: "id", Type: index.TypeBTree}, index.BuildConfig{}); err != nil {
		t.Fatal(err)
	}
	shards := []string{"s0", "s1"}
	if _, err := memwal.Configure(ctx, tb, shards, []string{"id_idx"}); err != nil {
		t.Fatal(err)
	}
	head, err := table.ReadLatest(ctx, tb.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for si, s := range shards {
		w, err := memwal.NewWriter(memwal.Config{Shard: s, Schema: head.Schema}, tb.Bucket)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Claim(ctx); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			var recs []memwal.Record
			for range 40 {
				id := int64(rng.IntN(100)*2 + si) // each key stays in one shard
				if rng.IntN(4) == 0 {
					recs = append(recs, memwal.Record{Op: memwal.Delete, Row: table.Row{id, nil, nil}})
					delete(live, id)
				} else {
					recs = append(recs, memwal.Record{Op: memwal.Upsert, Row: table.Row{id, "wal", 1.0}})
					live[id] = true
				}
			}
			if _, err := w.Append(ctx, recs); err != nil {
				t.Fatal(err)
			}
			if _, err := w.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	return tb, live
}

// The acceptance configuration of issue 6 runs a table with pending work
// to a fully merged, compacted, caught-up and trimmed state with no manual
// command, through the real jobs.
func TestRunsTableToSteadyState(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "table")
	url := "file://" + dir
	tb, live := pendingWork(t, url)
	yaml := fmt.Sprintf("http:\n  listen: 127.0.0.1:0\ntables:\n  - url: %s\nschedule:\n"+
		"  merge: \"@every 1s\"\n  compact: \"@every 1s\"\n  index: \"@every 1s\"\n  trim: \"@every 1s\"\n  cleanup: \"@every 1h\"\n", url)
	cfg, err := daemon.Parse([]byte(yaml), "acceptance.yaml", daemon.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.Now())
	r := run(t, cfg, daemon.Deps{Clock: clk})
	s := r.d.Scheduler()
	eventually(t, "synced and owned", func() bool { st, _ := s.Table("table"); return st.Synced && st.Owned })

	var steadyAt time.Time
	steady := func() bool {
		st, _ := s.Table("table")
		snap := st.Snapshot
		if snap == nil || st.Running != nil || snap.PendingGenerations != 0 || len(snap.FRI) != 0 || len(snap.Shards) != 2 {
			return false
		}
		for _, sh := range snap.Shards {
			if sh.Flushed != 3 || sh.Merged != 3 || sh.CaughtUp != 3 ||
				sh.Retained[scheduler.RetainedNotMerged] != 0 || sh.Retained[scheduler.RetainedIndexLag] != 0 {
				return false
			}
		}
		m, err := table.ReadLatest(context.Background(), tb.Bucket)
		if err != nil {
			return false
		}
		jobs, err := compact.Plan(m, compact.DefaultConfig().Env(time.Now(), nil))
		return err == nil && len(jobs) == 0
	}
	for i := 0; i < 120; i++ {
		if within(steady) {
			steadyAt = clk.Now()
			break
		}
		clk.Advance(time.Second)
	}
	if steadyAt.IsZero() {
		st, _ := s.Table("table")
		t.Fatalf("not steady: %+v\nsnapshot %+v\nrecent %+v", st, st.Snapshot, st.Recent)
	}
	// Trim runs over the final state too (its WAL and SSTable pass).
	trimmed := func() bool {
		st, _ := s.Table("table")
		lr := st.Jobs["trim"].LastRun
		return lr != nil && lr.Result == scheduler.ClassSuccess && !lr.Started.Before(steadyAt)
	}
	for i := 0; i < 10 && !within(trimmed); i++ {
		clk.Advance(time.Second)
	}
	if !trimmed() {
		t.Fatal("trim did not run over the steady state")
	}
	// Fully trimmed: once the version before the last merge is older than
	// the default reader grace, no SSTable is left, for any reason. The
	// hourly cleanup never ran (older versions are still retained for time
	// travel of the base table); they do not pin SSTables.
	gone := func() bool {
		st, _ := s.Table("table")
		if st.Snapshot == nil || st.Running != nil {
			return false
		}
		for _, sh := range st.Snapshot.Shards {
			if sh.SSTables != 0 || sh.SSTableBytes != 0 || sh.Trimmed != 3 {
				return false
			}
		}
		return true
	}
	for i := 0; i < 30 && !within(gone); i++ {
		clk.Advance(5 * time.Second)
	}
	if !gone() {
		st, _ := s.Table("table")
		t.Fatalf("SSTables left after the reader grace: %+v\nlast trim %+v", st.Snapshot.Shards, st.Jobs["trim"].LastRun)
	}
	if st, _ := s.Table("table"); st.Jobs["cleanup"].LastRun != nil && st.Jobs["cleanup"].LastRun.Started.After(steadyAt) {
		t.Fatalf("cleanup ran (%+v); the test is meant to show trim alone gets there", st.Jobs["cleanup"].LastRun)
	}
	st, _ := s.Table("table")
	for _, k := range []string{"merge", "compact", "index", "trim"} {
		if st.Jobs[k].LastRun == nil || st.Jobs[k].ConsecutiveFailures != 0 {
			t.Errorf("%s: %+v", k, st.Jobs[k])
		}
	}
	// Every covered WAL entry but the newest per shard is gone (trim keeps
	// the newest, so a stale writer collides with it).
	for _, sh := range []string{"s0", "s1"} {
		pos, err := memwal.ListWALPositions(context.Background(), tb.Bucket, sh)
		if err != nil {
			t.Fatal(err)
		}
		if len(pos) > 2 {
			t.Errorf("shard %s keeps %d WAL entries", sh, len(pos))
		}
	}
	// The table reads as the model says.
	var got []int64
	if _, err := tb.Scan(context.Background(), 0, func(row table.Row) error {
		got = append(got, row[0].(int64))
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	var want []int64
	for id := range live {
		want = append(want, id)
	}
	sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
	sort.Slice(want, func(i, j int) bool { return want[i] < want[j] })
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("table holds %d keys, the model %d", len(got), len(want))
	}
}

// The status page, loaded in headless Chromium, shows the table, its
// shards' timelines, the FRI section and the recent jobs.
func TestStatusPageInChromium(t *testing.T) {
	browser := ""
	for _, b := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(b); err == nil {
			browser = p
			break
		}
	}
	if browser == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium not installed (apt-get install -y chromium)")
		}
		t.Skip("chromium not installed (apt-get install -y chromium)")
	}
	dir := t.TempDir()
	url := "file://" + filepath.Join(dir, "orders")
	pendingWork(t, url)
	// Two more tables without work, for the fleet summary and the filter.
	createTable(t, "file://"+filepath.Join(dir, "billing"))
	createTable(t, "file://"+filepath.Join(dir, "archive"))
	cfg := baseConfig()
	cfg.Tables = []daemon.TableConfig{{URL: url}, {URL: "file://" + filepath.Join(dir, "billing")}, {URL: "file://" + filepath.Join(dir, "archive")}}
	r := run(t, cfg, daemon.Deps{Version: "page-test"})
	s := r.d.Scheduler()
	eventually(t, "synced", func() bool { st, _ := s.Table("orders"); return st.Synced })
	if err := s.Trigger("orders", scheduler.KindMerge); err != nil {
		t.Fatal(err)
	}
	eventually(t, "merged", func() bool {
		st, _ := s.Table("orders")
		return st.Jobs["merge"].LastRun != nil && st.Running == nil
	})
	st, _ := s.Table("orders")
	if lr := st.Jobs["merge"].LastRun; lr.Result != scheduler.ClassSuccess {
		t.Fatalf("merge: %+v", lr)
	}

	eventually(t, "all synced", func() bool {
		for _, n := range []string{"billing", "archive"} {
			if st, _ := s.Table(n); !st.Synced {
				return false
			}
		}
		return true
	})
	load := func(path string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
			"--user-data-dir="+t.TempDir(), "--dump-dom", r.base+path)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("chromium: %v\n%s", err, stderr.String())
		}
		return string(out)
	}
	dom := load("/")
	// The fleet summary: tables by state, and every table in a row, the
	// worst lag first (orders: its index has not caught up).
	if !strings.Contains(dom, "3 tables:") || !strings.Contains(dom, `href="/?state=ok">3 ok</a>`) {
		t.Errorf("no fleet summary by state")
	}
	rows := regexp.MustCompile(`<tr class="fleet-row"><td><a href="#table-([a-z]+)">`).FindAllStringSubmatch(dom, -1)
	var order []string
	for _, m := range rows {
		order = append(order, m[1])
	}
	if strings.Join(order, ",") != "orders,archive,billing" {
		t.Errorf("fleet rows %v, want orders (lagging) first, then by name", order)
	}
	if !strings.Contains(dom, "3 of 3 tables match; 3 shown in full below.") {
		t.Errorf("no match count")
	}
	// The filter, by name and by state.
	byName := load("/?q=BILL")
	if !strings.Contains(byName, `id="table-billing"`) || strings.Contains(byName, `id="table-orders"`) ||
		!strings.Contains(byName, "1 of 3 tables match") || !strings.Contains(byName, `value="BILL"`) {
		t.Errorf("filter by name: %s", byName)
	}
	byState := load("/?state=halted")
	if strings.Contains(byState, `class="fleet-row"`) || !strings.Contains(byState, "0 of 3 tables match") ||
		!strings.Contains(byState, "No tables match the filter.") || !strings.Contains(byState, `<option value="halted" selected="">`) {
		t.Errorf("filter by state: %s", byState)
	}
	for _, want := range []string{
		"<title>compactord</title>",
		`id="table-orders"`,
		"version page-test",
		"Shards",
		`aria-label="shard s0"`, `aria-label="shard s1"`,
		`class="merged"`, // merged, index catch-up pending: the index job is off
		"flushed 3 · merged 3 · caught up 0 · trimmed 0",
		"Fragment-reuse index",
		"Recent jobs",
		"merged 6 generations",
		`class="version">` + fmt.Sprint(st.Snapshot.Version) + "<",
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("the rendered page lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("DOM:\n%s", dom)
	}
}
