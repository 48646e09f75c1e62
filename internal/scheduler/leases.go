package scheduler

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/compactord/compactord/internal/lease"
)

// leaseLoop renews the leases this instance holds and takes free ones,
// every RenewInterval (and at once when tables are added).
func (s *Scheduler) leaseLoop(ctx context.Context) {
	if s.deps.Leases == nil {
		return
	}
	for {
		s.leaseRound(ctx)
		s.mu.Lock()
		iv := s.cfg.Lease.RenewInterval
		s.mu.Unlock()
		t := s.clock.NewTimer(iv)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		case <-s.leaseKick:
			t.Stop()
		}
	}
}

func (s *Scheduler) leaseRound(ctx context.Context) {
	var assign map[string]string
	if m := s.deps.Members; m != nil {
		if err := m.Heartbeat(ctx); err != nil && ctx.Err() == nil {
			s.logger.Warn("membership heartbeat failed", zap.Error(err))
		}
		live, err := m.Live(ctx)
		if err != nil {
			if ctx.Err() == nil {
				s.logger.Warn("cannot list live instances; taking free tables first come, first served", zap.Error(err))
			}
		} else {
			s.mu.Lock()
			s.members = live
			names := make([]string, 0, len(s.tables))
			for n := range s.tables {
				names = append(names, n)
			}
			s.mu.Unlock()
			assign = lease.Assign(names, live)
		}
	}
	s.forEachTable(func(st *tableState) { s.leaseTable(ctx, st, assign) })
	s.kick()
}

// leaseTable renews, takes, hands over or watches one table's lease.
//
// With membership, a table goes to the instance Assign picks. An instance
// holding a table assigned elsewhere releases it when idle; a table that
// stays free for two rounds (its assignee is down, or sees another table
// list) is taken by anyone, so that every table is served.
func (s *Scheduler) leaseTable(ctx context.Context, st *tableState, assign map[string]string) {
	h, err := s.ensureOpen(ctx, st)
	if err != nil || h == nil {
		return
	}
	lm := s.deps.Leases
	holder := lm.Holder()
	now := s.clock.Now()
	s.mu.Lock()
	owned, cached, freeSince, removed := st.owned, st.lease, st.freeSince, st.removed
	renew := s.cfg.Lease.RenewInterval
	s.mu.Unlock()
	if removed {
		return
	}
	mine := assign == nil || assign[st.spec.Name] == holder
	log := s.deps.Logger.With(zap.String("component", "lease"), zap.String("table", st.spec.Name))

	if owned && !mine {
		s.mu.Lock()
		handOver := st.running == nil && !st.removed
		if handOver {
			st.owned = false
			st.pending = [numKinds]Trigger{}
		}
		s.mu.Unlock()
		if handOver {
			if err := lm.Release(ctx, h.Bucket, leaseName); err != nil {
				log.Warn("could not release the lease for hand-over; it expires instead", zap.Error(err))
			} else {
				log.Info("lease handed over", zap.String("to", assign[st.spec.Name]))
			}
			s.noteLease(ctx, st, h)
			return
		}
		// Busy: keep renewing until the attempt ends.
	}
	if !owned {
		if cached.Holder != "" && cached.Holder != holder && now.Before(cached.Expires) {
			return // another instance holds it; look again when it expires
		}
		if !mine {
			cur, err := lm.Read(ctx, h.Bucket, leaseName)
			if err != nil {
				return
			}
			s.mu.Lock()
			st.lease = cur
			switch {
			case cur.Live(now):
				st.freeSince = time.Time{}
			case freeSince.IsZero():
				st.freeSince = now
			}
			wait := st.freeSince.IsZero() || now.Sub(st.freeSince) < 2*renew
			s.mu.Unlock()
			if wait {
				return
			}
		}
	}
	var cur lease.State
	var held bool
	switch {
	case owned && lm.Fresh(cached):
		// Renewed less than half a TTL ago: no other instance may take it
		// before it expires, so there is nothing to read or write yet.
		return
	case owned && cached.Holder == holder:
		cur, held, err = lm.Renew(ctx, h.Bucket, leaseName, cached)
	default:
		cur, held, err = lm.TryAcquire(ctx, h.Bucket, leaseName)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.removed {
		return
	}
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("lease round failed", zap.Error(err))
		}
		if st.owned && !now.Before(st.lease.Expires) {
			s.loseLocked(st, log)
		}
		return
	}
	st.lease = cur
	switch {
	case held && !st.owned:
		st.owned, st.freeSince = true, time.Time{}
		log.Info("lease acquired", zap.Uint64("epoch", cur.Epoch))
		s.kick()
	case !held && st.owned:
		s.loseLocked(st, log)
	}
}

// loseLocked gives up a table whose lease another instance took.
// REQUIRES: s.mu held.
func (s *Scheduler) loseLocked(st *tableState, log *zap.Logger) {
	st.owned = false
	st.pending = [numKinds]Trigger{}
	if st.running != nil {
		st.running.cancel(ErrLeaseLost)
	}
	log.Warn("lease lost", zap.String("holder", st.lease.Holder))
}

// noteLease records the current lease record for the status API.
func (s *Scheduler) noteLease(ctx context.Context, st *tableState, h *TableHandle) {
	cur, err := s.deps.Leases.Read(ctx, h.Bucket, leaseName)
	if err != nil {
		return
	}
	s.mu.Lock()
	st.lease = cur
	s.mu.Unlock()
}
