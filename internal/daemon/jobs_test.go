package daemon_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/daemon"
	"github.com/compactord/compactord/internal/fri"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/scheduler"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/faults"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

// unindexedFragments is what compactord's catch-up finds the latest
// version's index name lacking (through the FRI's load-time remap, as
// LanceDB counts unindexed rows): the fragments and their live rows, and
// the version read.
func unindexedFragments(t *testing.T, b storage.Bucket, name string) (frags []uint32, rows uint64, version uint64) {
	t.Helper()
	ctx := context.Background()
	read, _, err := meta.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
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
	if frags, rows, _ := unindexedFragments(t, tb, "id_idx"); len(frags) == 0 || rows == 0 {
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
