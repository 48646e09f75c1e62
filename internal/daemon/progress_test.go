package daemon_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/daemon"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/testing/faults"
	"github.com/compactord/compactord/lancewal"
)

// appendFragments appends n fragments of rows rows each to the Lance
// table at url (createTable's schema), keys from 0, and returns the data
// file keys of its fragments in id order.
func appendFragments(t *testing.T, url string, n, rows int) []string {
	t.Helper()
	ctx := context.Background()
	b, err := storage.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, err := commit.NewCommitter(commit.DefaultConfig(), b, clock.Real(), commit.NewMetrics(prometheus.NewRegistry()), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	h, err := table.New(b, c)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		var in bytes.Buffer
		for id := i * rows; id < (i+1)*rows; id++ {
			fmt.Fprintf(&in, `{"id":%d,"cat":"c%d","val":%d}`+"\n", id, id%3, id)
		}
		if _, _, err := h.AppendJSON(ctx, &in); err != nil {
			t.Fatal(err)
		}
	}
	read, _, err := meta.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, f := range read.Manifest.GetFragments() {
		keys = append(keys, meta.DataKey(f.GetFiles()[0].GetPath()))
	}
	return keys
}

// While a Lance compaction is held in the middle (the read of its third
// input fragment blocks), the API's running field shows the attempt's
// progress: rows and bytes done so far out of the plan's total, the
// rates and the ETA; the status page shows it too. After the release the
// job finishes and running is empty again.
func TestRunningShowsProgress(t *testing.T) {
	root := memRoot(t)
	url := root + "/t"
	createTable(t, url)
	files := appendFragments(t, url, 5, 10)
	held := files[2]

	release := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	var mu sync.Mutex
	var rules []*faults.FaultRule
	cfg := baseConfig()
	cfg.Tables = []daemon.TableConfig{{URL: url}}
	// One group at a time: the fragments are read in id order.
	cfg.Jobs.Compact.Parallelism = 1
	r := run(t, cfg, daemon.Deps{WrapBucket: func(_ string, b storage.Bucket) storage.Bucket {
		f := faults.NewFaulty(b)
		rule := f.Add(faults.Fault{Ops: []storage.Op{storage.OpGet, storage.OpGetRange}, KeyContains: held, Action: faults.Block(release)})
		mu.Lock()
		rules = append(rules, rule)
		mu.Unlock()
		return f
	}})
	t.Cleanup(open) // before the daemon stops (cleanups run last first)
	fired := func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, rl := range rules {
			if rl.Fired() > 0 {
				return true
			}
		}
		return false
	}
	eventually(t, "ready", func() bool { return do(t, "GET", r.base+"/-/ready", "").status == 200 })
	if res := do(t, "POST", r.base+"/api/v1/tables/t/jobs/compact", ""); res.status/100 != 2 {
		t.Fatalf("queue compact: %+v", res)
	}
	eventually(t, "the compaction to block on its third fragment", fired)

	prog := runningProgress(t, r.base, "compact")
	done, total := prog["rows_done"].(float64), prog["rows_total"].(float64)
	// Two fragments read, the third held.
	if prog["phase"] != "compact" || total != 50 || done != 20 || prog["bytes_done"].(float64) <= 0 ||
		prog["bytes_total"].(float64) <= prog["bytes_done"].(float64) || prog["started_at"] == nil {
		t.Fatalf("running.progress while blocked: %v", prog)
	}
	for _, k := range []string{"rate_rows_per_s", "rate_bytes_per_s", "eta_seconds", "elapsed_seconds"} {
		if _, ok := prog[k]; !ok {
			t.Fatalf("running.progress has no %s: %v", k, prog)
		}
	}
	if page := do(t, "GET", r.base+"/", "").body; !strings.Contains(page, "Running: compact (manual)") || !strings.Contains(page, ": compact, 20 of 50 rows") {
		t.Errorf("the status page does not show the progress:\n%s", page)
	}

	open()
	eventually(t, "the compaction to finish", func() bool {
		doc := decode(t, do(t, "GET", r.base+"/api/v1/tables/t", "").body)
		recent, _ := doc["recent"].([]any)
		// The compaction queues an index job after it: find the
		// compaction's own entry.
		for _, e := range recent {
			if m := e.(map[string]any); m["kind"] == "compact" {
				return doc["running"] == nil && m["result"] == "success"
			}
		}
		return false
	})
}

// Likewise a Lance merge held on its second generation: running.progress
// counts the first generation's rows and bytes, out of the three
// generations' rows and the base rows whose keys the merge scans.
func TestRunningShowsMergeProgress(t *testing.T) {
	ctx := context.Background()
	url := memRoot(t) + "/t"
	tb := createTable(t, url)
	appendFragments(t, url, 5, 10)
	mc, err := tb.EnableMemWAL(ctx, lancewal.Config{Sharding: lancewal.Unsharded})
	if err != nil {
		t.Fatal(err)
	}
	shard := mc.Shards()[0]
	w, err := tb.OpenWriter(ctx, shard, lancewal.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for g := range 3 {
		var rows []lancewal.Row
		for i := range 10 {
			rows = append(rows, lancewal.Row{"id": int64(100 + 10*g + i), "cat": "wal", "val": 1.0})
		}
		if err := w.Upsert(ctx, rows); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := storage.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	st, err := memwal.ReadShard(ctx, b, shard)
	_ = b.Close()
	if err != nil {
		t.Fatal(err)
	}
	var held string
	for _, s := range st.Manifest.GetSstables() {
		if s.GetGeneration() == 2 {
			held = memwal.GenerationDir(shard, s.GetPath())
		}
	}
	if held == "" {
		t.Fatalf("no generation 2 in %v", st.Manifest)
	}

	release := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	var mu sync.Mutex
	var rules []*faults.FaultRule
	cfg := baseConfig()
	cfg.Tables = []daemon.TableConfig{{URL: url}}
	r := run(t, cfg, daemon.Deps{WrapBucket: func(_ string, b storage.Bucket) storage.Bucket {
		f := faults.NewFaulty(b)
		rule := f.Add(faults.Fault{Ops: []storage.Op{storage.OpGet, storage.OpGetRange}, KeyContains: held, Action: faults.Block(release)})
		mu.Lock()
		rules = append(rules, rule)
		mu.Unlock()
		return f
	}})
	t.Cleanup(open)
	eventually(t, "ready", func() bool { return do(t, "GET", r.base+"/-/ready", "").status == 200 })
	// The generations waiting at start are merged at start.
	eventually(t, "the merge to block on generation 2", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, rl := range rules {
			if rl.Fired() > 0 {
				return true
			}
		}
		return false
	})
	prog := runningProgress(t, r.base, "merge")
	if prog["phase"] != "merge" || prog["rows_total"].(float64) != 80 || prog["rows_done"].(float64) != 10 ||
		prog["bytes_done"].(float64) <= 0 || prog["eta_seconds"] == nil {
		t.Fatalf("running.progress while blocked: %v", prog)
	}
	open()
	// The landed merge queues its follow-ups (trim): the merge's own record
	// is what counts.
	eventually(t, "the merge to succeed", func() bool {
		doc := decode(t, do(t, "GET", r.base+"/api/v1/tables/t", "").body)
		recent, _ := doc["recent"].([]any)
		for _, rec := range recent {
			if m := rec.(map[string]any); m["kind"] == "merge" {
				return m["result"] == "success"
			}
		}
		return false
	})
}

// runningProgress polls table t's API document until its running job is
// of kind and reports some rows done, and returns that progress.
func runningProgress(t *testing.T, base, kind string) map[string]any {
	t.Helper()
	var prog map[string]any
	eventually(t, "running.progress with rows done", func() bool {
		doc := decode(t, do(t, "GET", base+"/api/v1/tables/t", "").body)
		run, _ := doc["running"].(map[string]any)
		if run == nil || run["kind"] != kind {
			return false
		}
		prog, _ = run["progress"].(map[string]any)
		return prog != nil && prog["rows_done"].(float64) > 0
	})
	return prog
}
