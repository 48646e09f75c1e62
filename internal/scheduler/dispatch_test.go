package scheduler_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/compactord/compactord/internal/scheduler"
)

// Regression (found by the issue-8 concurrency campaign): under constant
// flushing, change polling pends a new merge while each merge runs, and
// dispatch always took the first pending kind in Kinds order, so merge
// ran back to back for the whole run and compaction, index, trim and
// cleanup never ran (0 compactions in 8 s of the campaign). A kind that
// has waited longer must go first; Kinds order only breaks ties.
func TestMergeRepeatedlyPendingDoesNotStarveCompaction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Merge and compact only: a landed merge would queue index and trim.
		h := start(t, harnessOpts{bubble: true, cfg: testConfig(), kinds: []scheduler.Kind{scheduler.KindMerge, scheduler.KindCompact}}, specs(t, "t1")...)
		h.waitSynced("t1")
		g := newGate()
		h.jobs.setBehave(func(ctx context.Context, c call) (scheduler.Outcome, error) {
			if c.kind == scheduler.KindMerge {
				return scheduler.Outcome{Version: 1}, g.wait(ctx)
			}
			return scheduler.Outcome{Version: 1}, nil
		})
		if err := h.s.Trigger("t1", scheduler.KindMerge); err != nil {
			t.Fatal(err)
		}
		eventually(t, "merge running", func() bool { return h.status("t1").Running != nil })
		if err := h.s.Trigger("t1", scheduler.KindCompact); err != nil {
			t.Fatal(err)
		}
		// New SSTables arrive while the merge runs: another merge is pending,
		// since later than the compaction.
		h.advance(time.Second)
		if err := h.s.Trigger("t1", scheduler.KindMerge); err != nil {
			t.Fatal(err)
		}
		g.open()
		eventually(t, "three attempts", func() bool { return h.jobs.count("t1", "") == 3 && h.status("t1").Running == nil })
		calls := h.jobs.snapshot()
		if calls[1].kind != scheduler.KindCompact {
			t.Fatalf("ran %v, %v, %v: the compaction pending since before the second merge must run first", calls[0].kind, calls[1].kind, calls[2].kind)
		}
	})
}
