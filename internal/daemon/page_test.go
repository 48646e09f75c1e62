package daemon_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/daemon"
	"github.com/compactord/compactord/internal/merge"
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
	eventually(t, "every table synced", func() bool {
		for _, n := range []string{"archive", "billing", "lagging", "orders"} {
			if st, _ := s.Table(n); !st.Synced {
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
