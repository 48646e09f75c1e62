package daemon_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/compact"
	"github.com/compactord/compactord/internal/daemon"
	"github.com/compactord/compactord/internal/fri"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/scheduler"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/faults"
	"github.com/compactord/compactord/internal/testing/lancedb"
	"github.com/compactord/compactord/internal/testing/tables"
)

// unindexedFragments is what compactord's catch-up finds the latest
// version's index name lacking (through the FRI's load-time remap, as
// LanceDB counts unindexed rows): the fragments and their live rows, and
// the version read.
func unindexedFragments(t *testing.T, b storage.Bucket, name string) (frags []uint32, rows uint64, version uint64) {
	t.Helper()
	read, _, err := meta.ReadLatest(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	return unindexedAt(t, b, read, name)
}

// unindexedAt is unindexedFragments at the version read.
func unindexedAt(t *testing.T, b storage.Bucket, read *meta.ManifestFile, name string) (frags []uint32, rows uint64, version uint64) {
	t.Helper()
	ctx := context.Background()
	ix, err := fri.Load(ctx, b, read)
	if err != nil {
		t.Fatal(err)
	}
	plans, _, err := index.Plan(read, index.Options{Indices: []string{name}, FRI: ix})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range plans {
		frags = append(frags, p.Missing.ToArray()...)
		for _, f := range read.Manifest.GetFragments() {
			if p.Missing.Contains(uint32(f.GetId())) {
				rows += f.GetPhysicalRows() - f.GetDeletionFile().GetNumDeletedRows()
			}
		}
	}
	return frags, rows, read.Manifest.GetVersion()
}

// TestLanceIndexScheduleCatchesUpPlainWrites: LanceDB's plain writes (an
// append, a merge-insert) change no MemWAL shard, so change polling queues
// no merge and no index follow-up for them; the index schedule catches
// them up. After the daemon merged the pending generations (merge → index
// chain) and went idle, two plain LanceDB writes leave id_idx lacking
// fragments; a scheduled index run covers them, and LanceDB counts no
// unindexed row.
func TestLanceIndexScheduleCatchesUpPlainWrites(t *testing.T) {
	lancedb.Require(t)
	dir := t.TempDir()
	f := lancedb.MemWAL(t, dir, 1, 2)
	tb, err := storage.Open(context.Background(), "file://"+f.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()

	cfg := baseConfig()
	cfg.Discover.URL = "file://" + dir
	cfg.Discover.Interval = time.Second
	cfg.Scheduler.PollInterval = 100 * time.Millisecond
	cfg.Scheduler.SyncInterval = 200 * time.Millisecond
	// The fixture's generations were flushed before the daemon started,
	// so change polling never sees them appear: the merge schedule merges
	// them.
	cfg.Scheduler.Schedule.Merge = "@every 1s"
	cfg.Scheduler.Schedule.Index = "@every 1s"
	r := run(t, cfg, daemon.Deps{})
	eventually(t, "the pending generations merged", func() bool {
		_, p := lsmState(t, tb)
		return p == 0
	})
	eventually(t, "id_idx caught up with the merges", func() bool {
		frags, _, _ := unindexedFragments(t, tb, "id_idx")
		return len(frags) == 0
	})

	res := f.Run(t, lancedb.Add(lancedb.BasicRows(500, 503)), lancedb.PlainMergeInsert("id", lancedb.TaggedRows(502, 506, "p")), lancedb.CurrentVersion())
	written, err := res.Version(2)
	if err != nil {
		t.Fatal(err)
	}
	// Read at the version LanceDB wrote: the daemon's index schedule may
	// already have covered the writes in a later one.
	_, naming, err := meta.ReadLatest(context.Background(), tb)
	if err != nil {
		t.Fatal(err)
	}
	at, err := meta.ReadVersion(context.Background(), tb, naming, written)
	if err != nil {
		t.Fatal(err)
	}
	if frags, rows, _ := unindexedAt(t, tb, at, "id_idx"); len(frags) == 0 || rows == 0 {
		t.Fatalf("after LanceDB's plain writes compactord finds id_idx lacking %v (%d rows), want the new fragments", frags, rows)
	}
	waitFor(t, "a scheduled index run to cover LanceDB's plain writes", 30*time.Second, func() bool {
		frags, _, v := unindexedFragments(t, tb, "id_idx")
		return len(frags) == 0 && v > written
	})
	eventually(t, "the daemon idle", func() bool {
		ts, _ := r.d.Scheduler().Table("t")
		return ts.Running == nil && len(ts.Pending) == 0
	})
	ts, _ := r.d.Scheduler().Table("t")
	scheduled := false
	for _, rec := range ts.Recent {
		scheduled = scheduled || rec.Kind == scheduler.KindIndex && rec.Trigger == scheduler.TriggerSchedule && rec.Result == scheduler.ClassSuccess && rec.Version > written
	}
	if !scheduled {
		t.Errorf("no scheduled index run committed after version %d: %+v", written, ts.Recent)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	out := f.Run(t, lancedb.IndexStats("id_idx"), lancedb.ReadRows(lancedb.ReadOpts{Where: "id >= 500"}))
	if is, err := out.IndexStats(0); err != nil || is == nil || is.NumUnindexedRows != 0 {
		t.Errorf("LanceDB's indexStats(id_idx): %+v, %v", is, err)
	}
	if rows := rowsByID(t, out, 1); len(rows) != 6 || rows[505] != "p505" || rows[500] != "v500" {
		t.Errorf("LanceDB reads %v", rows)
	}
}

// gauge is the value of the gauge series of name with the given labels.
func gauge(t *testing.T, d *daemon.Daemon, name string, labels ...string) (float64, bool) {
	t.Helper()
	mfs, err := d.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue series
				}
			}
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// Every failed attempt of a Lance job counts in its failure streak, of
// whatever class: two compactions failing on an object-store outage
// (retried) and one on a non-transient read error make a streak of 3 (1
// of them an error) since the first failure. After each, the API, the
// metrics and the status page show the streak and the next attempt's
// time (the end of the backoff), and the next attempt starts once the
// (fake) clock reaches it; a success ends the streak.
func TestLanceJobFailureStreak(t *testing.T) {
	root := memRoot(t)
	url := root + "/t"
	createTable(t, url)
	files := appendFragments(t, url, 4, 10)
	fc := clock.NewFake(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	var mu sync.Mutex
	var faulty *faults.Faulty
	cfg := baseConfig()
	cfg.Tables = []daemon.TableConfig{{URL: url}}
	cfg.Scheduler.Retry = scheduler.RetryConfig{BaseBackoff: time.Minute, MaxBackoff: time.Hour, QuarantineAfter: 5}
	r := run(t, cfg, daemon.Deps{Clock: fc, WrapBucket: func(_ string, b storage.Bucket) storage.Bucket {
		mu.Lock()
		defer mu.Unlock()
		faulty = faults.NewFaulty(b)
		return faulty
	}})
	eventually(t, "synced", func() bool { st, _ := r.d.Scheduler().Table("t"); return st.Synced })
	fail := func(err error) *faults.FaultRule {
		mu.Lock()
		defer mu.Unlock()
		faulty.Clear()
		return faulty.Add(faults.Fault{Ops: []storage.Op{storage.OpGet, storage.OpGetRange}, KeyContains: files[1], Action: faults.Fail(err)})
	}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	fail(refused)
	start := fc.Now()
	if res := do(t, "POST", r.base+"/api/v1/tables/t/jobs/compact", ""); res.status/100 != 2 {
		t.Fatalf("queue compact: %+v", res)
	}
	type kind struct {
		ConsecutiveFailures int        `json:"consecutive_failures"`
		ConsecutiveErrors   int        `json:"consecutive_errors"`
		FailingSince        *time.Time `json:"failing_since"`
		NextAttempt         *time.Time `json:"next_attempt"`
		LastRun             *struct {
			Result string `json:"result"`
		} `json:"last_run"`
	}
	status := func() (k kind, running bool) {
		var doc struct {
			Running *struct{} `json:"running"`
			Jobs    map[string]kind
		}
		if err := json.Unmarshal([]byte(do(t, "GET", r.base+"/api/v1/tables/t", "").body), &doc); err != nil {
			t.Fatal(err)
		}
		return doc.Jobs["compact"], doc.Running != nil
	}
	for n, c := range []struct {
		err    error  // the fault of the attempt after this one (nil: none)
		result string // this attempt's
		errors int
	}{{refused, "retry", 0}, {errors.New("injected: unreadable object"), "retry", 0}, {nil, "error", 1}} {
		n++
		var k kind
		eventually(t, fmt.Sprintf("attempt %d recorded", n), func() bool {
			var running bool
			k, running = status()
			return !running && k.ConsecutiveFailures == n && k.NextAttempt != nil
		})
		if k.LastRun == nil || k.LastRun.Result != c.result || k.ConsecutiveErrors != c.errors || k.FailingSince == nil || !k.FailingSince.Equal(start) {
			t.Fatalf("attempt %d: %+v (last run %+v), want result %s, %d errors, failing since %v", n, k, k.LastRun, c.result, c.errors, start)
		}
		if !k.NextAttempt.After(fc.Now()) {
			t.Fatalf("attempt %d: next attempt %v is not after now %v", n, k.NextAttempt, fc.Now())
		}
		if got, _ := gauge(t, r.d, "compactord_job_consecutive_failures", "table", "t", "kind", "compact"); got != float64(n) {
			t.Errorf("attempt %d: compactord_job_consecutive_failures = %v", n, got)
		}
		if got, _ := gauge(t, r.d, "compactord_job_next_run_timestamp_seconds", "table", "t", "kind", "compact"); got != float64(k.NextAttempt.UnixMilli())/1e3 {
			t.Errorf("attempt %d: compactord_job_next_run_timestamp_seconds = %v, want %v", n, got, float64(k.NextAttempt.UnixMilli())/1e3)
		}
		page := do(t, "GET", r.base+"/", "").body
		if want := fmt.Sprintf(`<td class="failures">%d since %s</td><td class="next-attempt">%s</td>`, n,
			start.UTC().Format("15:04:05"), k.NextAttempt.UTC().Format("15:04:05")); !strings.Contains(page, want) {
			t.Errorf("attempt %d: the page lacks %q", n, want)
		}
		if want := fmt.Sprintf(`</td><td>0</td><td>0</td><td>%d</td>`, n); !strings.Contains(page, want) {
			t.Errorf("attempt %d: the fleet summary lacks the streak %q", n, want)
		}
		if c.err != nil {
			fail(c.err)
		} else {
			mu.Lock()
			faulty.Clear()
			mu.Unlock()
		}
		fc.Advance(k.NextAttempt.Sub(fc.Now()))
	}
	eventually(t, "the compaction to succeed", func() bool {
		k, running := status()
		return !running && k.LastRun != nil && k.LastRun.Result == "success"
	})
	if k, _ := status(); k.ConsecutiveFailures != 0 || k.ConsecutiveErrors != 0 || k.FailingSince != nil {
		t.Fatalf("after the success: %+v", k)
	}
	if got, _ := gauge(t, r.d, "compactord_job_consecutive_failures", "table", "t", "kind", "compact"); got != 0 {
		t.Errorf("after the success: compactord_job_consecutive_failures = %v", got)
	}
}

// lastRun is the summary and result of the last run of a job kind on
// table t (the status API), "" before one finished.
func lastRun(t *testing.T, base, kind string) (summary, result string) {
	t.Helper()
	doc := decode(t, do(t, "GET", base+"/api/v1/tables/t", "").body)
	jobs, _ := doc["jobs"].(map[string]any)
	k, _ := jobs[kind].(map[string]any)
	lr, _ := k["last_run"].(map[string]any)
	if lr == nil {
		return "", ""
	}
	s, _ := lr["summary"].(string)
	r, _ := lr["result"].(string)
	return s, r
}

// A table with a pending fragment-reuse version (a compaction that
// deferred its remap) is absorbed by the daemon before any other job
// runs on it: a cleanup finds the btree and bitmap remapped and the FRI
// removed first, and LanceDB's own delete and optimize() afterwards keep
// the indexes answering as a scan does.
func TestLanceJobsAbsorbPendingFRI(t *testing.T) {
	lancedb.Require(t)
	f := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
	f.Dir = f.URI + "/t.lance"
	f.Run(t, lancedb.Create(lancedb.BasicSchema, lancedb.BasicRows(0, 100)), lancedb.Add(lancedb.BasicRows(100, 200)),
		lancedb.Add(lancedb.BasicRows(200, 300)), lancedb.CreateIndex("id", "btree", "id_idx"),
		lancedb.CreateIndex("cat", "bitmap", "cat_idx"), lancedb.Delete("id % 10 = 0"))
	h := tables.Open(t, f.Dir)
	o := compact.DefaultOptions()
	o.DeferRemap = true
	res, err := compact.Run(t.Context(), h, o, compact.Env{})
	if err != nil || res.FragReuse == nil {
		t.Fatalf("deferred compaction: FRI %v, %v", res.FragReuse, err)
	}

	cfg := baseConfig()
	cfg.Tables = []daemon.TableConfig{{URL: "file://" + f.Dir, Name: "t"}}
	r := run(t, cfg, daemon.Deps{})
	eventually(t, "synced", func() bool { st, _ := r.d.Scheduler().Table("t"); return st.Synced })
	if res := do(t, "POST", r.base+"/api/v1/tables/t/jobs/cleanup", ""); res.status/100 != 2 {
		t.Fatalf("queue cleanup: %+v", res)
	}
	var sum, result string
	eventually(t, "the cleanup to run", func() bool { sum, result = lastRun(t, r.base, "cleanup"); return result != "" })
	if result != "success" || !strings.HasPrefix(sum, "absorbed the fragment-reuse index: ") || !strings.Contains(sum, "FRI removed") {
		t.Fatalf("cleanup: %s: %q; want the FRI absorbed first", result, sum)
	}
	read, _, err := meta.ReadLatest(t.Context(), h.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	if len(meta.FindIndex(read.Indices, meta.FragReuseIndexName)) != 0 {
		t.Fatal("the FRI is still there")
	}
	out := f.Run(t, lancedb.Open(), lancedb.Delete("id % 3 = 0"), lancedb.Optimize(lancedb.OptimizeOpts{}),
		lancedb.CountRows("id >= 0"), lancedb.CountRows("cat = 1"), lancedb.ReadRows(lancedb.ReadOpts{}))
	rows, err := out.Rows(5)
	if err != nil {
		t.Fatal(err)
	}
	cat1 := int64(0)
	for _, row := range rows {
		if id, _ := row.Int("id"); id%4 == 1 {
			cat1++
		}
	}
	if n, _ := out.Count(3); n != int64(len(rows)) || len(rows) != 180 {
		t.Errorf("after LanceDB's delete and optimize(): btree counts %d rows, the scan %d (want 180)", n, len(rows))
	}
	if n, _ := out.Count(4); n != cat1 {
		t.Errorf("after LanceDB's delete and optimize(): bitmap counts %d rows of cat 1, the scan %d", n, cat1)
	}
}

// The compact job leaves out the fragments a vector index covers: its
// summary (on the status page) names them and the index, and
// compactord_compact_fragments_skipped counts them by reason, every
// reason present.
func TestLanceCompactReportsSkips(t *testing.T) {
	lancedb.Require(t)
	f := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
	f.Dir = f.URI + "/t.lance"
	f.Run(t, lancedb.Create(lancedb.VectorSchema, lancedb.VectorRows(0, 300, "v")), lancedb.Add(lancedb.VectorRows(300, 600, "v")),
		lancedb.CreateVectorIndex("vec", "ivf_rq", "vec_idx", map[string]any{"numPartitions": 1}),
		lancedb.Add(lancedb.VectorRows(600, 700, "v")), lancedb.Add(lancedb.VectorRows(700, 800, "v")),
		lancedb.Delete("id % 5 = 0"))
	cfg := baseConfig()
	cfg.Tables = []daemon.TableConfig{{URL: "file://" + f.Dir, Name: "t"}}
	r := run(t, cfg, daemon.Deps{})
	eventually(t, "synced", func() bool { st, _ := r.d.Scheduler().Table("t"); return st.Synced })
	if res := do(t, "POST", r.base+"/api/v1/tables/t/jobs/compact", ""); res.status/100 != 2 {
		t.Fatalf("queue compact: %+v", res)
	}
	var sum, result string
	eventually(t, "the compaction to run", func() bool { sum, result = lastRun(t, r.base, "compact"); return result != "" })
	if result != "success" || !strings.Contains(sum, "2 fragments into 1") ||
		!strings.Contains(sum, `left out 2 fragments (fragments 0,1: covered by vector index "vec_idx"`) {
		t.Fatalf("compact: %s: %q; want fragments 2 and 3 compacted, 0 and 1 left out for vec_idx", result, sum)
	}
	page := do(t, "GET", r.base+"/", "").body
	if !strings.Contains(page, "left out 2 fragments") {
		t.Error("the status page does not show the plan's skips")
	}
	// The next compaction's plan on the page leaves them out too, each
	// with its reason.
	for _, frag := range []string{"0", "1"} {
		if !strings.Contains(page, "<li>fragment "+frag+": covered by vector index") {
			t.Errorf("the next compaction's plan does not say why fragment %s is left out:\n%s", frag, page)
		}
	}
	for reason, want := range map[string]float64{"unremappable_index": 2, "data_files": 0, "base_path": 0, "row_count": 0} {
		if got, ok := gauge(t, r.d, "compactord_compact_fragments_skipped", "table", "t", "reason", reason); !ok || got != want {
			t.Errorf("compactord_compact_fragments_skipped{reason=%q} = %v (present %v), want %v", reason, got, ok, want)
		}
	}
	out := f.Run(t, lancedb.Open(), lancedb.VectorSearch(lancedb.VectorQuery{Vector: lancedb.VectorOf(1), Column: "vec", Limit: 5, Columns: []string{"id"}}))
	rows, err := out.Rows(1)
	if err != nil || len(rows) != 5 {
		t.Fatalf("LanceDB vector search after the compaction: %d rows, %v", len(rows), err)
	}
	if id, _ := rows[0].Int("id"); id != 1 {
		t.Errorf("nearest row to id 1's vector is %d", id)
	}
}

// losingBucket answers the first put of a table manifest "already exists"
// without writing it, as if another writer had won the race: the commit
// loop backs off before it tries again.
type losingBucket struct {
	storage.Bucket
	lost atomic.Int64
}

func (b *losingBucket) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if strings.HasPrefix(key, meta.VersionsDir) && strings.HasSuffix(key, ".manifest") && b.lost.CompareAndSwap(0, 1) {
		return fmt.Errorf("put %s: %w", key, storage.ErrAlreadyExists)
	}
	return b.Bucket.PutIfAbsent(ctx, key, data)
}

// The daemon hands each table's commit loop its own clock: with a fake
// clock, the backoff after a lost race waits on fake time (ten minutes
// here, far beyond the test), and moving the clock lets the commit land.
// On the wall clock the backoff would outlast the test.
func TestCommitBackoffRunsOnTheDaemonClock(t *testing.T) {
	root := memRoot(t)
	url := root + "/t"
	createTable(t, url)
	appendFragments(t, url, 4, 10)
	fc := clock.NewFake(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	cfg := baseConfig()
	cfg.Tables = []daemon.TableConfig{{URL: url}}
	cfg.Commit.BaseBackoff, cfg.Commit.MaxBackoff = 10*time.Minute, 10*time.Minute
	cfg.Scheduler.Timeouts.Default = 1000 * time.Hour // the job's budget runs on the fake clock too
	var lb *losingBucket
	var mu sync.Mutex
	r := run(t, cfg, daemon.Deps{Clock: fc, WrapBucket: func(_ string, b storage.Bucket) storage.Bucket {
		mu.Lock()
		defer mu.Unlock()
		lb = &losingBucket{Bucket: b}
		return lb
	}})
	s := r.d.Scheduler()
	eventually(t, "synced", func() bool { st, _ := s.Table("t"); return st.Synced })
	if err := s.Trigger("t", scheduler.KindCompact); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the first manifest put lost", func() bool { mu.Lock(); defer mu.Unlock(); return lb.lost.Load() == 1 })
	eventually(t, "compaction committed once the fake clock passes the backoff", func() bool {
		fc.Advance(time.Minute)
		st, _ := s.Table("t")
		lr := st.Jobs["compact"].LastRun
		return lr != nil && lr.Result == scheduler.ClassSuccess && lr.Version > 0
	})
}
