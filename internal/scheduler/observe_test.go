package scheduler_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/compactord/compactord/internal/scheduler"
)

// A shard publishing an SSTable the base table has not merged triggers a
// merge (trigger "change") at the next poll, without waiting for the
// merge schedule; the debt gauges follow.
func TestChangePollingTriggersMerge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		url := memRoot(t) + "/t"
		tb := createTable(t, url)
		s0 := configureShards(t, tb, 1)[0]
		// Claimed before the first sync, which lists the shard (a shard
		// created later is found by a later sync). A claim alone publishes no
		// generation: no merge.
		w := claimShard(t, tb, s0)
		cfg := testConfig()
		cfg.PollInterval = time.Second
		h := start(t, harnessOpts{bubble: true, cfg: cfg, kinds: []scheduler.Kind{scheduler.KindMerge}}, scheduler.TableSpec{Name: "t", URL: url})
		h.waitSynced("t")
		h.idle(2)
		h.advance(time.Second)
		h.idle(2)
		if n := h.jobs.count("t", scheduler.KindMerge); n != 0 {
			t.Fatalf("%d merges without new SSTables", n)
		}
		flushRow(t, tb, w)
		for i := 0; i < 10 && !within(func() bool { return h.jobs.count("t", scheduler.KindMerge) > 0 }); i++ {
			h.advance(time.Second)
		}
		calls := h.jobs.snapshot()
		if len(calls) == 0 || calls[0].trigger != scheduler.TriggerChange {
			t.Fatalf("calls %+v, want a merge triggered by the change", calls)
		}
		if got := h.metric("compactord_mem_wal_pending_generations", "table", "t", "shard", s0); got != 1 {
			t.Fatalf("pending generations = %v", got)
		}
		// The bytes retained come from the periodic sync's listing of the
		// generation directories.
		h.advance(cfg.SyncInterval)
		eventually(t, "retained not_merged bytes", func() bool {
			return h.metric("compactord_sstable_retained_bytes", "table", "t", "shard", s0, "reason", "not_merged") > 0
		})
	})
}
