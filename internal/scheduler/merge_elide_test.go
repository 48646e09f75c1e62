package scheduler_test

import (
	"testing"
	"time"

	"github.com/compactord/compactord/internal/scheduler"
)

// A scheduled merge is elided while change polling shows no shard with a
// flushed generation the table has not merged, even when the table's
// fingerprint keeps changing (here: every merge "commits"). Once a shard
// flushes, merges run: the poll's, then scheduled ones while the generation
// stays unmerged. Without change polling, nothing is elided this way.
func TestScheduledMergeElidedWhileNothingIsFlushed(t *testing.T) {
	for _, poll := range []time.Duration{time.Second, 0} {
		t.Run("poll="+poll.String(), func(t *testing.T) {
			url := memRoot(t) + "/t"
			tb := createTable(t, url)
			shards := configureShards(t, tb, 2)
			// Claimed before the first sync, which lists the shard; a
			// shard created later is found by a later sync.
			w := claimShard(t, tb, shards[0])
			cfg := testConfig()
			cfg.PollInterval = poll
			cfg.Schedule.Merge = "@every 1s"
			h := start(t, harnessOpts{cfg: cfg, kinds: []scheduler.Kind{scheduler.KindMerge}}, scheduler.TableSpec{Name: "t", URL: url})
			h.waitSynced("t")
			h.tick(5, 3)
			n := h.jobs.count("t", scheduler.KindMerge)
			if poll == 0 {
				if n < 4 {
					t.Fatalf("%d merges in 5 schedule ticks without change polling, want every tick", n)
				}
				return
			}
			if n != 0 {
				t.Fatalf("%d merges with nothing flushed", n)
			}
			if got := h.metric("compactord_job_runs_total", "table", "t", "kind", "merge", "result", "skipped"); got < 4 {
				t.Fatalf("elided merges counted %v times, want one per tick", got)
			}

			flushRow(t, tb, w)
			h.tick(5, 3)
			calls := h.jobs.snapshot()
			if len(calls) < 3 || calls[0].trigger != scheduler.TriggerChange {
				t.Fatalf("after a flush: %+v; want the poll's merge, then scheduled ones while it stays unmerged", calls)
			}
		})
	}
}
