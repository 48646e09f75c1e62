package scheduler_test

import (
	"context"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/scheduler"
	"github.com/compactord/compactord/lancewal"
)

// The debt gauges the scheduler exports from its own state: the running
// attempt's age (only while it runs) against the kind's budget, how long
// an operator's mark has been on, and the MemWAL generations and bytes
// retained by reason, summed over the table's shards.
func TestDebtGaugesFromSchedulerState(t *testing.T) {
	cfg := testConfig()
	cfg.Timeouts.Compact = 2 * time.Hour
	sp := specs(t, "t")
	tb, err := lancewal.OpenTable(context.Background(), sp[0].URL)
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	shards := configureShards(t, tb, 2)
	for _, sh := range shards {
		w := claimShard(t, tb, sh)
		flushRow(t, tb, w)
		flushRow(t, tb, w)
	}
	h := start(t, harnessOpts{cfg: cfg}, sp...)
	h.waitSynced("t")
	// Schedules off: the main loop waits without a timer.
	h.idle(2)

	if got := h.metric("compactord_table_retained_generations", "table", "t", "reason", "not_merged"); got != 4 {
		t.Errorf("not-merged generations %v, want 2 shards × 2", got)
	}
	var perShard float64
	for _, sh := range shards {
		perShard += h.metric("compactord_sstable_retained_bytes", "table", "t", "shard", sh, "reason", "not_merged")
	}
	if got := h.metric("compactord_table_retained_bytes", "table", "t", "reason", "not_merged"); got != perShard || got == 0 {
		t.Errorf("not-merged bytes %v, want the shards' sum %v", got, perShard)
	}
	if got, ok := h.gauge("compactord_table_retained_generations", "table", "t", "reason", "index_lag"); !ok || got != 0 {
		t.Errorf("index-lag generations %v (present %v), want 0", got, ok)
	}
	if got := h.metric("compactord_job_budget_seconds", "kind", "compact"); got != 7200 {
		t.Errorf("compact budget %v", got)
	}
	if got := h.metric("compactord_job_budget_seconds", "kind", "merge"); got != 60 {
		t.Errorf("merge budget %v", got)
	}

	// A running attempt's age follows the clock; 0 again at the end.
	g := newGate()
	h.jobs.setBehave(func(ctx context.Context, c call) (scheduler.Outcome, error) {
		if c.kind == scheduler.KindCompact {
			if err := g.wait(ctx); err != nil {
				return scheduler.Outcome{}, err
			}
		}
		return scheduler.Outcome{Summary: "ok"}, nil
	})
	if err := h.s.Trigger("t", scheduler.KindCompact); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the compaction running", func() bool { return h.status("t").Running != nil })
	h.clk.Advance(90 * time.Second)
	if got := h.metric("compactord_job_running_seconds", "table", "t", "kind", "compact"); got != 90 {
		t.Errorf("running age %v, want 90", got)
	}
	g.open()
	eventually(t, "the compaction done", func() bool { return h.status("t").Running == nil })
	if got, ok := h.gauge("compactord_job_running_seconds", "table", "t", "kind", "compact"); !ok || got != 0 {
		t.Errorf("running age %v (present %v) with nothing running, want 0", got, ok)
	}

	// A pause's age: the mark's time, while it lasts.
	pausedAt := h.now()
	if err := h.s.Pause(context.Background(), "t", "backup"); err != nil {
		t.Fatal(err)
	}
	if got := h.metric("compactord_table_mark_since_timestamp_seconds", "table", "t", "mark", "pause"); got != float64(pausedAt.Unix()) {
		t.Errorf("pause since %v, want %d", got, pausedAt.Unix())
	}
	if err := h.s.Resume(context.Background(), "t"); err != nil {
		t.Fatal(err)
	}
	if got, ok := h.gauge("compactord_table_mark_since_timestamp_seconds", "table", "t", "mark", "pause"); !ok || got != 0 {
		t.Errorf("pause since %v (present %v) after the resume, want 0", got, ok)
	}
}
