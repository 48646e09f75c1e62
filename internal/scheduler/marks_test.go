package scheduler_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/marker"
	"github.com/compactord/compactord/internal/scheduler"
	"github.com/compactord/compactord/internal/storage"
)

// A pause is a mark in the table's bucket: an instance that starts later
// (a failover) finds the table paused at its first sync and runs nothing;
// a resume sent to any instance removes the mark for all. A no-compact
// mark stops compaction only.
func TestMarksHonouredByEveryInstance(t *testing.T) {
	cfg := testConfig()
	cfg.Schedule.Merge = "@every 1s"
	cfg.Schedule.Compact = "@every 1s"
	tables := specs(t, "t")
	a := start(t, harnessOpts{cfg: cfg}, tables...)
	a.waitSynced("t")
	ctx := context.Background()
	if err := a.s.Pause(ctx, "t", "restoring a backup"); err != nil {
		t.Fatal(err)
	}
	b := start(t, harnessOpts{cfg: cfg}, tables...)
	b.waitSynced("t")
	st := b.status("t")
	if !st.Paused || st.State != "paused" || len(st.Marks) != 1 || st.Marks[0].Kind != marker.Pause || st.Marks[0].Reason != "restoring a backup" {
		t.Fatalf("the second instance does not see the pause: %+v", st)
	}
	if got := b.metric("compactord_table_paused", "table", "t"); got != 1 {
		t.Fatalf("paused on b = %v", got)
	}
	b.tick(3, 3)
	if n := b.jobs.count("t", ""); n != 0 {
		t.Fatalf("the paused table ran %d jobs on the second instance", n)
	}
	var ae *scheduler.APIError
	if err := b.s.Trigger("t", scheduler.KindMerge); !errors.As(err, &ae) || ae.Status != 409 {
		t.Fatalf("trigger on b: %v", err)
	}

	// Resume through b; a sees it at its next sync.
	if err := b.s.Resume(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	a.idle(3)
	a.clk.Advance(cfg.SyncInterval)
	eventually(t, "a sees the resume", func() bool { return !a.status("t").Paused })
	eventually(t, "a runs again", func() bool { a.clk.Advance(time.Second); return a.jobs.count("t", scheduler.KindMerge) > 0 })

	// No-compact, written as `compactord table mark` does.
	bk, err := storage.Open(ctx, tables[0].URL)
	if err != nil {
		t.Fatal(err)
	}
	defer bk.Close()
	if err := marker.Put(ctx, bk, marker.Mark{Kind: marker.NoCompact, Reason: "bad fragment under investigation", Since: time.Now()}); err != nil {
		t.Fatal(err)
	}
	b.idle(3)
	b.clk.Advance(cfg.SyncInterval)
	eventually(t, "b sees no-compact", func() bool { return len(b.status("t").Marks) == 1 })
	compacts := b.jobs.count("t", scheduler.KindCompact)
	merges := b.jobs.count("t", scheduler.KindMerge)
	b.tick(3, 3)
	if got := b.jobs.count("t", scheduler.KindCompact); got != compacts {
		t.Fatalf("%d compactions on a no-compact table", got-compacts)
	}
	if b.jobs.count("t", scheduler.KindMerge) <= merges {
		t.Fatal("merges stopped too")
	}
	if err := b.s.Trigger("t", scheduler.KindCompact); !errors.As(err, &ae) || ae.Status != 409 {
		t.Fatalf("compact trigger on a no-compact table: %v", err)
	}
	if js := b.status("t").Jobs["compact"]; js.NextAttempt != nil {
		t.Fatalf("no-compact table plans a compaction at %v", js.NextAttempt)
	}
}
