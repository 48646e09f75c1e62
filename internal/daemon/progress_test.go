package daemon_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/compactord/compactord/internal/daemon"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// While a compaction is held in the middle (the read of its third input
// fragment blocks), the API's running field shows the attempt's progress:
// rows and bytes done so far out of the job's total. After the release the
// job finishes and running is empty again.
func TestRunningShowsProgress(t *testing.T) {
	root := memRoot(t)
	url := root + "/t"
	tb := createTable(t, url)
	ctx := context.Background()
	for i := range 5 {
		rows := make([]table.Row, 10)
		for j := range rows {
			rows[j] = table.Row{int64(i*10 + j), fmt.Sprint("c", j%3), float64(j)}
		}
		if _, err := tb.Append(ctx, rows); err != nil {
			t.Fatal(err)
		}
	}
	head, err := table.ReadLatest(ctx, tb.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	held := head.Fragments[2].GetDataFile().GetPath()

	release := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	var mu sync.Mutex
	var rules []*storage.FaultRule
	cfg := baseConfig()
	cfg.Tables = []daemon.TableConfig{{URL: url}}
	r := run(t, cfg, daemon.Deps{WrapBucket: func(_ string, b storage.Bucket) storage.Bucket {
		f := storage.NewFaulty(b)
		rule := f.Add(storage.Fault{Ops: []storage.Op{storage.OpGet, storage.OpGetRange}, KeyContains: held, Action: storage.Block(release)})
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

	var prog map[string]any
	eventually(t, "running.progress with rows done", func() bool {
		doc := decode(t, do(t, "GET", r.base+"/api/v1/tables/t", "").body)
		run, _ := doc["running"].(map[string]any)
		if run == nil || run["kind"] != "compact" {
			return false
		}
		prog, _ = run["progress"].(map[string]any)
		return prog != nil && prog["rows_done"].(float64) > 0
	})
	done, total := prog["rows_done"].(float64), prog["rows_total"].(float64)
	if prog["phase"] != "compact" || total != 50 || done >= total || prog["bytes_done"].(float64) <= 0 ||
		prog["bytes_total"].(float64) <= prog["bytes_done"].(float64) || prog["started_at"] == nil {
		t.Fatalf("running.progress while blocked: %v", prog)
	}
	for _, k := range []string{"rate_rows_per_s", "rate_bytes_per_s", "eta_seconds"} {
		if _, ok := prog[k]; !ok {
			t.Fatalf("running.progress has no %s: %v", k, prog)
		}
	}

	open()
	eventually(t, "the compaction to finish", func() bool {
		doc := decode(t, do(t, "GET", r.base+"/api/v1/tables/t", "").body)
		recent, _ := doc["recent"].([]any)
		return doc["running"] == nil && len(recent) > 0 && recent[0].(map[string]any)["result"] == "success"
	})
}
