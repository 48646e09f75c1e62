package scheduler

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/compactord/compactord/internal/lease"
)

// Leasing has two layers, so that an idle table costs no request:
//
//   - Serving (st.owned): which instance watches a table, polls it and
//     queues its jobs. With membership, the table's assignee among the live
//     instances (lease.Assign over the heartbeats); without, every
//     instance. One heartbeat per instance per RenewInterval keeps it up,
//     whatever the number of tables, and an instance that dies drops out
//     of the live set within a TTL, its tables moving to the others.
//   - Running (st.held): a job starts only under the table's lease
//     (internal/lease), taken when the table has a job to start, renewed
//     while jobs run or wait, and left to expire a TTL after the last
//     renewal (the grace in which follow-up jobs start without a request).
//     It fences the instances that both believe they serve a table (a slow
//     ex-assignee finishing a job after a hand-over, instances that see
//     different live sets or table lists, no membership at all): the one
//     that finds another's live lease stops serving the table until that
//     lease expires, so two instances never run the table's jobs at once
//     in the normal case.
//
// INVARIANT (lease package): correctness never depends on either layer;
// the commit loop arbitrates every change.

// leaseLoop publishes the heartbeat, recomputes the assignment and renews
// the leases of busy tables every RenewInterval; in between, a kick
// (a table wants a lease, tables were added) runs the per-table pass alone
// on the last live set. Kicks never postpone the full round: tables whose
// leases fall due at different times can kick more often than every
// RenewInterval, and a full round put off each time would let the
// heartbeat and the leases of running jobs expire.
func (s *Scheduler) leaseLoop(ctx context.Context) {
	if s.deps.Leases == nil {
		return
	}
	full := true
	var due time.Time
	for {
		s.leaseRound(ctx, full)
		if full {
			s.mu.Lock()
			iv := s.cfg.Lease.RenewInterval
			s.mu.Unlock()
			due = s.clock.Now().Add(iv)
		}
		t := s.clock.NewTimer(due.Sub(s.clock.Now()))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
			full = true
		case <-s.leaseKick:
			t.Stop()
			full = false
		}
	}
}

func (s *Scheduler) leaseRound(ctx context.Context, full bool) {
	s.mu.Lock()
	names := make([]string, 0, len(s.tables))
	keys := make([]string, 0, len(s.tables))
	for n, st := range s.tables {
		names = append(names, n)
		keys = append(keys, n+"\x00"+st.spec.URL)
	}
	live := s.members
	s.mu.Unlock()
	if m := s.deps.Members; m != nil && (full || live == nil) {
		m.SetTables(lease.Fingerprint(keys))
		if err := m.Heartbeat(ctx); err != nil && ctx.Err() == nil {
			s.logger.Warn("membership heartbeat failed", zap.Error(err))
		}
		l, err := m.Live(ctx)
		if err != nil {
			if ctx.Err() == nil {
				s.logger.Warn("cannot list live instances; keeping the last live set (none yet: serving every table, each job under its lease)", zap.Error(err))
			}
		} else {
			live = l
			s.mu.Lock()
			s.members = l
			s.mu.Unlock()
		}
	}
	var assign map[string]string
	if s.deps.Members != nil && live != nil {
		assign = lease.Assign(names, live)
	}
	// Never listed (the members bucket fails from the start): serve every
	// table, as without membership; the lease of each job still keeps
	// instances from running a table's jobs at once.
	s.forEachTable(func(st *tableState) { s.leaseTable(ctx, st, assign, full) })
}

// leaseTable updates whether this instance serves st, and takes, renews
// or releases its lease as its jobs need.
func (s *Scheduler) leaseTable(ctx context.Context, st *tableState, assign map[string]string, full bool) {
	lm := s.deps.Leases
	holder := lm.Holder()
	// Built only when there is something to log: a round visits every
	// table and most have nothing to say.
	log := func() *zap.Logger {
		return s.deps.Logger.With(zap.String("component", "lease"), zap.String("table", st.spec.Name))
	}
	s.mu.Lock()
	if st.removed {
		s.mu.Unlock()
		return
	}
	now := s.clock.Now()
	mine := assign == nil || assign[st.spec.Name] == holder
	prevAssignee := st.assignee
	st.assignee = assign[st.spec.Name]
	wanted := st.leaseWanted
	st.leaseWanted = false
	if !full && !wanted {
		s.mu.Unlock()
		return
	}
	if st.held && !st.lease.Live(now) {
		st.held = false
	}
	busy := st.running != nil
	switch {
	case st.owned && !mine && !busy:
		// Assigned elsewhere: hand over, releasing the lease (if held) so
		// that the new assignee need not wait for it to expire.
		st.owned = false
		st.pending = [numKinds]Trigger{}
		release := st.held
		st.held = false
		h := st.handle
		s.mu.Unlock()
		if release && h != nil {
			if err := lm.Release(ctx, h.Bucket, leaseName); err != nil {
				log().Warn("could not release the lease for hand-over; it expires instead", zap.Error(err))
			}
		}
		log().Info("table handed over", zap.String("to", assign[st.spec.Name]))
		return
	case !st.owned && mine:
		if st.lease.Holder != "" && st.lease.Holder != holder && (st.lease.Live(now) || st.handle != nil) {
			h, live := st.handle, st.lease.Live(now)
			s.mu.Unlock()
			// Another instance held the lease when we last looked: look
			// again before serving (only fenced tables pay this read),
			// each round while the record we remember is live: a holder
			// that handed the table over released the lease, and waiting
			// for the expiry we remember would idle the table for up to a
			// TTL. Once it has expired, look once more: a holder that kept
			// renewing (an older build renews the lease of every table it
			// serves, busy or not) wrote a newer record meanwhile.
			if h == nil || (!full && live) {
				return
			}
			cur, err := lm.Read(ctx, h.Bucket, leaseName)
			s.mu.Lock()
			if err == nil && !st.removed {
				st.lease = cur
			}
			if err != nil || st.removed || st.owned || (cur.Holder != holder && cur.Live(now)) {
				s.mu.Unlock()
				return
			}
		}
		st.owned = true
		log().Debug("serving the table")
		// A takeover is logged where it happens: the instance that lost
		// the table may be dead and log nothing.
		from := ""
		switch {
		case st.lease.Holder != "" && st.lease.Holder != holder:
			from = st.lease.Holder
		case prevAssignee != "" && prevAssignee != holder:
			from = prevAssignee
		}
		if from != "" {
			log().Info("took over the table", zap.String("from", from), zap.String("holder", holder))
		}
		s.kick()
	}
	need := busy || (s.eligibleLocked(st) && st.hasPendingLocked())
	if !need || (st.held && lm.Fresh(st.lease)) {
		s.mu.Unlock()
		return
	}
	if !st.held && st.lease.Holder != "" && st.lease.Holder != holder && st.lease.Live(now) {
		s.mu.Unlock()
		return
	}
	held, cached := st.held, st.lease
	s.mu.Unlock()

	h, err := s.ensureOpen(ctx, st)
	if err != nil || h == nil {
		return
	}
	var cur lease.State
	var ok bool
	if held {
		cur, ok, err = lm.Renew(ctx, h.Bucket, leaseName, cached)
	} else {
		cur, ok, err = lm.TryAcquire(ctx, h.Bucket, leaseName)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.removed {
		return
	}
	if err != nil {
		if ctx.Err() == nil {
			log().Warn("lease round failed", zap.Error(err))
		}
		if st.held && !now.Before(st.lease.Expires) {
			st.held = false
			if st.running != nil {
				st.running.cancel(ErrLeaseLost)
				log().Warn("lease expired without renewal: job canceled")
			}
		}
		return
	}
	st.lease = cur
	switch {
	case ok:
		if !st.held {
			log().Debug("lease acquired", zap.Uint64("epoch", cur.Epoch))
		}
		st.held = true
		s.kick()
	default:
		st.held = false
		s.loseLocked(st, log())
	}
}

// hasPendingLocked reports whether a job of any kind waits. REQUIRES: s.mu
// held.
func (st *tableState) hasPendingLocked() bool {
	for _, p := range st.pending {
		if p != "" {
			return true
		}
	}
	return false
}

// leaseHeldLocked reports whether st may start a job now: leasing off, or
// this instance holds its lease with more than half the TTL left (so the
// lease loop renews it before it can expire under the job).
// REQUIRES: s.mu held.
func (s *Scheduler) leaseHeldLocked(st *tableState) bool {
	return s.deps.Leases == nil || (st.held && s.deps.Leases.Fresh(st.lease))
}

// wantLeaseLocked asks the lease loop for st's lease, which a job waits
// for. REQUIRES: s.mu held.
func (s *Scheduler) wantLeaseLocked(st *tableState) {
	if !st.leaseWanted {
		st.leaseWanted = true
		kickChan(s.leaseKick)
	}
}

// loseLocked stops serving a table whose lease another instance holds:
// that instance runs its jobs until its lease expires.
// REQUIRES: s.mu held.
func (s *Scheduler) loseLocked(st *tableState, log *zap.Logger) {
	wasOwned := st.owned
	st.owned = false
	st.pending = [numKinds]Trigger{}
	if st.running != nil {
		st.running.cancel(ErrLeaseLost)
		log.Warn("lease lost: job canceled", zap.String("holder", st.lease.Holder))
		return
	}
	if wasOwned {
		log.Info("another instance holds the lease", zap.String("holder", st.lease.Holder), zap.Time("until", st.lease.Expires))
	}
}
