package scheduler

import (
	"context"
	"errors"
	"time"

	"github.com/compactord/compactord/internal/observe"
)

// What a sync learns about a table (internal/observe): the status API's
// view and the source of the LSM-debt gauges.
type (
	Snapshot   = observe.Snapshot
	IndexInfo  = observe.IndexInfo
	ShardInfo  = observe.ShardInfo
	FRIVersion = observe.FRIVersion
)

// FormatLance is the table format Snapshot.Format names.
const FormatLance = observe.FormatLance

// Retained-bytes reasons: why trim keeps an SSTable.
const (
	RetainedNotMerged        = observe.RetainedNotMerged
	RetainedIndexLag         = observe.RetainedIndexLag
	RetainedVersionRetention = observe.RetainedVersionRetention
)

var retainedReasons = observe.RetainedReasons

// Observer reads one table for the scheduler; the opener supplies it with
// the table (for a Lance table internal/memwal's Observer). The scheduler
// knows no format: it reads what the snapshot says.
type Observer interface {
	// Sync reads the table: its newest version and every shard. An error
	// matching observe.ErrNoTable says no table exists there yet.
	Sync(ctx context.Context) (*Snapshot, error)
	// Poll checks cheaply, after a Sync, whether the shards changed: snap
	// is nil when nothing changed, and unmerged says generations wait to
	// be merged.
	Poll(ctx context.Context) (unmerged bool, snap *Snapshot, err error)
	// Head is the table's newest version, the read version an attempt's
	// in-flight marker publishes.
	Head(ctx context.Context) (uint64, error)
}

// observe reads the table.
func (st *tableState) observe(ctx context.Context, h *TableHandle) (*Snapshot, error) {
	return h.Observer.Sync(ctx)
}

// pollChanges re-reads the shards whose newest manifest changed.
func (st *tableState) pollChanges(ctx context.Context, h *TableHandle) (bool, *Snapshot, error) {
	return h.Observer.Poll(ctx)
}

// isNoTable: the location holds no table (yet).
func isNoTable(err error) bool {
	return errors.Is(err, observe.ErrNoTable)
}

// latestVersion is the table's newest version.
func latestVersion(ctx context.Context, h *TableHandle) (uint64, error) {
	return h.Observer.Head(ctx)
}

// followUpsLocked: a merge that landed generations
// queues index catch-up and trim, which then run in that order (equal
// waiting times break ties in Kinds order), so that change polling runs
// merge, catch-up and trim as one chain. A landed compaction queues the
// index job, which absorbs its fragment-reuse version (LanceDB's own
// optimize() must not meet a btree still on the old addresses).
// REQUIRES: s.mu held.
func (s *Scheduler) followUpsLocked(st *tableState, k Kind, class Class, out Outcome, now time.Time) {
	if (k != KindMerge && k != KindCompact) || class != ClassSuccess || out.Version == 0 || st.removed {
		return
	}
	follow := []Kind{KindIndex, KindTrim}
	if k == KindCompact {
		follow = follow[:1]
	}
	for _, f := range follow {
		if _, ok := s.deps.Jobs[f]; ok && !st.markedLocked(f) {
			st.pend(f, TriggerChange, now)
		}
	}
}
