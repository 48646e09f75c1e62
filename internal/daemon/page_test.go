package daemon_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/daemon"
	"github.com/compactord/compactord/internal/lease"
	"github.com/compactord/compactord/internal/marker"
	"github.com/compactord/compactord/internal/merge"
	"github.com/compactord/compactord/internal/progress"
	"github.com/compactord/compactord/internal/scheduler"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// mergeNow merges every flushed generation of the Lance table at url, as
// `compactord merge` does, without the daemon (so no index catch-up
// follows).
func mergeNow(t *testing.T, url string) {
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
	out, err := merge.RunAll(ctx, h, merge.Env{MaxGenerations: 1 << 20})
	if err != nil || len(out.Landed) == 0 {
		t.Fatalf("merge: %+v, %v", out, err)
	}
}

// fleetOrder is the tables of the page's fleet summary, in order.
func fleetOrder(page string) []string {
	var order []string
	for _, m := range regexp.MustCompile(`<tr class="fleet-row"><td><a href="#table-([a-z]+)">`).FindAllStringSubmatch(page, -1) {
		order = append(order, m[1])
	}
	return order
}

// The fleet summary on Lance tables lists the worst lag first: the table
// with flushed MemWAL generations no merge has taken (pending
// generations), then the one merged but whose maintained index has not
// caught up (index lag, in generations), then the tables without work by
// name. The lags are what the scheduler's Lance observation derives from
// the shard manifests and the MemWAL index; the filter keeps the order.
func TestStatusPageFleetWorstLagFirst(t *testing.T) {
	root := memRoot(t)
	pendingWork(t, root+"/orders")  // 3 flushed generations in each of 2 shards
	pendingWork(t, root+"/lagging") // the same, merged: id_idx lags 3 generations
	mergeNow(t, root+"/lagging")    // per shard
	createTable(t, root+"/archive") // no MemWAL, no work
	createTable(t, root+"/billing") // likewise
	cfg := baseConfig()
	for _, n := range []string{"archive", "billing", "lagging", "orders"} {
		cfg.Tables = append(cfg.Tables, daemon.TableConfig{URL: root + "/" + n})
	}
	// Jobs that do nothing: the daemon would merge the waiting generations
	// at start, and the page is to show them waiting.
	r := run(t, cfg, daemon.Deps{Jobs: (&recorder{}).jobs()})
	s := r.d.Scheduler()
	// Idle too: a page rendered while the start-up merge (a no-op here)
	// runs shows orders "running".
	eventually(t, "every table synced and idle", func() bool {
		for _, n := range []string{"archive", "billing", "lagging", "orders"} {
			if st, _ := s.Table(n); !st.Synced || st.Running != nil || len(st.Pending) != 0 {
				return false
			}
		}
		return true
	})
	page := do(t, "GET", r.base+"/", "").body
	if got := strings.Join(fleetOrder(page), ","); got != "orders,lagging,archive,billing" {
		t.Fatalf("fleet rows %s, want orders (6 pending generations), lagging (index lag 3), then the others by name:\n%s", got, page)
	}
	// The lag columns: pending generations, then index lag.
	for _, want := range []string{
		`<a href="#table-orders">orders</a></td><td><span class="state state-ok">ok</span></td><td>`,
		`</td><td>6</td><td>0</td><td>0</td>`,
		`</td><td>0</td><td>3</td><td>0</td>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the fleet summary lacks %q:\n%s", want, page)
		}
	}
	if st, _ := s.Table("lagging"); st.Snapshot == nil || st.Snapshot.PendingGenerations != 0 || len(st.Snapshot.Shards) != 2 ||
		st.Snapshot.Shards[0].Lag["id_idx"] != 3 || st.Snapshot.Shards[1].Lag["id_idx"] != 3 {
		t.Fatalf("lagging's snapshot: %+v", st.Snapshot)
	}
	// A filter matching two tables keeps the worst first.
	if got := strings.Join(fleetOrder(do(t, "GET", r.base+"/?q=g", "").body), ","); got != "lagging,billing" {
		t.Errorf("filtered fleet rows %s, want lagging,billing", got)
	}
}

// chromium is the headless browser the page tests load the page in: they
// skip without one, except under CI, where its absence is a failure.
func chromium(t *testing.T) string {
	t.Helper()
	for _, b := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(b); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium not installed (apt-get install -y chromium)")
	}
	t.Skip("chromium not installed (apt-get install -y chromium)")
	return ""
}

// loadDOM loads url in headless Chromium and returns the DOM it built. A
// page that did not render (a template error answers 500 with its
// message) or that printed a Go formatting error (`%!f(...)`) fails the
// test.
func loadDOM(t *testing.T, browser, url string) string {
	t.Helper()
	if res := do(t, "GET", url, ""); res.status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, res.status, res.body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--user-data-dir="+t.TempDir(), "--dump-dom", url)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	dom := string(out)
	for _, bad := range []string{"%!", "template:", "<no value>"} {
		if strings.Contains(dom, bad) {
			t.Errorf("the page at %s shows %q:\n%s", url, bad, dom)
		}
	}
	return dom
}

// blockingJobs are jobs that record their calls; compact reports progress
// (a quarter of 100 rows done) and waits for release, so that the page
// can be read while it runs.
func blockingJobs(rec *recorder, started chan<- struct{}, release <-chan struct{}) map[scheduler.Kind]scheduler.JobFunc {
	jobs := rec.jobs()
	jobs[scheduler.KindCompact] = func(ctx context.Context, h *scheduler.TableHandle) (scheduler.Outcome, error) {
		rep := progress.From(ctx)
		rep.Start("compact", progress.Units{Rows: 100})
		rep.Add(25, 0)
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
			return scheduler.Outcome{}, ctx.Err()
		}
		return scheduler.Outcome{Summary: "compacted for the page test", Version: 99}, nil
	}
	return jobs
}

// The status page, loaded in Chromium, on the defects an operator met: a
// running job's ETA printed as `%!f(*float64=...)`, an expired lease
// shown as held, "Recent jobs" ignoring the filter, a no-compact table
// shown as a plain "ok" in the fleet summary, whole shard UUIDs wrapping
// over four lines. It also shows each table's debt and the next
// compaction's plan: which fragments, and why.
func TestStatusPageInChromiumOperatorView(t *testing.T) {
	browser := chromium(t)
	ctx := context.Background()
	root := memRoot(t)
	shards := pendingWork(t, root+"/orders")
	createTable(t, root+"/billing")
	createTable(t, root+"/frozen")
	appendFragments(t, root+"/frozen", 2, 10)
	fb, err := storage.Open(ctx, root+"/frozen")
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	since := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := marker.Put(ctx, fb, marker.Mark{Kind: marker.NoCompact, Reason: "incident 12", By: "ops", Since: since}); err != nil {
		t.Fatal(err)
	}
	cfg := baseConfig()
	cfg.Scheduler.Lease = lease.Config{Enabled: true, Holder: "inst1", TTL: 30 * time.Second, RenewInterval: 10 * time.Second}
	for _, n := range []string{"orders", "billing", "frozen"} {
		cfg.Tables = append(cfg.Tables, daemon.TableConfig{URL: root + "/" + n})
	}
	clk := clock.NewFake(since.Add(time.Hour))
	rec := &recorder{}
	started, release := make(chan struct{}, 1), make(chan struct{})
	r := run(t, cfg, daemon.Deps{Clock: clk, Jobs: blockingJobs(rec, started, release)})
	s := r.d.Scheduler()
	// Served too: with leases on, a table is synced before the lease round
	// that makes this instance serve it, and a trigger before that round
	// is refused ("not served by this instance yet").
	eventually(t, "every table synced and served", func() bool {
		for _, n := range []string{"orders", "billing", "frozen"} {
			if st, _ := s.Table(n); !st.Synced || !st.Owned {
				return false
			}
		}
		return true
	})

	// A running job's progress: 25 of 100 rows in 10 s leave 30 s.
	if err := s.Trigger("orders", scheduler.KindCompact); err != nil {
		t.Fatal(err)
	}
	<-started
	clk.Advance(10 * time.Second)
	dom := loadDOM(t, browser, r.base+"/")
	if !strings.Contains(dom, "25 of 100 rows, 0 bytes, about 30 s left") {
		t.Errorf("the running job's ETA is not shown as seconds left:\n%s", dom)
	}
	if !strings.Contains(dom, "job running for 10s") {
		t.Errorf("the debt lacks the running job's age")
	}
	close(release)
	eventually(t, "compact finished", func() bool {
		st, _ := s.Table("orders")
		return st.Jobs["compact"].LastRun != nil && st.Running == nil
	})

	dom = loadDOM(t, browser, r.base+"/")
	// The lease the job ran under is held until its TTL runs out.
	if !strings.Contains(dom, `<span class="lease">lease inst1 (epoch `) {
		t.Errorf("the lease held is not shown as held:\n%s", dom)
	}
	// The fleet row of the no-compact table says so, with the reason.
	if !regexp.MustCompile(`<a href="#table-frozen">frozen</a></td><td><span class="state state-ok">ok</span> <span class="state state-marked" title="incident 12">marked no-compact</span>`).MatchString(dom) {
		t.Errorf("the fleet row of a no-compact table does not show the mark:\n%s", dom)
	}
	// Shard ids: 8 characters shown, the whole in the title.
	for _, id := range shards {
		want := `<code class="shard-id" title="` + id + `">` + id[:8] + "…</code>"
		if !strings.Contains(dom, want) {
			t.Errorf("shard %s is not shortened with its id in a title (want %s)", id, want)
		}
		if strings.Contains(dom, ">"+id+"<") {
			t.Errorf("shard %s is shown whole", id)
		}
	}
	// Debt and the next compaction, per table.
	for _, want := range []string{
		"<h3>Debt</h3>", "6 generations not merged",
		"<h3>Next compaction</h3>",
		"Compaction is off for this table: marked no-compact (incident 12). What it would take:",
		`<tr class="plan-group"><td>0 (small), 1 (small)</td><td>20</td></tr>`,
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("DOM:\n%s", dom)
	}

	// Recent jobs follow the filter: billing ran nothing.
	byName := loadDOM(t, browser, r.base+"/?q=bill")
	if !strings.Contains(byName, "<h2>Recent jobs</h2>\n<p class=\"muted\">None yet.</p>") || strings.Contains(byName, "compacted for the page test") {
		t.Errorf("recent jobs ignore the filter:\n%s", byName)
	}
	if byOrders := loadDOM(t, browser, r.base+"/?q=ord"); !strings.Contains(byOrders, "compacted for the page test") {
		t.Errorf("the filtered recent jobs lack the table's own:\n%s", byOrders)
	}

	// Once its TTL has passed without renewal, nobody holds the lease.
	clk.Advance(31 * time.Second)
	expired := loadDOM(t, browser, r.base+"/?q=orders")
	if strings.Contains(expired, `<span class="lease">`) || !strings.Contains(expired, `<span class="lease lease-expired">no lease held (the last, inst1's epoch `) {
		t.Errorf("an expired lease is shown as held:\n%s", expired)
	}
}
