package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/scheduler"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/stores"
	"github.com/compactord/compactord/lancewal"
)

func TestMain(m *testing.M) { stores.Main(m) }

var bucketSeq atomic.Int64

// memRoot returns a fresh named in-memory bucket URL.
func memRoot(t *testing.T) string {
	return fmt.Sprintf("mem://sched-%s-%d", strings.ReplaceAll(strings.ToLower(t.Name()), "/", "-"), bucketSeq.Add(1))
}

// createTable makes a real Lance table (version 1) at url, opened for
// MemWAL writes.
func createTable(t *testing.T, url string) *lancewal.Table {
	t.Helper()
	tb, err := lancewal.CreateTable(context.Background(), url, []lancewal.Column{
		{Name: "id", Type: "int64"}, {Name: "cat", Type: "string", Nullable: true}, {Name: "val", Type: "double", Nullable: true}}, "id")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tb.Close() })
	return tb
}

// configureShards gives tb a MemWAL of n shards (bucket sharding on id;
// one unsharded shard for n = 1) and returns their ids.
func configureShards(t *testing.T, tb *lancewal.Table, n int) []string {
	t.Helper()
	spec := lancewal.Config{Sharding: lancewal.Bucket, Column: "id", NumBuckets: n}
	if n == 1 {
		spec = lancewal.Config{Sharding: lancewal.Unsharded}
	}
	cfg, err := tb.EnableMemWAL(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Shards()
}

// opener opens mem:// Lance tables, observed as the daemon observes them
// (internal/memwal); wrap (optional) wraps each bucket, for
// fault injection.
func opener(wrap func(name string, b storage.Bucket) storage.Bucket) scheduler.Opener {
	return func(ctx context.Context, spec scheduler.TableSpec) (*scheduler.TableHandle, error) {
		raw, err := storage.Open(ctx, spec.URL)
		if err != nil {
			return nil, err
		}
		b := raw
		if wrap != nil {
			b = wrap(spec.Name, raw)
		}
		return &scheduler.TableHandle{Name: spec.Name, URL: spec.URL, Bucket: b, Observer: memwal.NewObserver(b), Close: raw.Close}, nil
	}
}

type call struct {
	table   string
	kind    scheduler.Kind
	trigger scheduler.Trigger
}

// fakeJobs stands in for the real jobs: it only injects outcomes and
// faults, and records what ran and how much ran at once.
type fakeJobs struct {
	mu         sync.Mutex
	calls      []call
	running    map[string]int
	maxTable   int
	total      int
	maxTotal   int
	behave     func(ctx context.Context, c call) (scheduler.Outcome, error)
	overlapErr error
}

func newFakeJobs() *fakeJobs { return &fakeJobs{running: map[string]int{}} }

func (f *fakeJobs) set(kinds ...scheduler.Kind) map[scheduler.Kind]scheduler.JobFunc {
	if len(kinds) == 0 {
		kinds = scheduler.Kinds
	}
	out := map[scheduler.Kind]scheduler.JobFunc{}
	for _, k := range kinds {
		out[k] = func(ctx context.Context, h *scheduler.TableHandle) (scheduler.Outcome, error) {
			c := call{h.Name, k, h.Trigger}
			f.mu.Lock()
			f.calls = append(f.calls, c)
			f.running[h.Name]++
			f.total++
			f.maxTable = max(f.maxTable, f.running[h.Name])
			f.maxTotal = max(f.maxTotal, f.total)
			behave := f.behave
			f.mu.Unlock()
			defer func() {
				f.mu.Lock()
				f.running[h.Name]--
				f.total--
				f.mu.Unlock()
			}()
			if behave == nil {
				// A commit, so that the run is never elided.
				return scheduler.Outcome{Version: 1, Summary: "ok"}, nil
			}
			return behave(ctx, c)
		}
	}
	return out
}

func (f *fakeJobs) setBehave(b func(ctx context.Context, c call) (scheduler.Outcome, error)) {
	f.mu.Lock()
	f.behave = b
	f.mu.Unlock()
}

func (f *fakeJobs) snapshot() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), f.calls...)
}

func (f *fakeJobs) count(table string, kind scheduler.Kind) int {
	n := 0
	for _, c := range f.snapshot() {
		if c.table == table && (kind == "" || c.kind == kind) {
			n++
		}
	}
	return n
}

func (f *fakeJobs) maxima() (perTable, total int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.maxTable, f.maxTotal
}

// testConfig: schedules off (tests trigger or turn them on), leasing off,
// short backoffs.
func testConfig() scheduler.Config {
	c := scheduler.DefaultConfig()
	c.Schedule = scheduler.Schedules{Merge: "off", Compact: "off", Index: "off", Trim: "off", Cleanup: "off"}
	c.PollInterval = 0
	c.SyncInterval = 10 * time.Second
	c.Retry = scheduler.RetryConfig{BaseBackoff: time.Second, MaxBackoff: 4 * time.Second, QuarantineAfter: 3}
	c.ShutdownGrace = 5 * time.Second
	c.Timeouts = scheduler.Timeouts{Default: time.Minute}
	c.Lease.Enabled = false
	return c
}

type harness struct {
	t *testing.T
	// clk is the fake clock the scheduler runs on; nil in a synctest
	// bubble (bubble), where the scheduler runs on the wall clock, which
	// the bubble fakes.
	clk    *clock.Fake
	bubble bool
	reg    *prometheus.Registry
	s      *scheduler.Scheduler
	jobs   *fakeJobs
	cancel context.CancelFunc
	done   chan error
}

type harnessOpts struct {
	cfg scheduler.Config
	// bubble: the test runs in a synctest bubble (inBubble): the
	// scheduler gets the wall clock, which the bubble fakes, and waiting
	// for the scheduler is synctest.Wait, not polling.
	bubble bool
	clk    *clock.Fake
	jobs   *fakeJobs
	kinds  []scheduler.Kind
	deps   func(*scheduler.Deps)
	wrap   func(name string, b storage.Bucket) storage.Bucket
}

func start(t *testing.T, o harnessOpts, tables ...scheduler.TableSpec) *harness {
	t.Helper()
	var clk clock.Clock
	switch {
	case o.bubble:
		clk = clock.Real()
		bubbles.Store(t, true)
		t.Cleanup(func() { bubbles.Delete(t) })
	case o.clk == nil:
		o.clk = clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		clk = o.clk
	default:
		clk = o.clk
	}
	if o.jobs == nil {
		o.jobs = newFakeJobs()
	}
	reg := prometheus.NewRegistry()
	deps := scheduler.Deps{Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)), Registerer: reg, Clock: clk,
		Open: opener(o.wrap), Jobs: o.jobs.set(o.kinds...)}
	if o.deps != nil {
		o.deps(&deps)
	}
	s, err := scheduler.New(o.cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetTables(tables); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{t: t, clk: o.clk, bubble: o.bubble, reg: reg, s: s, jobs: o.jobs, cancel: cancel, done: make(chan error, 1)}
	go func() { h.done <- s.Run(ctx) }()
	t.Cleanup(func() { h.stop() })
	return h
}

// stop shuts the scheduler down, moving the fake clock past any grace
// period until Run returns.
func (h *harness) stop() error {
	h.cancel()
	if h.bubble {
		// The bubble's time moves past the grace period by itself.
		err := <-h.done
		h.done <- err
		return err
	}
	for {
		select {
		case err := <-h.done:
			h.done <- err // keep it for a second stop
			return err
		default:
		}
		h.clk.Advance(time.Second)
		time.Sleep(time.Millisecond)
	}
}

// bubbles holds the tests that run in a synctest bubble (harnessOpts.bubble).
var bubbles sync.Map

// eventually polls cond (it never sleeps to synchronise: it re-checks a
// condition until it holds or the deadline passes). In a synctest bubble
// it waits until every goroutine of the bubble is blocked, and cond must
// hold then: no polling.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if _, ok := bubbles.Load(t); ok {
		synctest.Wait()
		if !cond() {
			t.Fatalf("once the scheduler settled, not %s", what)
		}
		return
	}
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func (h *harness) status(name string) scheduler.TableStatus {
	st, ok := h.s.Table(name)
	if !ok {
		h.t.Fatalf("no table %q", name)
	}
	return st
}

func (h *harness) waitSynced(names ...string) {
	h.t.Helper()
	eventually(h.t, "ready", h.s.Ready)
	for _, n := range names {
		eventually(h.t, n+" synced and owned", func() bool { st := h.status(n); return st.Synced && st.Owned })
	}
}

func (h *harness) metric(name string, labels ...string) float64 {
	h.t.Helper()
	v, _ := h.gauge(name, labels...)
	return v
}

// gauge is metric's value and whether the series exists.
func (h *harness) gauge(name string, labels ...string) (float64, bool) {
	h.t.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if got[labels[i]] != labels[i+1] {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue(), true
			case m.Gauge != nil:
				return m.Gauge.GetValue(), true
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount()), true
			}
		}
	}
	// Counters, histograms and most gauges are created by their first
	// value: an absent series reads as 0 (the alerting series that must
	// exist at 0 are checked by TestSeriesPreCreated).
	return 0, false
}

// idle waits until no attempt runs and every loop is parked on a timer:
// the main, sync and poll loops (and the lease loop with leasing on).
func (h *harness) idle(loops int) {
	h.t.Helper()
	if h.bubble {
		synctest.Wait()
		if n := h.metric("compactord_workers_busy"); n != 0 {
			h.t.Fatalf("the scheduler settled with %v attempts running", n)
		}
		return
	}
	eventually(h.t, "scheduler idle", func() bool {
		return h.metric("compactord_workers_busy") == 0 && h.clk.Timers() >= loops
	})
}

// tick advances the clock a second n times, letting the scheduler go idle
// (loops timers armed) before each step and after the last.
func (h *harness) tick(n, loops int) {
	h.t.Helper()
	for range n {
		h.idle(loops)
		h.advance(time.Second)
	}
	h.idle(loops)
}

// advance moves the scheduler's clock d forward: the fake clock, or in a
// bubble the bubble's time (timers fire at their own instants on the way).
func (h *harness) advance(d time.Duration) {
	if h.bubble {
		time.Sleep(d)
		return
	}
	h.clk.Advance(d)
}

// now is the scheduler's time.
func (h *harness) now() time.Time {
	if h.bubble {
		return time.Now()
	}
	return h.clk.Now()
}

// claimShard returns a MemWAL writer that has claimed shard of tb.
func claimShard(t *testing.T, tb *lancewal.Table, shard string) *lancewal.Writer {
	t.Helper()
	w, err := tb.OpenWriter(context.Background(), shard, lancewal.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Abandon)
	return w
}

// flushRow has w write one row (a key its shard owns) and flush it: the
// shard publishes a new generation, which the table has not merged.
func flushRow(t *testing.T, tb *lancewal.Table, w *lancewal.Writer) {
	t.Helper()
	ctx := context.Background()
	key := int64(-1)
	for k := int64(0); k < 1000 && key < 0; k++ {
		if s, err := tb.ShardFor(ctx, k); err != nil {
			t.Fatal(err)
		} else if s == w.Shard() {
			key = k
		}
	}
	if err := w.Upsert(ctx, []lancewal.Row{{"id": key, "cat": "a", "val": 1.5}}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// gate blocks jobs until opened.
type gate struct {
	once sync.Once
	ch   chan struct{}
}

func newGate() *gate  { return &gate{ch: make(chan struct{})} }
func (g *gate) open() { g.once.Do(func() { close(g.ch) }) }
func (g *gate) wait(ctx context.Context) error {
	select {
	case <-g.ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

var errPlain = errors.New("injected job failure")
