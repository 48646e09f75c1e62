package scheduler

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/robfig/cron/v3"
	"go.uber.org/zap"

	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/inflight"
	"github.com/compactord/compactord/internal/lease"
	"github.com/compactord/compactord/internal/marker"
	"github.com/compactord/compactord/internal/progress"
)

// leaseName is the lease of a whole table, `_leases/table/` under its root.
const leaseName = "table"

// Deps are the scheduler's collaborators.
type Deps struct {
	Logger     *zap.Logger
	Registerer prometheus.Registerer
	Clock      clock.Clock
	// Open opens a table.
	Open Opener
	// Jobs holds the job of each kind this build has; a kind without one
	// is never scheduled.
	Jobs map[Kind]JobFunc
	// Leases, when set, decides which tables this instance works on.
	// Nil: every table (leasing off).
	Leases *lease.Manager
	// Members, when set (with Leases), splits the tables evenly between
	// the live instances.
	Members *lease.Members
}

// Scheduler runs jobs on tables. See the package comment.
type Scheduler struct {
	deps    Deps
	clock   clock.Clock
	logger  *zap.Logger
	metrics *Metrics

	mu       sync.Mutex
	cfg      Config
	sched    [numKinds]cron.Schedule
	interval [numKinds]time.Duration // of sched, for the metrics
	tables   map[string]*tableState
	running  int
	nextID   uint64
	started  bool
	draining bool
	ready    bool
	fatal    error
	members  []string

	wake      chan struct{}
	syncKick  chan struct{}
	leaseKick chan struct{}
	attempts  sync.WaitGroup // running attempts
	bg        sync.WaitGroup // lease releases of removed tables
}

// New checks the configuration and dependencies; it starts nothing.
func New(cfg Config, deps Deps) (*Scheduler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Open == nil {
		return nil, errors.New("scheduler: no table opener")
	}
	if deps.Clock == nil {
		deps.Clock = clock.Real()
	}
	if deps.Logger == nil {
		deps.Logger = zap.NewNop()
	}
	if deps.Registerer == nil {
		deps.Registerer = prometheus.NewRegistry()
	}
	for k, j := range deps.Jobs {
		if k.index() < 0 || j == nil {
			return nil, fmt.Errorf("scheduler: bad job for kind %q", k)
		}
	}
	s := &Scheduler{
		deps: deps, clock: deps.Clock, logger: deps.Logger.With(zap.String("component", "scheduler")),
		metrics: NewMetrics(deps.Registerer), tables: map[string]*tableState{},
		wake: make(chan struct{}, 1), syncKick: make(chan struct{}, 1), leaseKick: make(chan struct{}, 1),
	}
	s.setConfigLocked(cfg)
	if err := deps.Registerer.Register(jobCollector{s}); err != nil {
		return nil, fmt.Errorf("scheduler metrics: %w", err)
	}
	return s, nil
}

// setConfigLocked installs cfg. REQUIRES: s.mu held (or s not shared yet).
func (s *Scheduler) setConfigLocked(cfg Config) {
	now := s.clock.Now()
	for i, k := range Kinds {
		var sched cron.Schedule
		if _, ok := s.deps.Jobs[k]; ok {
			sched, _ = ParseSchedule(cfg.Schedule.Get(k)) // validated
		}
		if cfg.Schedule.Get(k) != s.cfg.Schedule.Get(k) || (sched == nil) != (s.sched[i] == nil) {
			for _, st := range s.tables {
				if st.spec.Schedule.Get(k) != "" {
					continue // the table's own schedule did not change
				}
				st.next[i] = time.Time{}
				if sched != nil {
					st.next[i] = sched.Next(now)
				}
			}
		}
		s.sched[i] = sched
		s.interval[i] = scheduleInterval(sched, now)
	}
	s.cfg = cfg
	// Job settings may have changed with the configuration: nothing is
	// known to be up to date any more.
	for _, st := range s.tables {
		st.clean = [numKinds]string{}
	}
	s.metrics.workers.Set(float64(cfg.Workers))
}

// scheduleInterval is the widest gap between the next runs of sched (0 for
// none): the interval of an @every schedule, and for a cron spec the gap a
// staleness alert must allow (a weekday-only spec has its weekend gap).
func scheduleInterval(sched cron.Schedule, now time.Time) time.Duration {
	if sched == nil {
		return 0
	}
	var widest time.Duration
	t := sched.Next(now)
	for range 16 {
		n := sched.Next(t)
		if n.IsZero() {
			break
		}
		widest = max(widest, n.Sub(t))
		t = n
	}
	return widest
}

// Reconfigure applies a new configuration (SIGHUP): schedules, limits,
// intervals and the retry policy. Lease settings take effect at restart.
func (s *Scheduler) Reconfigure(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	cfg.Lease = s.cfg.Lease
	s.setConfigLocked(cfg)
	s.mu.Unlock()
	s.kick()
	kickChan(s.syncKick)
	return nil
}

// AvailableKinds reports the kinds this scheduler has a job for.
func (s *Scheduler) AvailableKinds() []Kind {
	var out []Kind
	for _, k := range Kinds {
		if _, ok := s.deps.Jobs[k]; ok {
			out = append(out, k)
		}
	}
	return out
}

func kickChan(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// kick wakes the main loop.
func (s *Scheduler) kick() { kickChan(s.wake) }

// SetTables replaces the set of tables. New tables start being synced at
// once; removed ones have their running attempt canceled (ErrTableRemoved)
// and their lease released. A table whose URL changed is removed and added.
func (s *Scheduler) SetTables(specs []TableSpec) error {
	seen := map[string]bool{}
	for _, sp := range specs {
		if sp.Name == "" || sp.URL == "" {
			return fmt.Errorf("table spec needs a name and a URL: %+v", sp)
		}
		for _, k := range Kinds {
			if _, err := ParseSchedule(sp.Schedule.Get(k)); err != nil {
				return fmt.Errorf("table %s: schedule.%s: %w", sp.Name, k, err)
			}
		}
		if seen[sp.Name] {
			return fmt.Errorf("two tables are named %q", sp.Name)
		}
		seen[sp.Name] = true
	}
	s.mu.Lock()
	now := s.clock.Now()
	for name, st := range s.tables {
		if !seen[name] {
			s.removeLocked(st)
		}
	}
	for _, sp := range specs {
		if st, ok := s.tables[sp.Name]; ok {
			if st.spec.URL == sp.URL {
				if st.spec.Schedule != sp.Schedule {
					s.setTableScheduleLocked(st, sp.Schedule, now, false)
				}
				continue
			}
			s.removeLocked(st)
		}
		s.addLocked(sp, now)
	}
	s.metrics.tables.Set(float64(len(s.tables)))
	s.mu.Unlock()
	s.kick()
	kickChan(s.syncKick)
	kickChan(s.leaseKick)
	return nil
}

// REQUIRES: s.mu held.
func (s *Scheduler) addLocked(sp TableSpec, now time.Time) {
	// Lazy: a logger with fields holds an encoded copy of them (a 1 KiB
	// buffer), which most idle tables never use.
	st := &tableState{spec: sp, logger: s.logger.WithLazy(zap.String("table", sp.Name)),
		jobLogger: s.deps.Logger.WithLazy(zap.String("table", sp.Name)), added: now}
	s.setTableScheduleLocked(st, sp.Schedule, now, true)
	s.metrics.addTable(sp.Name, Kinds)
	if s.deps.Leases == nil {
		st.owned = true
	}
	s.tables[sp.Name] = st
	s.logger.Info("table added", zap.String("table", sp.Name), zap.String("url", sp.URL))
}

// setTableScheduleLocked installs a table's own schedules (validated by
// SetTables) and restarts the clock of each kind whose schedule changed
// (of every kind when all: a table just added). REQUIRES: s.mu held.
func (s *Scheduler) setTableScheduleLocked(st *tableState, own Schedules, now time.Time, all bool) {
	old := st.spec.Schedule
	st.spec.Schedule = own
	for i, k := range Kinds {
		if !all && own.Get(k) == old.Get(k) {
			continue
		}
		st.sched[i], _ = ParseSchedule(own.Get(k))
		st.interval[i] = scheduleInterval(st.sched[i], now)
		st.next[i] = time.Time{}
		if sched := s.schedLocked(st, i); sched != nil {
			st.next[i] = sched.Next(now)
		}
	}
}

// schedLocked is the schedule of kind index i on st: the table's own when
// its spec sets one, else the configuration's; nil when the kind is off
// or this build has no job for it. REQUIRES: s.mu held.
func (s *Scheduler) schedLocked(st *tableState, i int) cron.Schedule {
	if _, ok := s.deps.Jobs[Kinds[i]]; !ok {
		return nil
	}
	if st.spec.Schedule.Get(Kinds[i]) != "" {
		return st.sched[i]
	}
	return s.sched[i]
}

// removeLocked forgets a table. REQUIRES: s.mu held.
func (s *Scheduler) removeLocked(st *tableState) {
	delete(s.tables, st.spec.Name)
	s.metrics.removeTable(st.spec.Name)
	st.removed = true
	s.logger.Info("table removed", zap.String("table", st.spec.Name), zap.String("url", st.spec.URL))
	if st.running != nil {
		st.running.cancel(ErrTableRemoved)
		return // finish() finalizes it
	}
	s.finalizeLocked(st)
}

// finalizeLocked releases a removed table's lease and bucket in the
// background. REQUIRES: s.mu held; st.running == nil.
func (s *Scheduler) finalizeLocked(st *tableState) {
	h, held := st.handle, st.held && st.lease.Live(s.clock.Now())
	st.handle, st.owned, st.held = nil, false, false
	if h == nil {
		return
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		if held && s.deps.Leases != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if err := s.deps.Leases.Release(ctx, h.Bucket, leaseName); err != nil {
				s.logger.Warn("could not release the lease of a removed table", zap.String("table", st.spec.Name), zap.Error(err))
			}
			cancel()
		}
		closeHandle(h)
	}()
}

func closeHandle(h *TableHandle) {
	if h != nil && h.Close != nil {
		_ = h.Close()
	}
}

// Run schedules jobs until ctx is done, then drains: no new attempt
// starts, running ones get Config.ShutdownGrace to finish and are then
// canceled with ErrShutdown, leases are released. It returns nil after a
// shutdown and the error of a fatal attempt otherwise.
func (s *Scheduler) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		return errors.New("scheduler: Run called twice")
	}
	s.started = true
	s.mu.Unlock()
	s.logger.Info("scheduler starting", zap.Int("workers", s.cfg.Workers), zap.Any("kinds", s.AvailableKinds()))

	loopCtx, stopLoops := context.WithCancelCause(context.WithoutCancel(ctx))
	var loops sync.WaitGroup
	loops.Go(func() { s.leaseLoop(loopCtx) })
	loops.Go(func() { s.syncLoop(loopCtx) })
	loops.Go(func() { s.pollLoop(loopCtx) })

	s.mainLoop(ctx)
	s.drain()
	// Leases stay renewed while attempts drain; the loops stop after.
	stopLoops(ErrShutdown)
	loops.Wait()
	s.shutdownTables()
	s.bg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fatal != nil {
		s.logger.Error("scheduler stopped by a fatal error", zap.Error(s.fatal))
	} else {
		s.logger.Info("scheduler stopped")
	}
	return s.fatal
}

func (s *Scheduler) mainLoop(ctx context.Context) {
	for {
		s.mu.Lock()
		if s.fatal != nil {
			s.mu.Unlock()
			return
		}
		now := s.clock.Now()
		s.collectDueLocked(now)
		s.dispatchLocked(now)
		wait, ok := s.nextWakeLocked(now)
		s.mu.Unlock()

		var tc <-chan time.Time
		var t clock.Timer
		if ok {
			t = s.clock.NewTimer(wait)
			tc = t.C()
		}
		select {
		case <-ctx.Done():
		case <-s.wake:
		case <-tc:
		}
		if t != nil {
			t.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// eligible: the table may start an attempt (the picker's rule).
// REQUIRES: s.mu held.
func (s *Scheduler) eligibleLocked(st *tableState) bool {
	pt := s.pickTableLocked(st)
	return pt.eligible()
}

// pickTableLocked is st as the picker sees it, without its pending jobs.
// REQUIRES: s.mu held.
func (s *Scheduler) pickTableLocked(st *tableState) PickTable {
	// A table assigned to another instance starts nothing new here, not
	// even the follow-ups of the job that just ended: the next lease
	// round hands it over, and a job started meanwhile would hold the
	// new assignee off for another round.
	owned := st.owned && (st.assignee == "" || st.assignee == s.Holder())
	return PickTable{Name: st.spec.Name, Owned: owned, Synced: st.synced, Open: st.handle != nil,
		Removed: st.removed, Halted: st.halted != nil, Paused: st.paused, LeaseReady: s.leaseHeldLocked(st),
		Running: st.running != nil}
}

// collectDueLocked turns schedules that came due into pending jobs. A
// schedule that comes due while the table cannot run is skipped, not
// queued: missed runs do not pile up. REQUIRES: s.mu held.
func (s *Scheduler) collectDueLocked(now time.Time) {
	for _, st := range s.tables {
		for i, k := range Kinds {
			sched := s.schedLocked(st, i)
			if sched == nil {
				continue
			}
			if st.next[i].IsZero() {
				st.next[i] = sched.Next(now)
				continue
			}
			if now.Before(st.next[i]) {
				continue
			}
			if s.eligibleLocked(st) && !st.markedLocked(k) {
				if st.pending[i] == "" && s.nothingToDoLocked(st, k, now) {
					s.elideLocked(st, k, now)
				} else {
					st.pend(k, TriggerSchedule, now)
				}
			}
			st.next[i] = sched.Next(now)
		}
	}
}

// nothingToDoLocked reports whether a scheduled attempt of kind k would
// find nothing to do:
//   - the kind last succeeded without committing, and neither the table
//     version nor any shard manifest changed since (its fingerprint); or
//   - for a merge, no shard has flushed a generation the table has not
//     merged, by shard manifests checked within two poll intervals. A flush
//     after that check is seen by change polling, which queues a merge
//     itself, so the scheduled merge would only repeat the poll's answer.
//     It holds after commits of other kinds, which change the fingerprint
//     but leave no merge work, and from the first sync on.
//
// Cleanup, which depends on the clock, never qualifies. REQUIRES: s.mu held.
func (s *Scheduler) nothingToDoLocked(st *tableState, k Kind, now time.Time) bool {
	if k == KindCleanup {
		return false
	}
	if fp := st.snap.Fingerprint(); fp != "" && st.clean[k.index()] == fp {
		return true
	}
	iv := s.cfg.PollInterval
	return k == KindMerge && iv > 0 && st.snap != nil && st.snap.MemWal && st.snap.PendingGenerations == 0 &&
		!st.shardsChecked.IsZero() && now.Sub(st.shardsChecked) <= 2*iv
}

// elideLocked stands for a scheduled attempt that would find nothing to
// do (nothingToDoLocked). An idle table then costs no object-store
// request between syncs; the job still counts as up to date (result
// "skipped"), so that staleness alerts stay quiet. REQUIRES: s.mu held.
func (s *Scheduler) elideLocked(st *tableState, k Kind, now time.Time) {
	i := k.index()
	st.upToDate[i] = now
	s.metrics.runs.WithLabelValues(st.spec.Name, string(k), string(ClassSkipped)).Inc()
	// Kept in memory only: writing the job state for every elided tick
	// would cost an idle table a request per tick. The next attempt's
	// write carries it.
	st.state.noteSuccess(k, now)
}

// nextWakeLocked is how long until a schedule comes due or a backoff of a
// pending job ends. Only future instants count: a job that is due but
// waits for a worker or for its table is started when an attempt ends.
// REQUIRES: s.mu held.
func (s *Scheduler) nextWakeLocked(now time.Time) (time.Duration, bool) {
	var best time.Time
	consider := func(t time.Time) {
		if t.After(now) && (best.IsZero() || t.Before(best)) {
			best = t
		}
	}
	for _, st := range s.tables {
		for i := range Kinds {
			if s.schedLocked(st, i) != nil {
				consider(st.next[i])
			}
			if st.pending[i] != "" {
				consider(st.notBefore[i])
			}
		}
	}
	if best.IsZero() {
		return 0, false
	}
	return best.Sub(now), true
}

// dispatchLocked starts attempts while workers are free, as Pick chooses
// them from a copy of the tables' state (pick.go). REQUIRES: s.mu held.
func (s *Scheduler) dispatchLocked(now time.Time) {
	env := PickEnv{Now: now, Workers: s.cfg.Workers, Running: s.running, Draining: s.draining,
		Tables: make([]PickTable, 0, len(s.tables))}
	for _, st := range s.tables {
		pt := s.pickTableLocked(st)
		for i, k := range Kinds {
			if st.pending[i] == "" {
				continue
			}
			_, have := s.deps.Jobs[k]
			pt.Pending = append(pt.Pending, PickPending{Kind: k, Trigger: st.pending[i], Since: st.pendSince[i],
				NotBefore: st.notBefore[i], Blocked: !have || st.markedLocked(k)})
		}
		env.Tables = append(env.Tables, pt)
	}
	res := Pick(env)
	for _, d := range res.Drop {
		s.tables[d.Table].pending[d.Kind.index()] = "" // cannot happen through the API; be safe
	}
	for _, k := range Kinds {
		s.metrics.pending.WithLabelValues(string(k)).Set(float64(res.Pending[k]))
	}
	for _, name := range res.WantLease {
		s.wantLeaseLocked(s.tables[name])
	}
	for _, j := range res.Start {
		s.startLocked(s.tables[j.Table], j.Kind, now)
	}
}

// REQUIRES: s.mu held; st eligible and idle.
func (s *Scheduler) startLocked(st *tableState, k Kind, now time.Time) {
	i := k.index()
	s.nextID++
	ctx, cancel := context.WithCancelCause(context.Background())
	a := &attempt{id: s.nextID, kind: k, trigger: st.pending[i], started: now, cancel: cancel, fp: st.snap.Fingerprint()}
	st.pending[i], st.notBefore[i] = "", time.Time{}
	st.running = a
	s.running++
	s.metrics.busy.Set(float64(s.running))
	h := *st.handle
	scope := []zap.Field{zap.String("kind", string(k)), zap.Uint64("job_id", a.id), zap.String("trigger", string(a.trigger))}
	// From the base loggers, so that the tables' lazy loggers stay unbuilt.
	scoped := append([]zap.Field{zap.String("table", st.spec.Name)}, scope...)
	h.Logger = s.deps.Logger.With(scoped...)
	a.logger = s.logger.With(scoped...)
	// Progress lines are debug in the daemon (the API shows the same
	// numbers); the reporter runs on the scheduler's clock.
	a.progress = progress.New(progress.Options{Clock: s.clock, Logger: a.logger, Level: zap.DebugLevel})
	ctx = progress.With(ctx, a.progress)
	h.Trigger = a.trigger
	h.Clock = s.clock
	s.attempts.Add(1)
	go s.runAttempt(ctx, st, a, &h, s.deps.Jobs[k], s.cfg.Timeouts.For(k))
}

// runAttempt runs one attempt and reports it to finish.
func (s *Scheduler) runAttempt(ctx context.Context, st *tableState, a *attempt, h *TableHandle, job JobFunc, budget time.Duration) {
	defer s.attempts.Done()
	// At info, so that a long job is visible while it runs, not only
	// when it ends.
	a.logger.Info("job started")
	// The budget runs on the injected clock, so tests can expire it.
	jctx, jcancel := context.WithCancelCause(ctx)
	budgetTimer := s.clock.NewTimer(budget)
	watchDone := make(chan struct{})
	var watch sync.WaitGroup
	watch.Go(func() {
		select {
		case <-budgetTimer.C():
			jcancel(ErrBudget)
		case <-watchDone:
		}
	})

	var out Outcome
	var err error
	var unregister func()
	if a.kind != KindCleanup {
		// The marker keeps cleanup from deleting the files this attempt
		// writes before it commits, and the versions it may read.
		unregister, err = s.register(jctx, h, a, budget)
	}
	if err == nil {
		out, err = callJob(jctx, job, h)
	}
	a.progress.Finish()
	cause := context.Cause(jctx)
	if unregister != nil {
		unregister()
	}
	close(watchDone)
	budgetTimer.Stop()
	watch.Wait()
	jcancel(nil)

	// Read the table again so that the status page and the gauges show
	// the job's effect now, not at the next sync.
	if ctx.Err() == nil {
		s.syncTable(ctx, st, h, false)
	}
	if news, ok := s.finish(st, a, out, err, cause); ok {
		s.saveState(st, h, news)
	}
}

// register publishes the attempt's in-flight marker with the head version
// as its read version: the job plans from the head or a newer version.
func (s *Scheduler) register(ctx context.Context, h *TableHandle, a *attempt, budget time.Duration) (func(), error) {
	v, err := latestVersion(ctx, h)
	if err != nil {
		return nil, err
	}
	// The TTL outlives the budget: the commit of an attempt canceled at the
	// end of its budget may still be finishing on a detached context.
	return inflight.Register(ctx, h.Bucket, fmt.Sprintf("%s/%s/%d", h.Name, a.kind, a.id), v, s.clock.Now(), budget+5*time.Minute)
}

// callJob runs job, turning a panic into an error: a bug in one job must
// not take down the maintenance of every table.
func callJob(ctx context.Context, job JobFunc, h *TableHandle) (out Outcome, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = Outcome{}, fmt.Errorf("job panicked: %v", r)
		}
	}()
	return job(ctx, h)
}

// backoff is the wait after n failures in a row: base·2^(n-1), capped,
// with full jitter in its upper half so that tables failing together do
// not retry together.
func (s *Scheduler) backoff(n int) time.Duration {
	d := s.cfg.Retry.BaseBackoff
	for i := 1; i < n && d < s.cfg.Retry.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, s.cfg.Retry.MaxBackoff)
	return d/2 + rand.N(d/2+1)
}

// finish records an attempt's end. It returns the job-state news to keep in
// the bucket (ok false for a canceled attempt or a removed table).
func (s *Scheduler) finish(st *tableState, a *attempt, out Outcome, err, cause error) (news JobState, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	class, reason := Classify(err, cause)
	if class == ClassSuccess && out.NothingToDo {
		class = ClassSkipped
	}
	i := a.kind.index()
	name, ks := st.spec.Name, string(a.kind)
	dur := now.Sub(a.started)
	rec := JobRecord{ID: a.id, Table: name, Kind: a.kind, Trigger: a.trigger, Started: a.started, Finished: now,
		DurationSeconds: dur.Seconds(), Result: class, Version: out.Version, Summary: out.Summary}
	if err != nil {
		rec.Error = err.Error()
	}
	fields := []zap.Field{zap.String("result", string(class)), zap.Float64("duration_seconds", dur.Seconds())}
	if out.Version > 0 {
		fields = append(fields, zap.Uint64("version", out.Version))
	}
	if out.Summary != "" {
		fields = append(fields, zap.String("summary", out.Summary))
	}
	if !st.removed {
		s.metrics.runs.WithLabelValues(name, ks, string(class)).Inc()
		s.metrics.duration.WithLabelValues(name, ks).Observe(dur.Seconds())
	}
	switch class {
	case ClassSuccess, ClassSkipped:
		st.failures[i], st.retries[i], st.failingSince[i] = 0, 0, time.Time{}
		st.upToDate[i] = now
		st.clean[i] = ""
		if out.Version == 0 && !out.More && !out.Waiting && a.kind != KindCleanup {
			// The fingerprint from before the attempt: a change during it
			// makes the next scheduled run happen.
			st.clean[i] = a.fp
		}
		if a.kind == KindCleanup {
			// Cleanup moves the oldest retained version, which trim reads.
			st.clean[KindTrim.index()] = ""
		}
		if !st.removed {
			addCounter(s.metrics.merged, float64(out.Stats.SSTablesMerged), name)
			addCounter(s.metrics.trimmedBytes, float64(out.Stats.BytesTrimmed), name)
			// Created by the kind's first success, even one that moved
			// nothing: dashboards rate them per kind.
			if slices.Contains(fragsInKinds, a.kind) {
				s.metrics.fragsIn.WithLabelValues(name, ks).Add(float64(out.Stats.FragmentsIn))
			}
			if slices.Contains(fragsOutKinds, a.kind) {
				s.metrics.fragsOut.WithLabelValues(name, ks).Add(float64(out.Stats.FragmentsOut))
			}
		}
		if class == ClassSkipped {
			// A job that found nothing to do is most of a quiet fleet's
			// job lines: debug, so that the lines at info are the work.
			a.logger.Debug("job finished", append(fields, zap.NamedError("reason", err))...)
		} else {
			a.logger.Info("job finished", fields...)
		}
		if out.More && class == ClassSuccess {
			st.pend(a.kind, TriggerContinue, now)
		}
		s.followUpsLocked(st, a.kind, class, out, now)
	case ClassCanceled:
		a.logger.Info("job canceled", append(fields, zap.NamedError("cause", cause))...)
	case ClassRetry, ClassError:
		st.clean[i] = ""
		if !st.removed {
			s.metrics.failures.WithLabelValues(name, ks).Inc()
		}
		if st.retries[i] == 0 {
			st.failingSince[i] = now
		}
		st.retries[i]++
		wait := s.backoff(st.retries[i])
		st.notBefore[i] = now.Add(wait)
		fields = append(fields, zap.Error(err), zap.Int("failures_in_a_row", st.retries[i]),
			zap.Time("failing_since", st.failingSince[i]), zap.Float64("retry_in_seconds", wait.Seconds()))
		if class == ClassError {
			st.failures[i]++
			fields = append(fields, zap.Int("errors_in_a_row", st.failures[i]))
			if st.failures[i] >= s.cfg.Retry.QuarantineAfter {
				a.logger.Error("job failed", fields...)
				s.haltLocked(st, reason, ks, err, now)
				break
			}
		} else if s.budgetSpentLocked(st.retries[i], st.failingSince[i], now) {
			a.logger.Error("job failed; retry budget spent", fields...)
			s.haltLocked(st, ReasonRetryBudget, ks, err, now)
			break
		}
		a.logger.Warn("job failed", fields...)
		st.pend(a.kind, TriggerRetry, now)
	case ClassFatal:
		if !st.removed {
			s.metrics.failures.WithLabelValues(name, ks).Inc()
		}
		a.logger.Error("job failed fatally; stopping", append(fields, zap.Error(err))...)
		if s.fatal == nil {
			s.fatal = fmt.Errorf("%s: %s job: %w", st, a.kind, err)
		}
	}
	st.running = nil
	s.running--
	s.metrics.busy.Set(float64(s.running))
	st.history = append(st.history, rec)
	if len(st.history) > s.cfg.History {
		st.history = slices.Delete(st.history, 0, len(st.history)-s.cfg.History)
	}
	st.lastRuns[i] = &rec
	if st.removed {
		s.finalizeLocked(st)
	} else if class != ClassCanceled {
		news, ok = s.noteAttemptLocked(st, a, class, out, now), true
	}
	s.kick()
	return news, ok
}

// budgetSpentLocked: a streak of n failures since since has used up the
// retry budget (retry.budget, and at least quarantine_after attempts).
// REQUIRES: s.mu held.
func (s *Scheduler) budgetSpentLocked(n int, since, now time.Time) bool {
	b := s.cfg.Retry.Budget
	return b > 0 && n >= s.cfg.Retry.QuarantineAfter && now.Sub(since) >= b
}

// markedLocked: an operator's mark keeps kind k from running on st.
// REQUIRES: s.mu held.
func (st *tableState) markedLocked(k Kind) bool {
	_, no := st.marks[marker.NoCompact]
	return k == KindCompact && no
}

// haltLocked quarantines a table. REQUIRES: s.mu held.
func (s *Scheduler) haltLocked(st *tableState, reason, kind string, err error, now time.Time) {
	if st.halted != nil {
		return
	}
	st.halted = &Halt{Reason: reason, Error: err.Error(), Kind: kind, Since: now}
	for i := range Kinds {
		st.pending[i] = ""
	}
	st.logger.Error("table quarantined; the other tables continue. Fix the cause, then resume it through the API",
		zap.String("reason", reason), zap.String("kind", kind), zap.Error(err))
}

// drain stops dispatching and waits for running attempts, canceling them
// when the grace period ends.
func (s *Scheduler) drain() {
	s.mu.Lock()
	s.draining = true
	n := s.running
	grace := s.cfg.ShutdownGrace
	s.mu.Unlock()
	s.logger.Info("draining: no new jobs start", zap.Int("running", n), zap.Float64("grace_seconds", grace.Seconds()))
	done := make(chan struct{})
	go func() {
		s.attempts.Wait()
		close(done)
	}()
	t := s.clock.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
		return
	case <-t.C():
	}
	s.mu.Lock()
	for _, st := range s.tables {
		if st.running != nil {
			st.running.cancel(ErrShutdown)
		}
	}
	s.mu.Unlock()
	s.logger.Warn("grace period over: canceling the running jobs")
	<-done
}

// shutdownTables releases the leases this instance holds and closes the
// buckets, so that another instance takes the tables over at once.
func (s *Scheduler) shutdownTables() {
	s.mu.Lock()
	var sts []*tableState
	for _, st := range s.tables {
		sts = append(sts, st)
	}
	conc := s.cfg.SyncConcurrency
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	for _, st := range sts {
		s.mu.Lock()
		h, held := st.handle, st.held && st.lease.Live(s.clock.Now())
		st.handle = nil
		if s.deps.Leases != nil {
			st.owned, st.held = false, false
		}
		s.mu.Unlock()
		if h == nil {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if held && s.deps.Leases != nil {
				if err := s.deps.Leases.Release(ctx, h.Bucket, leaseName); err != nil {
					s.logger.Warn("could not release a lease; another instance takes the table when it expires",
						zap.String("table", st.spec.Name), zap.Error(err))
				}
			}
			closeHandle(h)
		})
	}
	wg.Wait()
	if s.deps.Members != nil {
		if err := s.deps.Members.Leave(ctx); err != nil {
			s.logger.Warn("could not remove the membership heartbeat", zap.Error(err))
		}
	}
}

// Ready reports whether the first sync of every table has been attempted.
func (s *Scheduler) Ready() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ready && !s.draining
}

// Tables returns the status of every table, sorted by name.
func (s *Scheduler) Tables() []TableStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]TableStatus, 0, len(s.tables))
	for _, st := range s.tables {
		out = append(out, s.status(st))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Table returns one table's status.
func (s *Scheduler) Table(name string) (TableStatus, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.tables[name]
	if !ok {
		return TableStatus{}, false
	}
	return s.status(st), true
}

// Recent returns the newest finished attempts over all tables, newest
// first.
func (s *Scheduler) Recent(n int) []JobRecord {
	s.mu.Lock()
	var all []JobRecord
	for _, st := range s.tables {
		all = append(all, st.history...)
	}
	s.mu.Unlock()
	sort.Slice(all, func(i, j int) bool { return all[i].Finished.After(all[j].Finished) })
	if len(all) > n {
		all = all[:n]
	}
	return all
}

// Holder is this instance's lease holder name ("" with leasing off).
func (s *Scheduler) Holder() string {
	if s.deps.Leases == nil {
		return ""
	}
	return s.deps.Leases.Holder()
}

// Members returns the live instances seen by the last lease round.
func (s *Scheduler) Members() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.members)
}

// Trigger queues a job now (an operator's request): it skips the backoff
// and runs as soon as a worker and the table are free.
func (s *Scheduler) Trigger(name string, kind Kind) error {
	if kind.index() < 0 {
		return apiErr(400, "unknown job kind %q (want merge, compact, index, trim or cleanup)", kind)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.tables[name]
	switch {
	case !ok:
		return apiErr(404, "no table named %q", name)
	case s.deps.Jobs[kind] == nil:
		return apiErr(409, "this build has no %s job", kind)
	case s.draining:
		return apiErr(503, "shutting down")
	case st.halted != nil:
		return apiErr(409, "table %q is quarantined (%s); resume it first", name, st.halted.Reason)
	case st.paused:
		return apiErr(409, "table %q is paused; resume it first", name)
	case st.markedLocked(kind):
		return apiErr(409, "table %q is marked no-compact (%s); remove the mark first: compactord table mark URL no-compact --clear", name, st.marks[marker.NoCompact].Reason)
	case !st.owned:
		by, self := st.assignee, s.Holder()
		if st.lease.Holder != "" && st.lease.Live(s.clock.Now()) {
			by = st.lease.Holder // running its jobs now
		}
		if by == "" || by == self {
			// Assigned here (or not assigned yet: just added), but the
			// lease round that makes this instance serve it has not run:
			// naming this instance as "another" misled operators.
			return apiErr(503, "table %q is not served by this instance (%s) yet: it starts serving it at its next lease round (within lease.renew_interval); try again then", name, self)
		}
		return apiErr(409, "table %q is served by another instance (%s)", name, by)
	}
	st.pend(kind, TriggerManual, s.clock.Now())
	st.logger.Info("job requested by an operator", zap.String("job", string(kind)))
	s.kick()
	return nil
}

// Pause stops scheduling jobs on a table on every instance: it writes the
// pause mark into the table's bucket (marker.Pause), which every instance
// reads at each sync, and pauses the table here at once. A running
// attempt finishes. Any instance may be asked, owner or not.
func (s *Scheduler) Pause(ctx context.Context, name, reason string) error {
	s.mu.Lock()
	st, ok := s.tables[name]
	var h *TableHandle
	if ok {
		h = st.handle
	}
	s.mu.Unlock()
	switch {
	case !ok:
		return apiErr(404, "no table named %q", name)
	case h == nil:
		return apiErr(503, "table %q is not open yet; try again after its first sync", name)
	}
	m := marker.Mark{Kind: marker.Pause, Reason: reason, By: s.Holder(), Since: s.clock.Now().UTC()}
	if m.By == "" {
		m.By = "compactord"
	}
	if err := marker.Put(ctx, h.Bucket, m); err != nil {
		return apiErr(502, "pause %q: %v", name, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.marks == nil {
		st.marks = map[marker.Kind]marker.Mark{}
	}
	st.marks[marker.Pause] = m
	st.marksSeq++
	if !st.paused {
		st.paused = true
		st.logger.Info("table paused by an operator; the mark in its bucket pauses it on every instance", zap.String("reason", reason))
	}
	return nil
}

// Resume undoes Pause (it removes the pause mark, for every instance) and
// lifts a quarantine on this instance.
func (s *Scheduler) Resume(ctx context.Context, name string) error {
	s.mu.Lock()
	st, ok := s.tables[name]
	var h *TableHandle
	paused := false
	if ok {
		h, paused = st.handle, st.paused
	}
	s.mu.Unlock()
	if !ok {
		return apiErr(404, "no table named %q", name)
	}
	if h != nil {
		if err := marker.Delete(ctx, h.Bucket, marker.Pause); err != nil {
			return apiErr(502, "resume %q: %v", name, err)
		}
	} else if paused {
		return apiErr(503, "table %q is not open; its pause mark cannot be removed now", name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(st.marks, marker.Pause)
	st.marksSeq++
	if st.paused {
		st.paused = false
	}
	st.halted = nil
	st.failures, st.retries, st.notBefore = [numKinds]int{}, [numKinds]int{}, [numKinds]time.Time{}
	st.failingSince = [numKinds]time.Time{}
	st.syncFailures, st.syncRetries, st.syncFailingSince = 0, 0, time.Time{}
	st.logger.Info("table resumed by an operator")
	s.kick()
	return nil
}
