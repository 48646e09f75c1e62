package scheduler

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/compactord/compactord/internal/marker"
)

// ensureOpen opens the table's bucket once. Opening may do I/O, so it runs
// outside s.mu; concurrent callers may both open, and the loser closes its
// handle.
func (s *Scheduler) ensureOpen(ctx context.Context, st *tableState) (*TableHandle, error) {
	s.mu.Lock()
	h, removed := st.handle, st.removed
	s.mu.Unlock()
	if h != nil || removed {
		return h, nil
	}
	nh, err := s.deps.Open(ctx, st.spec)
	if err == nil && (nh == nil || nh.Observer == nil) {
		closeHandle(nh)
		nh, err = nil, fmt.Errorf("the opener gave %s no observer", st)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		st.openErr = err
		st.syncErr = "open: " + err.Error()
		return nil, err
	}
	if st.handle != nil || st.removed || s.draining {
		go closeHandle(nh)
		return st.handle, nil
	}
	st.openErr = nil
	st.handle = nh
	return nh, nil
}

// tablesLocked lists the tables in name order. REQUIRES: s.mu held.
func (s *Scheduler) tablesLocked() []*tableState {
	out := make([]*tableState, 0, len(s.tables))
	for _, st := range s.tables {
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].spec.Name < out[j].spec.Name })
	return out
}

// forEachTable runs fn on every table, SyncConcurrency at a time.
func (s *Scheduler) forEachTable(fn func(st *tableState)) {
	s.mu.Lock()
	sts := s.tablesLocked()
	sem := make(chan struct{}, s.cfg.SyncConcurrency)
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, st := range sts {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			fn(st)
		})
	}
	wg.Wait()
}

// syncLoop reads every table each SyncInterval, and at once when tables
// are added. The scheduler is ready after the first round.
func (s *Scheduler) syncLoop(ctx context.Context) {
	for {
		s.forEachTable(func(st *tableState) {
			h, err := s.ensureOpen(ctx, st)
			if err != nil || h == nil {
				if err != nil && ctx.Err() == nil {
					s.logger.Warn("cannot open table", zap.String("table", st.spec.Name), zap.Error(err))
				}
				return
			}
			s.syncTable(ctx, st, h, true)
		})
		s.mu.Lock()
		if !s.ready && ctx.Err() == nil {
			s.ready = true
			s.logger.Info("first sync done: ready", zap.Int("tables", len(s.tables)))
		}
		iv := s.cfg.SyncInterval
		s.mu.Unlock()
		s.kick()
		t := s.clock.NewTimer(iv)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		case <-s.syncKick:
			t.Stop()
		}
	}
}

// syncTable reads the table and records the result; withMarks reads the
// operators' marks (marker) first. The periodic sync does, so that the
// first sync of a table, before which no job runs, knows its marks; the
// re-read after a job does not.
func (s *Scheduler) syncTable(ctx context.Context, st *tableState, h *TableHandle, withMarks bool) {
	s.mu.Lock()
	timeout := max(2*s.cfg.SyncInterval, time.Minute)
	seq := st.marksSeq
	loadState := withMarks && !st.stateLoaded
	s.mu.Unlock()
	sctx, cancel := context.WithTimeout(ctx, timeout)
	var marks map[marker.Kind]marker.Mark
	var snap *Snapshot
	var err error
	if withMarks {
		marks, err = marker.Load(sctx, h.Bucket)
	}
	if err == nil {
		snap, err = st.observe(sctx, h)
	}
	// The job state is read once, with the first sync that succeeds,
	// before which no job runs; a failure to read it leaves the schedules
	// as they are and is tried again at the next sync.
	var state JobState
	var stateErr error
	if err == nil && loadState {
		state, stateErr = s.loadState(sctx, st, h)
	}
	cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.removed {
		return
	}
	now := s.clock.Now()
	name := st.spec.Name
	switch {
	case err == nil:
		wasSynced := st.synced
		st.synced, st.snap, st.lastSync, st.syncErr, st.syncFailures = true, snap, now, "", 0
		st.syncRetries, st.syncFailingSince = 0, time.Time{}
		st.shardsChecked = now
		if withMarks && st.marksSeq == seq {
			s.applyMarksLocked(st, marks)
		}
		switch {
		case !loadState:
		case stateErr != nil:
			st.logger.Warn("could not read the job state in the bucket; schedules run from this instance's start for now", zap.Error(stateErr))
		default:
			s.applyStateLocked(st, state)
		}
		s.applySnapshotLocked(st, snap)
		s.checkStartLocked(st, now)
		if !wasSynced || loadState {
			s.kick()
		}
	case ctx.Err() != nil:
		// Shutting down: not the table's fault.
	case isNoTable(err):
		// Not created yet (a writer or the demo creates it): wait quietly.
		st.syncErr = err.Error()
	default:
		s.metrics.syncFailures.WithLabelValues(name).Inc()
		st.syncErr = err.Error()
		class, reason := Classify(err, nil)
		if st.syncRetries == 0 {
			st.syncFailingSince = now
		}
		st.syncRetries++
		fields := []zap.Field{zap.Error(err), zap.Int("failures_in_a_row", st.syncRetries), zap.Time("failing_since", st.syncFailingSince)}
		if class != ClassError {
			if s.budgetSpentLocked(st.syncRetries, st.syncFailingSince, now) {
				st.logger.Error("sync failed; retry budget spent", fields...)
				s.haltLocked(st, ReasonRetryBudget, "sync", err, now)
				return
			}
			st.logger.Warn("sync failed; retrying at the next sync", fields...)
			return
		}
		st.syncFailures++
		st.logger.Warn("sync failed", append(fields, zap.Int("errors_in_a_row", st.syncFailures))...)
		if st.syncFailures >= s.cfg.Retry.QuarantineAfter {
			s.haltLocked(st, reason, "sync", err, now)
		}
	}
}

// applySnapshotLocked sets the LSM-debt gauges. REQUIRES: s.mu held.
func (s *Scheduler) applySnapshotLocked(st *tableState, snap *Snapshot) {
	name := st.spec.Name
	m := s.metrics
	shards := map[string]bool{}
	lag := map[[2]string]bool{}
	for _, sh := range snap.Shards {
		shards[sh.ID] = true
		m.pendingGens.WithLabelValues(name, sh.ID).Set(float64(sh.Pending))
		for _, r := range retainedReasons {
			m.retainedBytes.WithLabelValues(name, sh.ID, r).Set(float64(sh.Retained[r]))
		}
		for ix, g := range sh.Lag {
			lag[[2]string{ix, sh.ID}] = true
			m.catchupLag.WithLabelValues(name, ix, sh.ID).Set(float64(g))
		}
	}
	for id := range st.gaugeShards {
		if !shards[id] {
			m.pendingGens.DeleteLabelValues(name, id)
			for _, r := range retainedReasons {
				m.retainedBytes.DeleteLabelValues(name, id, r)
			}
		}
	}
	for k := range st.gaugeLag {
		if !lag[k] {
			m.catchupLag.DeleteLabelValues(name, k[0], k[1])
		}
	}
	st.gaugeShards, st.gaugeLag = shards, lag
}

// pollLoop checks each owned table's shards every PollInterval and queues
// a merge when a shard published SSTables the base table lacks. An idle
// shard costs one listing of its manifest folder, stopped at the first
// (newest) key.
func (s *Scheduler) pollLoop(ctx context.Context) {
	for {
		s.mu.Lock()
		iv := s.cfg.PollInterval
		_, haveMerge := s.deps.Jobs[KindMerge]
		s.mu.Unlock()
		if iv > 0 && haveMerge {
			s.forEachTable(func(st *tableState) { s.pollTable(ctx, st) })
		}
		if iv <= 0 {
			// Off; look again in a while in case a reload turns it on.
			iv = time.Minute
		}
		t := s.clock.NewTimer(iv)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

func (s *Scheduler) pollTable(ctx context.Context, st *tableState) {
	s.mu.Lock()
	h := st.handle
	ok := h != nil && s.eligibleLocked(st) && st.snap != nil && st.snap.MemWal
	s.mu.Unlock()
	if !ok {
		return
	}
	unmerged, snap, err := st.pollChanges(ctx, h)
	if err != nil {
		if ctx.Err() == nil {
			st.logger.Debug("change poll failed", zap.Error(err))
		}
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.removed {
		return
	}
	st.shardsChecked = s.clock.Now()
	if snap == nil {
		return
	}
	st.snap = snap
	s.applySnapshotLocked(st, snap)
	if unmerged && s.eligibleLocked(st) {
		st.pend(KindMerge, TriggerChange, s.clock.Now())
		s.kick()
	}
}

// applyMarksLocked installs the marks a sync read. REQUIRES: s.mu held.
func (s *Scheduler) applyMarksLocked(st *tableState, marks map[marker.Kind]marker.Mark) {
	_, paused := marks[marker.Pause]
	if paused != st.paused {
		if paused {
			st.logger.Info("table paused by a mark in its bucket", zap.String("reason", marks[marker.Pause].Reason))
		} else {
			st.logger.Info("pause mark removed: the table runs again")
		}
	}
	_, noCompact := marks[marker.NoCompact]
	_, had := st.marks[marker.NoCompact]
	if noCompact && !had {
		st.logger.Info("table marked no-compact", zap.String("reason", marks[marker.NoCompact].Reason))
	}
	st.marks = marks
	st.paused = paused
	if noCompact {
		st.pending[KindCompact.index()] = ""
	}
	if !paused {
		s.kick()
	}
}
