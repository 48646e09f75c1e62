package progress_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/progress"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newObserved(t *testing.T, interval time.Duration) (*progress.Reporter, *clock.Fake, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zap.InfoLevel)
	fc := clock.NewFake(t0)
	r := progress.New(progress.Options{Clock: fc, Logger: zap.New(core), Interval: interval})
	return r, fc, logs
}

func fields(e observer.LoggedEntry) map[string]any { return e.ContextMap() }

// A job-shaped loop: 60 batches of 1 000 rows and 10 000 bytes, one second
// apart, out of 60 000 rows. With a 5 s interval the lines come at 5, 10,
// ... 60 s (12 lines, never two within 5 s), each with the rate (1 000
// rows/s, 10 000 B/s) and the ETA (the rows left at that rate), then one
// final line with the totals and the duration.
func TestLinesAtIntervalWithRateAndETA(t *testing.T) {
	r, fc, logs := newObserved(t, 5*time.Second)
	ctx := progress.With(context.Background(), r)
	rep := progress.From(ctx)
	if rep != r {
		t.Fatal("From does not return the reporter With put on the context")
	}
	rep.Start("compact", progress.Units{Rows: 60_000, Bytes: 600_000})
	for i := 1; i <= 60; i++ {
		fc.Advance(time.Second)
		rep.Add(1000, 10_000)
		// Every line so far is at a multiple of 5 s.
		if got, want := logs.FilterMessage("progress").Len(), i/5; got != want {
			t.Fatalf("after %d s: %d progress lines, want %d", i, got, want)
		}
	}
	lines := logs.FilterMessage("progress").All()
	var prev time.Duration
	for k, e := range lines {
		f := fields(e)
		el := time.Duration(f["elapsed_seconds"].(float64) * float64(time.Second))
		if k > 0 && el-prev < 5*time.Second {
			t.Fatalf("line %d at %s, %s after the previous one", k, el, el-prev)
		}
		prev = el
		done := int64(5000 * (k + 1))
		if f["rows_done"] != done || f["rows_total"] != int64(60_000) || f["bytes_done"] != done*10 || f["phase"] != "compact" {
			t.Fatalf("line %d: %v", k, f)
		}
		if f["rate_rows_per_s"] != 1000.0 || f["rate_bytes_per_s"] != 10_000.0 {
			t.Fatalf("line %d: rates %v, %v; want 1000, 10000", k, f["rate_rows_per_s"], f["rate_bytes_per_s"])
		}
		if want := float64(60_000-done) / 1000; f["eta_seconds"] != want {
			t.Fatalf("line %d: eta %v, want %v", k, f["eta_seconds"], want)
		}
		if e.Level != zap.InfoLevel {
			t.Fatalf("line %d at %s", k, e.Level)
		}
	}
	s, ok := rep.Snapshot()
	if !ok || s.RowsDone != 60_000 || s.BytesDone != 600_000 || s.ETASeconds == nil || *s.ETASeconds != 0 ||
		s.RateRowsPerS != 1000 || !s.StartedAt.Equal(t0) || s.Phase != "compact" {
		t.Fatalf("snapshot %+v", s)
	}
	fc.Advance(2 * time.Second)
	rep.Finish()
	final := logs.FilterMessage("progress done").All()
	if len(final) != 1 {
		t.Fatalf("%d final lines", len(final))
	}
	f := fields(final[0])
	if f["rows_done"] != int64(60_000) || f["bytes_done"] != int64(600_000) || f["duration_seconds"] != 62.0 {
		t.Fatalf("final line %v", f)
	}
	rep.Finish() // ended: nothing more
	if logs.Len() != 13 {
		t.Fatalf("%d lines in all, want 12 progress and 1 final", logs.Len())
	}
}

// Batches faster than the interval log no more often than the interval.
func TestNoMoreOftenThanInterval(t *testing.T) {
	r, fc, logs := newObserved(t, 5*time.Second)
	r.Start("merge", progress.Units{})
	for range 1000 {
		fc.Advance(100 * time.Millisecond)
		r.Add(10, 0)
	}
	// 100 s of work: one line per 5 s.
	if n := logs.FilterMessage("progress").Len(); n != 20 {
		t.Fatalf("%d lines over 100 s at a 5 s interval", n)
	}
	// An unknown total has no ETA.
	if _, ok := fields(logs.All()[0])["eta_seconds"]; ok {
		t.Fatal("an ETA without a total")
	}
}

// Work shorter than the interval logs nothing at all, not even a final
// line: a quick one-shot command keeps stderr empty.
func TestShortWorkQuiet(t *testing.T) {
	r, fc, logs := newObserved(t, 5*time.Second)
	r.Start("cleanup", progress.Units{Rows: 3})
	for range 3 {
		fc.Advance(time.Second)
		r.Add(1, 100)
	}
	r.Finish()
	if logs.Len() != 0 {
		t.Fatalf("short work logged %d lines", logs.Len())
	}
}

// A second Start ends the first phase (its final line) and counts afresh.
func TestPhases(t *testing.T) {
	r, fc, logs := newObserved(t, time.Second)
	r.Start("index catchup", progress.Units{Rows: 10})
	fc.Advance(2 * time.Second)
	r.Add(10, 0)
	r.Start("index remap", progress.Units{Rows: 4})
	fc.Advance(time.Second)
	r.Add(1, 0)
	s, _ := r.Snapshot()
	if s.Phase != "index remap" || s.RowsDone != 1 || s.RowsTotal != 4 || *s.ETASeconds != 3 {
		t.Fatalf("snapshot %+v", s)
	}
	final := logs.FilterMessage("progress done").All()
	if len(final) != 1 || fields(final[0])["phase"] != "index catchup" || fields(final[0])["rows_done"] != int64(10) {
		t.Fatalf("final lines %v", final)
	}
}

// Fanned-out workers add concurrently (run with -race); the counts are
// exact.
func TestConcurrentAdd(t *testing.T) {
	r, fc, _ := newObserved(t, time.Second)
	r.Start("compact", progress.Units{Rows: 8 * 500})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 500 {
				r.Add(1, 2)
				_, _ = r.Snapshot()
			}
		})
	}
	wg.Go(func() {
		for range 50 {
			fc.Advance(time.Second)
		}
	})
	wg.Wait()
	s, _ := r.Snapshot()
	if s.RowsDone != 4000 || s.BytesDone != 8000 {
		t.Fatalf("snapshot %+v", s)
	}
}

// Without a reporter on the context every method is a no-op.
func TestNilReporter(t *testing.T) {
	r := progress.From(context.Background())
	if r != nil {
		t.Fatal("a reporter from nowhere")
	}
	r.Start("x", progress.Units{Rows: 1})
	r.Add(1, 1)
	r.Grow(progress.Units{Rows: 1})
	r.Finish()
	if _, ok := r.Snapshot(); ok {
		t.Fatal("a nil reporter has a snapshot")
	}
	// No logger: snapshots only.
	fc := clock.NewFake(t0)
	q := progress.New(progress.Options{Clock: fc})
	q.Add(5, 0)
	fc.Advance(time.Minute)
	q.Add(5, 0)
	q.Finish()
	if s, ok := q.Snapshot(); !ok || s.RowsDone != 10 {
		t.Fatalf("snapshot %+v %v", s, ok)
	}
}

// BenchmarkAdd is the cost of one report (the jobs make one per batch,
// fragment or object): a lock, a clock reading and, at most once per
// interval, a line.
func BenchmarkAdd(b *testing.B) {
	r := progress.New(progress.Options{Logger: zap.NewNop()})
	r.Start("bench", progress.Units{Rows: int64(b.N)})
	for b.Loop() {
		r.Add(1, 1)
	}
}

// BenchmarkAddNil is a report with no reporter on the context.
func BenchmarkAddNil(b *testing.B) {
	r := progress.From(context.Background())
	for b.Loop() {
		r.Add(1, 1)
	}
}
