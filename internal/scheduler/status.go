package scheduler

import (
	"slices"
	"time"

	"github.com/compactord/compactord/internal/marker"
	"github.com/compactord/compactord/internal/progress"
)

// JobRecord is one finished attempt.
type JobRecord struct {
	ID              uint64    `json:"id"`
	Table           string    `json:"table"`
	Kind            Kind      `json:"kind"`
	Trigger         Trigger   `json:"trigger"`
	Started         time.Time `json:"started"`
	Finished        time.Time `json:"finished"`
	DurationSeconds float64   `json:"duration_seconds"`
	Result          Class     `json:"result"`
	Error           string    `json:"error,omitempty"`
	Version         uint64    `json:"version,omitempty"`
	Summary         string    `json:"summary,omitempty"`
}

// TableStatus is the status API's document for one table.
type TableStatus struct {
	Name string `json:"name"`
	URL  string `json:"url"`
	// State is one of: ok, running, paused, halted, not_owned, not_synced.
	State  string `json:"state"`
	Paused bool   `json:"paused"`
	// Marks are the operators' marks in the table's bucket (pause,
	// no-compact), as of the last sync or this instance's own change.
	Marks     []marker.Mark `json:"marks"`
	Halted    *Halt         `json:"halted"`
	Owned     bool          `json:"owned"`
	Lease     *LeaseStatus  `json:"lease"`
	Synced    bool          `json:"synced"`
	LastSync  *time.Time    `json:"last_sync"`
	SyncError string        `json:"sync_error,omitempty"`
	// SyncConsecutiveFailures counts failed syncs in a row, of any class.
	SyncConsecutiveFailures int `json:"sync_consecutive_failures"`
	// Snapshot is the table as of the last sync (nil before the first).
	Snapshot *Snapshot             `json:"snapshot"`
	Running  *RunningJob           `json:"running"`
	Pending  []PendingJob          `json:"pending"`
	Jobs     map[string]KindStatus `json:"jobs"`
	Recent   []JobRecord           `json:"recent"`
}

// LeaseStatus is the newest lease record this instance read.
type LeaseStatus struct {
	Holder  string    `json:"holder"`
	Epoch   uint64    `json:"epoch"`
	Expires time.Time `json:"expires"`
}

// RunningJob is the attempt running on a table.
type RunningJob struct {
	ID      uint64    `json:"id"`
	Kind    Kind      `json:"kind"`
	Trigger Trigger   `json:"trigger"`
	Started time.Time `json:"started"`
	// Progress is the attempt's progress so far (nil before the job
	// reports any): the same numbers as a one-shot command's progress
	// lines.
	Progress *progress.Snapshot `json:"progress"`
}

// PendingJob is a job waiting to run.
type PendingJob struct {
	Kind      Kind       `json:"kind"`
	Trigger   Trigger    `json:"trigger"`
	Since     time.Time  `json:"since"`
	NotBefore *time.Time `json:"not_before,omitempty"`
}

// KindStatus is one job kind on one table.
type KindStatus struct {
	// Available is false when this build has no job of the kind.
	Available bool       `json:"available"`
	Schedule  string     `json:"schedule"`
	Next      *time.Time `json:"next"`
	LastRun   *JobRecord `json:"last_run"`
	// ConsecutiveFailures counts failed attempts in a row, of every class
	// (retry, error, fatal), since FailingSince; ConsecutiveErrors only the
	// non-retryable ones, which quarantine_after counts.
	ConsecutiveFailures int        `json:"consecutive_failures"`
	ConsecutiveErrors   int        `json:"consecutive_errors"`
	FailingSince        *time.Time `json:"failing_since"`
	// NextAttempt is when the next attempt may start: the end of a retry's
	// backoff, now for a job waiting for a worker, else the next scheduled
	// run (nil: none).
	NextAttempt *time.Time `json:"next_attempt"`
	// UpToDate is when the kind last succeeded, or was skipped because
	// nothing it reads had changed since it last found nothing to do.
	UpToDate *time.Time `json:"up_to_date"`
}

// status builds the document. REQUIRES: s.mu held.
func (s *Scheduler) status(st *tableState) TableStatus {
	ts := TableStatus{Name: st.spec.Name, URL: st.spec.URL, Paused: st.paused, Owned: st.owned,
		Synced: st.synced, SyncError: st.syncErr, SyncConsecutiveFailures: st.syncRetries, Snapshot: st.snap, Jobs: map[string]KindStatus{},
		Pending: []PendingJob{}, Recent: slices.Clone(st.history), Marks: marker.Sorted(st.marks)}
	if ts.Recent == nil {
		ts.Recent = []JobRecord{}
	}
	slices.Reverse(ts.Recent) // newest first
	if st.halted != nil {
		h := *st.halted
		ts.Halted = &h
	}
	if st.lease.Holder != "" {
		ts.Lease = &LeaseStatus{Holder: st.lease.Holder, Epoch: st.lease.Epoch, Expires: st.lease.Expires}
	}
	if !st.lastSync.IsZero() {
		t := st.lastSync
		ts.LastSync = &t
	}
	if a := st.running; a != nil {
		ts.Running = &RunningJob{ID: a.id, Kind: a.kind, Trigger: a.trigger, Started: a.started}
		if p, ok := a.progress.Snapshot(); ok {
			ts.Running.Progress = &p
		}
	}
	for i, k := range Kinds {
		if st.pending[i] != "" {
			p := PendingJob{Kind: k, Trigger: st.pending[i], Since: st.pendSince[i]}
			if nb := st.notBefore[i]; !nb.IsZero() {
				p.NotBefore = &nb
			}
			ts.Pending = append(ts.Pending, p)
		}
		_, avail := s.deps.Jobs[k]
		spec := s.cfg.Schedule.Get(k)
		if own := st.spec.Schedule.Get(k); own != "" {
			spec = own
		}
		ks := KindStatus{Available: avail, Schedule: spec, LastRun: st.lastRuns[i],
			ConsecutiveFailures: st.retries[i], ConsecutiveErrors: st.failures[i]}
		if f := st.failingSince[i]; !f.IsZero() {
			ks.FailingSince = &f
		}
		if n, ok := s.nextAttemptLocked(st, i); ok {
			ks.NextAttempt = &n
		}
		if ks.Schedule == "" {
			ks.Schedule = "off"
		}
		if n := st.next[i]; !n.IsZero() && s.schedLocked(st, i) != nil {
			ks.Next = &n
		}
		if u := st.upToDate[i]; !u.IsZero() {
			ks.UpToDate = &u
		}
		ts.Jobs[string(k)] = ks
	}
	switch {
	case st.halted != nil:
		ts.State = "halted"
	case st.paused:
		ts.State = "paused"
	case !st.owned:
		ts.State = "not_owned"
	case !st.synced:
		ts.State = "not_synced"
	case st.running != nil:
		ts.State = "running"
	default:
		ts.State = "ok"
	}
	return ts
}

// nextAttemptLocked is when the next attempt of kind index i may start on
// st: the end of a pending job's backoff, the time it was queued for one
// waiting for a worker or its table, else the next scheduled run. A halted
// or paused table has none. REQUIRES: s.mu held.
func (s *Scheduler) nextAttemptLocked(st *tableState, i int) (time.Time, bool) {
	if st.halted != nil || st.paused || st.removed || st.markedLocked(Kinds[i]) {
		return time.Time{}, false
	}
	if _, ok := s.deps.Jobs[Kinds[i]]; !ok {
		return time.Time{}, false
	}
	if st.pending[i] != "" {
		if nb := st.notBefore[i]; !nb.IsZero() {
			return nb, true
		}
		return st.pendSince[i], true
	}
	if s.schedLocked(st, i) != nil && !st.next[i].IsZero() {
		return st.next[i], true
	}
	return time.Time{}, false
}
