package scheduler_test

import (
	"context"
	"errors"
	"sync"
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

// staleMarks holds the next listing of the marks, once it has listed,
// until released: a sync that read the marks before a Pause applies them
// after it.
type staleMarks struct {
	storage.Bucket
	armed    chan struct{} // closed: the next listing of the marks is held
	listed   chan struct{} // closed when the held listing has listed
	release  chan struct{}
	holdOnce sync.Once
}

func (b *staleMarks) List(ctx context.Context, prefix string, fn func(storage.Attrs) error) error {
	err := b.Bucket.List(ctx, prefix, fn)
	if prefix != marker.Dir {
		return err
	}
	select {
	case <-b.armed:
	default:
		return err
	}
	held := false
	b.holdOnce.Do(func() { held = true })
	if held {
		close(b.listed)
		<-b.release
	}
	return err
}

// A sync that read the marks before an operator's Pause does not undo the
// pause when it applies what it read.
func TestPauseSurvivesASyncThatReadTheMarksBefore(t *testing.T) {
	cfg := testConfig()
	cfg.Schedule.Merge = "@every 1s"
	sm := &staleMarks{armed: make(chan struct{}), listed: make(chan struct{}), release: make(chan struct{})}
	h := start(t, harnessOpts{cfg: cfg, wrap: func(_ string, b storage.Bucket) storage.Bucket {
		sm.Bucket = b
		return sm
	}}, specs(t, "t")...)
	h.waitSynced("t")
	h.idle(3)
	close(sm.armed)
	h.clk.Advance(cfg.SyncInterval)
	<-sm.listed // the sync has listed no pause mark
	if err := h.s.Pause(context.Background(), "t", "test"); err != nil {
		t.Fatal(err)
	}
	// The held sync finishes later than anything before it: the paused
	// table runs nothing that would sync it meanwhile.
	before := *h.status("t").LastSync
	h.clk.Advance(time.Second)
	close(sm.release)
	eventually(t, "the held sync done", func() bool { ls := h.status("t").LastSync; return ls != nil && ls.After(before) })
	if !h.status("t").Paused {
		t.Fatal("a sync that read the marks before the pause resumed the table")
	}
	// The merge that came due with the sync may have run before the
	// pause; nothing runs after it.
	h.idle(3)
	ran := h.jobs.count("t", "")
	h.tick(3, 3)
	if n := h.jobs.count("t", ""); n != ran {
		t.Fatalf("the paused table ran %d jobs", n-ran)
	}
}
