package scheduler_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/scheduler"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/lancewal"
)

func memBucket(t *testing.T) storage.Bucket { return openBucket(t, memRoot(t)) }

func openBucket(t *testing.T, url string) storage.Bucket {
	t.Helper()
	b, err := storage.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func sampleState() scheduler.JobState {
	return scheduler.JobState{Seq: 7, Since: t0, OldestRetained: 41, OldestRetainedTime: t0.Add(time.Minute),
		Kinds: map[scheduler.Kind]scheduler.KindState{
			scheduler.KindCleanup: {LastRun: t0.Add(time.Hour), LastResult: scheduler.ClassError},
			scheduler.KindMerge:   {LastRun: t0.Add(2 * time.Hour), LastResult: scheduler.ClassSuccess, LastSuccess: t0.Add(2*time.Hour + time.Second)},
		}}
}

func TestJobStateRoundTrip(t *testing.T) {
	in := sampleState()
	data, err := scheduler.EncodeJobState(in)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := scheduler.EncodeJobState(in)
	if !bytes.Equal(data, again) {
		t.Fatal("equal states encode to different bytes")
	}
	out, err := scheduler.DecodeJobState(data)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(out) != fmt.Sprint(in) {
		t.Fatalf("decoded %+v, want %+v", out, in)
	}
}

// Damage anywhere is a one-line error, never a plausible partial state.
func TestJobStateDecodeRejectsDamage(t *testing.T) {
	data, err := scheduler.EncodeJobState(sampleState())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"truncated", data[:len(data)-3]},
		{"bad magic", append([]byte("XXXX"), data[4:]...)},
		{"format 2", append(append(append([]byte{}, data[:4]...), 2), data[5:]...)},
		{"flipped bit", func() []byte { d := bytes.Clone(data); d[8] ^= 1; return d }()},
	} {
		_, err := scheduler.DecodeJobState(c.data)
		if !errors.Is(err, scheduler.ErrCorruptJobState) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

func FuzzDecodeJobState(f *testing.F) {
	data, _ := scheduler.EncodeJobState(sampleState())
	empty, _ := scheduler.EncodeJobState(scheduler.JobState{})
	f.Add(data)
	f.Add(empty)
	f.Add([]byte("CMPJ\x01"))
	f.Add(data[:len(data)/2])
	f.Fuzz(func(t *testing.T, b []byte) {
		j, err := scheduler.DecodeJobState(b)
		if err != nil {
			if !errors.Is(err, scheduler.ErrCorruptJobState) {
				t.Fatalf("error without its class: %v", err)
			}
			return
		}
		// What decodes encodes back to a record that decodes the same.
		again, err := scheduler.EncodeJobState(j)
		if err != nil {
			t.Fatal(err)
		}
		j2, err := scheduler.DecodeJobState(again)
		if err != nil || fmt.Sprint(j2) != fmt.Sprint(j) {
			t.Fatalf("re-encoded %+v as %+v (%v)", j, j2, err)
		}
	})
}

// Instances sharing a bucket write the state at once: every write lands as
// its own sequence number and none erases another's news.
func TestSaveJobStateConcurrentWritersKeepEveryNews(t *testing.T) {
	b := memBucket(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, len(scheduler.Kinds))
	for i, k := range scheduler.Kinds {
		wg.Go(func() {
			news := scheduler.JobState{Since: t0.Add(time.Duration(i) * time.Minute),
				Kinds: map[scheduler.Kind]scheduler.KindState{k: {LastRun: t0.Add(time.Duration(i+1) * time.Hour), LastResult: scheduler.ClassSuccess,
					LastSuccess: t0.Add(time.Duration(i+1)*time.Hour + time.Second)}}}
			_, err := scheduler.SaveJobState(ctx, b, news)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got, found, err := scheduler.LoadJobState(ctx, b)
	if err != nil || !found {
		t.Fatalf("load: %v (found %v)", err, found)
	}
	if got.Seq < uint64(len(scheduler.Kinds)) {
		t.Errorf("sequence %d after %d writes", got.Seq, len(scheduler.Kinds))
	}
	if !got.Since.Equal(t0) {
		t.Errorf("since %v, want the earliest, %v", got.Since, t0)
	}
	for i, k := range scheduler.Kinds {
		ks := got.Kinds[k]
		if !ks.LastRun.Equal(t0.Add(time.Duration(i+1)*time.Hour)) || ks.LastResult != scheduler.ClassSuccess {
			t.Errorf("%s: %+v: a writer's news was lost", k, ks)
		}
	}
	// Older records are deleted once a newer one lands.
	n := 0
	if err := b.List(ctx, scheduler.JobStateDir, func(storage.Attrs) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n > 2 {
		t.Errorf("%d records kept", n)
	}
}

// A newer record never loses an older run's times: the later time wins
// whichever order the writes land in.
func TestSaveJobStateKeepsTheLaterTimes(t *testing.T) {
	b := memBucket(t)
	ctx := context.Background()
	late := scheduler.JobState{Kinds: map[scheduler.Kind]scheduler.KindState{scheduler.KindTrim: {LastRun: t0.Add(time.Hour), LastResult: scheduler.ClassRetry}}}
	early := scheduler.JobState{Kinds: map[scheduler.Kind]scheduler.KindState{scheduler.KindTrim: {LastRun: t0, LastResult: scheduler.ClassSuccess, LastSuccess: t0.Add(time.Second)}}}
	for _, j := range []scheduler.JobState{late, early} {
		if _, err := scheduler.SaveJobState(ctx, b, j); err != nil {
			t.Fatal(err)
		}
	}
	got, _, err := scheduler.LoadJobState(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	ks := got.Kinds[scheduler.KindTrim]
	if !ks.LastRun.Equal(t0.Add(time.Hour)) || ks.LastResult != scheduler.ClassRetry || !ks.LastSuccess.Equal(t0.Add(time.Second)) {
		t.Fatalf("%+v", ks)
	}
}

// A damaged newest record is an error to the reader and superseded by the
// next write: it must not stop the schedules for good.
func TestSaveJobStateSupersedesACorruptRecord(t *testing.T) {
	b := memBucket(t)
	ctx := context.Background()
	if _, err := scheduler.SaveJobState(ctx, b, scheduler.JobState{Since: t0}); err != nil {
		t.Fatal(err)
	}
	var key string
	if err := b.List(ctx, scheduler.JobStateDir, func(a storage.Attrs) error { key = a.Key; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, key, []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := scheduler.LoadJobState(ctx, b); !errors.Is(err, scheduler.ErrCorruptJobState) || !strings.Contains(err.Error(), key) {
		t.Fatalf("load of a damaged record: %v", err)
	}
	if _, err := scheduler.SaveJobState(ctx, b, scheduler.JobState{Since: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	got, found, err := scheduler.LoadJobState(ctx, b)
	if err != nil || !found || got.Seq != 2 || !got.Since.Equal(t0.Add(time.Hour)) {
		t.Fatalf("after the write: %+v found %v err %v", got, found, err)
	}
}

// A daemon restarted more often than a schedule's interval still runs the
// kind on time: the schedule resumes from the table's first-seen time or
// the kind's last run, kept in the bucket, and the last success is
// exported from the bucket from the first sync on.
func TestScheduleResumesAfterRestart(t *testing.T) {
	cfg := testConfig()
	cfg.Schedule.Cleanup = "@every 1h"
	clk := clock.NewFake(t0)
	sp := specs(t, "t")
	cleanups := func(h *harness) int { return h.jobs.count("t", scheduler.KindCleanup) }

	// First life: 50 minutes, no cleanup due yet.
	h := start(t, harnessOpts{cfg: cfg, clk: clk}, sp...)
	h.waitSynced("t")
	h.idle(3)
	if got := h.metric("compactord_table_first_seen_timestamp_seconds", "table", "t"); got != float64(t0.Unix()) {
		t.Fatalf("first seen %v, want %d", got, t0.Unix())
	}
	clk.Advance(50 * time.Minute)
	h.idle(3)
	if n := cleanups(h); n != 0 {
		t.Fatalf("%d cleanups before the hour", n)
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}

	// Second life: the hour since the table was first watched ends 10
	// minutes in, not an hour after this start.
	h = start(t, harnessOpts{cfg: cfg, clk: clk}, sp...)
	h.waitSynced("t")
	h.idle(3)
	clk.Advance(t0.Add(time.Hour).Sub(clk.Now()))
	eventually(t, "cleanup an hour after the table was first seen", func() bool { return cleanups(h) == 1 })
	h.idle(3)
	ranAt := h.status("t").Jobs["cleanup"].LastRun.Started
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}

	// Third life, 50 minutes after that run: the last success is exported
	// before any run of this life, and the next cleanup follows the last
	// run by the hour.
	clk.Advance(ranAt.Add(50 * time.Minute).Sub(clk.Now()))
	h = start(t, harnessOpts{cfg: cfg, clk: clk}, sp...)
	h.waitSynced("t")
	h.idle(3)
	if got := h.metric("compactord_job_last_success_timestamp_seconds", "table", "t", "kind", "cleanup"); got < float64(ranAt.Unix()) {
		t.Fatalf("last success %v after a restart, want the run at %v", got, ranAt)
	}
	if got := h.metric("compactord_job_last_run_timestamp_seconds", "table", "t", "kind", "cleanup"); got != float64(ranAt.UnixMilli())/1e3 {
		t.Fatalf("last run %v, want %v", got, ranAt)
	}
	if n := cleanups(h); n != 0 {
		t.Fatalf("cleanup ran %d times at start, 50 minutes after its last run", n)
	}
	clk.Advance(ranAt.Add(time.Hour).Sub(clk.Now()))
	eventually(t, "cleanup an hour after its last run", func() bool { return cleanups(h) == 1 })
}

// A kind whose run came due while no instance ran runs at start.
func TestOverdueScheduleRunsAtStart(t *testing.T) {
	cfg := testConfig()
	cfg.Schedule.Cleanup = "@every 1h"
	clk := clock.NewFake(t0)
	sp := specs(t, "t")
	if _, err := scheduler.SaveJobState(context.Background(), openBucket(t, sp[0].URL), scheduler.JobState{Since: t0.Add(-3 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	h := start(t, harnessOpts{cfg: cfg, clk: clk}, sp...)
	h.waitSynced("t")
	eventually(t, "the overdue cleanup at start", func() bool { return h.jobs.count("t", scheduler.KindCleanup) == 1 })
}

// Generations flushed before the daemon started are merged at start, not
// at the first scheduled merge (change polling reports only what changes
// after its first look).
func TestWaitingGenerationsMergeAtStart(t *testing.T) {
	cfg := testConfig() // merge schedule off, change polling off
	sp := specs(t, "t")
	tb, err := lancewal.OpenTable(context.Background(), sp[0].URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tb.Close() })
	shards := configureShards(t, tb, 1)
	flushRow(t, tb, claimShard(t, tb, shards[0]))
	h := start(t, harnessOpts{cfg: cfg}, sp...)
	h.waitSynced("t")
	eventually(t, "a merge at start", func() bool { return h.jobs.count("t", scheduler.KindMerge) == 1 })
	for _, c := range h.jobs.snapshot() {
		if c.kind == scheduler.KindMerge && c.trigger != scheduler.TriggerChange {
			t.Fatalf("merge triggered by %s", c.trigger)
		}
	}
}

// Another object under the records' folder is passed over, not taken for
// the newest record.
func TestLoadJobStatePassesOverStrayObjects(t *testing.T) {
	b := memBucket(t)
	ctx := context.Background()
	if _, err := scheduler.SaveJobState(ctx, b, scheduler.JobState{Since: t0}); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, scheduler.JobStateDir+"0-notes.txt", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	got, found, err := scheduler.LoadJobState(ctx, b)
	if err != nil || !found || !got.Since.Equal(t0) {
		t.Fatalf("load: %+v found %v err %v", got, found, err)
	}
	if _, err := scheduler.SaveJobState(ctx, b, scheduler.JobState{Since: t0.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := scheduler.LoadJobState(ctx, b); got.Seq != 2 || !got.Since.Equal(t0.Add(-time.Hour)) {
		t.Fatalf("after a second write: %+v", got)
	}
}
