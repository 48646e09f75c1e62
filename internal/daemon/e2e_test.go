package daemon_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/daemon"
	"github.com/compactord/compactord/internal/scheduler"
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
	shards := pendingWork(t, url)
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
