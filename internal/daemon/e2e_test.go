package daemon_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/daemon"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/scheduler"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/lancedb"
	"github.com/compactord/compactord/internal/verify"
	"go.uber.org/goleak"

	"github.com/compactord/compactord/lancewal"
)

// pendingWork builds a Lance table with pending work: four small
// fragments, a btree index the MemWAL maintains, and three flushed
// generations in each of two shards, written by the Go MemWAL writer. It
// returns the shard ids.
func pendingWork(t *testing.T, url string) []string {
	t.Helper()
	ctx := context.Background()
	tb := createTable(t, url)
	if err := tb.CreateIndex(ctx, "id_idx", "id", lancewal.BTree); err != nil {
		t.Fatal(err)
	}
	cfg, err := tb.EnableMemWAL(ctx, lancewal.Config{Sharding: lancewal.Bucket, Column: "id", NumBuckets: 2, MaintainedIndexes: []string{"id_idx"}})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	shards := cfg.Shards()
	writers := map[string]*lancewal.Writer{}
	for _, s := range shards {
		w, err := tb.OpenWriter(ctx, s, lancewal.WriterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		writers[s] = w
	}
	for range 3 {
		byShard := map[string][]lancewal.Row{}
		for range 80 {
			id := int64(rng.IntN(200))
			s, err := cfg.ShardFor(id)
			if err != nil {
				t.Fatal(err)
			}
			byShard[s] = append(byShard[s], lancewal.Row{"id": id, "cat": "wal", "val": 1.0})
		}
		for _, s := range shards {
			if err := writers[s].Upsert(ctx, byShard[s]); err != nil {
				t.Fatal(err)
			}
			if _, err := writers[s].Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, w := range writers {
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return shards
}

// The status page, loaded in headless Chromium, shows the table, its
// shards' timelines, the FRI section and the recent jobs.
func TestStatusPageInChromium(t *testing.T) {
	browser := chromium(t)
	dir := t.TempDir()
	url := "file://" + filepath.Join(dir, "orders")
	shards := pendingWork(t, url)
	// Two more tables without work, for the fleet summary and the filter.
	createTable(t, "file://"+filepath.Join(dir, "billing"))
	createTable(t, "file://"+filepath.Join(dir, "archive"))
	cfg := baseConfig()
	cfg.Tables = []daemon.TableConfig{{URL: url}, {URL: "file://" + filepath.Join(dir, "billing")}, {URL: "file://" + filepath.Join(dir, "archive")}}
	r := run(t, cfg, daemon.Deps{Version: "page-test"})
	s := r.d.Scheduler()
	eventually(t, "synced", func() bool { st, _ := s.Table("orders"); return st.Synced })
	// The generations waiting at start are merged at start.
	eventually(t, "merged", func() bool {
		st, _ := s.Table("orders")
		return st.Jobs["merge"].LastRun != nil && st.Running == nil
	})
	// The landed merge queued index catch-up and trim; the page is read
	// once they ran.
	eventually(t, "the merge's follow-ups", func() bool {
		st, _ := s.Table("orders")
		return st.Jobs["index"].LastRun != nil && st.Jobs["trim"].LastRun != nil && st.Running == nil
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
	// loadDOM also fails the test on a Go formatting or template error.
	load := func(path string) string {
		t.Helper()
		return loadDOM(t, browser, r.base+path)
	}
	dom := load("/")
	// The fleet summary: tables by state, and every table in a row (none
	// lags: the merge queued the index catch-up and trim, which ran), by
	// name.
	if !strings.Contains(dom, "3 tables:") || !strings.Contains(dom, `href="/?state=ok">3 ok</a>`) {
		t.Errorf("no fleet summary by state")
	}
	rows := regexp.MustCompile(`<tr class="fleet-row"><td><a href="#table-([a-z]+)">`).FindAllStringSubmatch(dom, -1)
	var order []string
	for _, m := range rows {
		order = append(order, m[1])
	}
	if strings.Join(order, ",") != "archive,billing,orders" {
		t.Errorf("fleet rows %v, want them by name", order)
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
		`aria-label="shard ` + shards[0] + `"`, `aria-label="shard ` + shards[1] + `"`,
		`class="caughtup"`, // the merge queued the index catch-up, which ran
		"flushed 3 · merged 3 · caught up 3 · trimmed 0",
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

// writeDuration is how long LanceDB's writers write while the daemon
// maintains the table: $COMPACTORD_LANCE_DAEMON_DURATION (a Go duration)
// when set, else 60 s under COMPACTORD_LONG=1 (the acceptance run), else
// 15 s (make test).
func writeDuration(t *testing.T) time.Duration {
	if s := os.Getenv("COMPACTORD_LANCE_DAEMON_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("COMPACTORD_LANCE_DAEMON_DURATION: %v", err)
		}
		return d
	}
	if os.Getenv("COMPACTORD_LONG") == "1" {
		return time.Minute
	}
	return 15 * time.Second
}

// lsmState reads, straight from storage, each shard's compacted position
// (the latest version's MemWAL index) and its flushed generations not yet
// merged.
func lsmState(t *testing.T, b storage.Bucket) (compacted map[string]uint64, pending int) {
	t.Helper()
	ctx := context.Background()
	f, _, err := meta.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	compacted = map[string]uint64{}
	if ix := memwal.Index(f.Indices); ix != nil {
		d, err := memwal.Details(ix)
		if err != nil {
			t.Fatal(err)
		}
		compacted = memwal.Compacted(d)
	}
	ids, err := memwal.ListShards(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		st, err := memwal.ReadShard(ctx, b, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range st.Manifest.GetSstables() {
			if g := s.GetGeneration(); g > compacted[id] && g < st.Manifest.GetCurrentGeneration() {
				pending++
			}
		}
	}
	return compacted, pending
}

// counter sums a counter family's series whose labels include want.
func counter(t *testing.T, d *daemon.Daemon, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := d.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue series
				}
			}
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func rowsByID(t *testing.T, res *lancedb.Results, i int) map[int64]string {
	t.Helper()
	rows, err := res.Rows(i)
	if err != nil {
		t.Fatal(err)
	}
	m, err := lancedb.RowsByID(rows)
	if err != nil {
		t.Fatalf("step %d: %v", i, err) // a key read twice: landed twice or resurrected
	}
	return m
}

// TestLanceDaemonWithWriters is issue 15's acceptance run on the daemon:
// the daemon finds a LanceDB table by discovery of its database directory
// and maintains it (change polling → merge → index → trim; scheduled index
// catch-up of the plain writes, trim, compact and cleanup) while LanceDB writes for writeDuration: one
// MemWAL writer upserting through every shard (LanceDB splits its rows per
// bucket) and one plain writer appending, deleting and merge-inserting on
// its own keys. Afterwards LanceDB's LSM view holds exactly what the
// writers' acknowledged operations say (nothing lost, nothing resurrected,
// no key twice), the daemon merged every flushed generation (its base view
// equals the LSM view), the MemWAL index's compacted positions advanced,
// verify finds no violation, and no goroutine is left.
//
// 1 shard keeps id_idx maintained by the MemWAL, so trim deletes a merged
// generation only once catch-up covered it; 4 shards maintain no index (the
// btree id_idx is caught up all the same).
func TestLanceDaemonWithWriters(t *testing.T) {
	lancedb.Require(t)
	dur := writeDuration(t)
	for _, tc := range []struct {
		name       string
		shards     int
		maintained bool
	}{{"1 shard", 1, true}, {"4 shards", 4, false}} {
		t.Run(tc.name, func(t *testing.T) {
			ignore := goleak.IgnoreCurrent()
			t.Cleanup(func() {
				http.DefaultClient.CloseIdleConnections()
				goleak.VerifyNone(t, ignore)
			})
			runLanceDaemonWithWriters(t, tc.shards, tc.maintained, dur)
		})
	}
}

func runLanceDaemonWithWriters(t *testing.T, shards int, maintained bool, dur time.Duration) {
	ctx := context.Background()
	dir := t.TempDir()
	steps, prior := lancedb.MemWALSteps(shards, 2)
	if !maintained {
		spec := lancedb.LsmWriteSpec{SpecType: "unsharded", MaintainedIndexes: []string{}}
		if shards > 1 {
			spec = lancedb.LsmWriteSpec{SpecType: "bucket", Column: "id", NumBuckets: shards, MaintainedIndexes: []string{}}
		}
		steps[3] = lancedb.SetLsmWriteSpec(spec)
	}
	lancedb.MustRun(t, lancedb.Program{URI: dir, Table: "t", Steps: steps})
	f := &lancedb.Fixture{URI: dir, Table: "t", Dir: filepath.Join(dir, "t.lance"), Want: prior}
	tb, err := storage.Open(ctx, "file://"+f.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	before, pendingBefore := lsmState(t, tb)
	if pendingBefore == 0 {
		t.Fatal("the fixture has no pending generation")
	}

	cfg := baseConfig()
	cfg.Discover.URL = "file://" + dir
	cfg.Discover.Interval = time.Second
	cfg.Scheduler.PollInterval = 200 * time.Millisecond
	cfg.Scheduler.SyncInterval = time.Second
	// The plain writer's appends and merge-inserts change no MemWAL
	// shard: no change-triggered index job follows them (only merges and
	// compactions queue one), so the index schedule catches them up.
	cfg.Scheduler.Schedule = scheduler.Schedules{Merge: "@every 10s", Compact: "@every 5s", Index: "@every 1s", Trim: "@every 1s", Cleanup: "@every 3s"}
	cfg.Jobs.Merge.MaxGenerations = 8 // more generations than that ask for another attempt
	// A merge losing a commit race to a LanceDB merge-insert is retryable;
	// retry soon, not after the production backoff of seconds to minutes.
	cfg.Scheduler.Retry.BaseBackoff = 100 * time.Millisecond
	cfg.Scheduler.Retry.MaxBackoff = time.Second
	cfg.Jobs.Trim.ReaderGrace = 2 * time.Second
	cfg.Jobs.Cleanup.RetainVersions = 10
	cfg.Jobs.Cleanup.OlderThan = 10 * time.Second
	cfg.Jobs.Cleanup.MinAge = 10 * time.Second
	cfg.Jobs.Cleanup.AllowDeletingInFlightWrites = true
	r := run(t, cfg, daemon.Deps{})
	eventually(t, "ready", r.d.Ready)
	eventually(t, "table t discovered and synced", func() bool {
		ts, ok := r.d.Scheduler().Table("t")
		return ok && ts.Snapshot != nil
	})
	ts, _ := r.d.Scheduler().Table("t")
	if ts.URL != "file://"+f.Dir || ts.Snapshot.Format != scheduler.FormatLance || !ts.Snapshot.MemWal {
		t.Fatalf("discovered %s: format %q, mem_wal %v", ts.URL, ts.Snapshot.Format, ts.Snapshot.MemWal)
	}

	start := time.Now()
	lw := lancedb.StartWriter(t, lancedb.WriterOpts{URI: dir, Table: "t", Duration: dur, KeyMin: 100, KeyMax: 199, ID: "lsm",
		Weights: map[string]int{"lsmMerge": 1}, CloseEvery: 2})
	pw := lancedb.StartWriter(t, lancedb.WriterOpts{URI: dir, Table: "t", Duration: dur, KeyMin: 1000, KeyMax: 1099, ID: "plain",
		Weights: map[string]int{"append": 3, "delete": 2, "merge": 1}})
	// While they write, the daemon merges: the compacted positions move
	// before the writers stop.
	waitFor(t, "a merge while the writers write", dur, func() bool {
		return counter(t, r.d, "compactord_sstables_merged_total", map[string]string{"table": "t"}) > 0
	})
	<-lw.Done()
	<-pw.Done()
	lops, err := lw.Stop()
	if err != nil {
		t.Fatal(err)
	}
	pops, err := pw.Stop()
	if err != nil {
		t.Fatal(err)
	}
	wrote := time.Since(start)
	stopped := time.Now()
	mergedDuring := counter(t, r.d, "compactord_sstables_merged_total", map[string]string{"table": "t"})

	// The writers' last flush is merged by change polling.
	waitFor(t, "every flushed generation merged", dur+time.Minute, func() bool {
		_, p := lsmState(t, tb)
		return p == 0
	})
	// The plain writer's last writes, which may follow the last merge, are
	// caught up by a scheduled index run.
	waitFor(t, "id_idx covering every fragment", time.Minute, func() bool {
		frags, _, _ := unindexedFragments(t, tb, "id_idx")
		return len(frags) == 0
	})
	eventually(t, "the daemon idle", func() bool {
		ts, _ := r.d.Scheduler().Table("t")
		return ts.Running == nil && len(ts.Pending) == 0
	})
	drained := time.Since(stopped)
	page := do(t, "GET", r.base+"/", "")
	api := do(t, "GET", r.base+"/api/v1/tables/t", "")
	ts, _ = r.d.Scheduler().Table("t")
	runs := map[string]float64{}
	for _, k := range scheduler.Kinds {
		for _, res := range []string{"success", "skipped", "retry", "error"} {
			if n := counter(t, r.d, "compactord_job_runs_total", map[string]string{"table": "t", "kind": string(k), "result": res}); n > 0 {
				runs[string(k)+"/"+res] = n
			}
		}
	}
	merged := counter(t, r.d, "compactord_sstables_merged_total", map[string]string{"table": "t"})
	trimmed := counter(t, r.d, "compactord_sstable_trimmed_bytes_total", map[string]string{"table": "t"})
	if err := r.stop(); err != nil {
		t.Fatalf("daemon: %v", err)
	}

	// What the writers were told.
	kinds := map[string]int{}
	for _, op := range append(lancedb.Acknowledged(lops), lancedb.Acknowledged(pops)...) {
		kinds[op.Op]++
	}
	want := lancedb.Expected(prior, lops)
	maps.Copy(want, lancedb.Expected(nil, pops))
	after, pending := lsmState(t, tb)
	t.Logf("wrote for %v: acknowledged %v (failed: lsm %d, plain %d); daemon: %v generations merged (%v while writing; the rest within %v after), %v SSTable bytes trimmed, job runs %v; compacted %v → %v",
		wrote.Round(time.Millisecond), kinds, len(lancedb.Failed(lops)), len(lancedb.Failed(pops)), merged, mergedDuring, drained.Round(time.Millisecond), trimmed, runs, before, after)
	if wrote < dur {
		t.Errorf("the writers wrote for %v, want at least %v", wrote, dur)
	}
	if kinds["lsmMerge"] < 10 || kinds["delete"] == 0 {
		t.Errorf("too little written: %v", kinds)
	}
	if pending != 0 || len(after) == 0 {
		t.Errorf("after the run: %d generations pending, compacted %v", pending, after)
	}
	var advanced uint64
	for id, g := range after {
		if g < before[id] {
			t.Errorf("shard %s: compacted position went back from %d to %d", id, before[id], g)
		}
		advanced += g - before[id]
	}
	if advanced < uint64(pendingBefore)+5 || merged < float64(advanced) {
		t.Errorf("compacted positions advanced by %d generations (%d pending before the writers; %v merged by the daemon)", advanced, pendingBefore, merged)
	}
	for _, rec := range ts.Recent {
		if rec.Error != "" {
			t.Logf("%s attempt %d (%s): %s", rec.Kind, rec.ID, rec.Result, rec.Error)
		}
	}
	if runs["index/success"] == 0 {
		t.Errorf("no index catch-up landed: %v", runs)
	}
	if runs["trim/success"]+runs["trim/skipped"] == 0 || runs["cleanup/success"]+runs["cleanup/skipped"] == 0 || runs["compact/success"]+runs["compact/skipped"] == 0 {
		t.Errorf("trim, cleanup and compact did not all run: %v", runs)
	}
	if ts.Halted != nil {
		t.Errorf("the table is quarantined: %+v", ts.Halted)
	}

	// LanceDB reads exactly what was acknowledged, through its LSM view
	// and, every generation being merged, through its base view.
	res := f.Run(t, lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(true)}), lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(false)}),
		lancedb.IndexStats("id_idx"))
	if is, err := res.IndexStats(2); err != nil || is == nil || is.NumUnindexedRows != 0 {
		frags, rows, v := unindexedFragments(t, tb, "id_idx")
		t.Errorf("LanceDB's indexStats(id_idx) after the run: %+v, %v; compactord's catch-up finds version %d lacking fragments %v (%d rows)", is, err, v, frags, rows)
	}
	if d := lancedb.DiffByID(rowsByID(t, res, 0), want); d != "" {
		t.Errorf("LanceDB's LSM view vs the writers' acknowledged operations:\n%s", d)
	}
	if d := lancedb.DiffByID(rowsByID(t, res, 1), want); d != "" {
		t.Errorf("LanceDB's base view after the daemon's merges:\n%s", d)
	}

	// Catch-up covered every merged generation of the maintained index,
	// and trim deleted merged generations while the writers wrote.
	if maintained {
		f, _, err := meta.ReadLatest(ctx, tb)
		if err != nil {
			t.Fatal(err)
		}
		d, err := memwal.Details(memwal.Index(f.Indices))
		if err != nil {
			t.Fatal(err)
		}
		if cu := memwal.Catchup(d)["id_idx"]; !maps.Equal(cu, after) {
			t.Errorf("id_idx caught up to %v, merged %v", cu, after)
		}
	}
	var snapTrimmed uint64
	for _, sh := range ts.Snapshot.Shards {
		snapTrimmed += sh.Trimmed
	}
	if trimmed == 0 || snapTrimmed == 0 {
		t.Errorf("trim deleted no merged generation: %v bytes, trimmed through %d", trimmed, snapTrimmed)
	}

	rep, err := verify.Run(ctx, tb, verify.Options{Deep: true, IndexContent: index.ContentChecker})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Errorf("verify: %+v", rep.Violations)
	}

	// The status API and page show a Lance table with its real shards.
	if len(ts.Snapshot.Shards) == 0 || len(ts.Snapshot.Shards) > shards {
		t.Errorf("status shows %d shards, the table has up to %d", len(ts.Snapshot.Shards), shards)
	}
	for _, sh := range ts.Snapshot.Shards {
		if sh.Merged != after[sh.ID] || sh.Flushed < sh.Merged || !sh.Claimed {
			t.Errorf("status shard %s: flushed %d, merged %d (compacted %d), claimed %v", sh.ID, sh.Flushed, sh.Merged, after[sh.ID], sh.Claimed)
		}
	}
	if !strings.Contains(api.body, `"format": "lance"`) {
		t.Errorf("API: no format lance in %.300s", api.body)
	}
	if !strings.Contains(page.body, `format <b class="format">lance</b>`) || !strings.Contains(page.body, fmt.Sprintf("merged %d", ts.Snapshot.Shards[0].Merged)) {
		t.Errorf("status page: no Lance format or shard timeline")
	}
}
