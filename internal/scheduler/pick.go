package scheduler

import (
	"sort"
	"time"
)

// The choice of the next attempts is a pure function of a plain value
// (as Pebble's compaction picker reads its compactionEnv): dispatchLocked
// copies what the choice depends on into a PickEnv, Pick decides, and
// dispatchLocked applies the result. Scenario files under testdata/pick
// pin the rules down (pick_test.go).

// PickEnv is everything the choice of the next attempts depends on.
type PickEnv struct {
	Now time.Time
	// Workers is the limit of attempts running at once; Running how many
	// run now.
	Workers, Running int
	// Draining: the scheduler is shutting down; nothing starts.
	Draining bool
	Tables   []PickTable
}

// PickTable is one table as the picker sees it.
type PickTable struct {
	Name string
	// The table may start an attempt only when it is owned by this
	// instance, synced, open, and neither removed, halted nor paused.
	Owned, Synced, Open     bool
	Removed, Halted, Paused bool
	// LeaseReady: leasing is off, or this instance holds the table's lease
	// with enough of it left to start a job.
	LeaseReady bool
	// Running: an attempt runs on the table (at most one per table).
	Running bool
	// Pending lists the pending job of each kind, at most one per kind.
	Pending []PickPending
}

// PickPending is a job waiting to run.
type PickPending struct {
	Kind    Kind
	Trigger Trigger
	// Since is when it became pending; NotBefore ends its backoff.
	Since, NotBefore time.Time
	// Blocked: this build has no job of the kind, or an operator's mark
	// keeps it from running; the pending entry is dropped.
	Blocked bool
}

// JobRef names a job kind on a table.
type JobRef struct {
	Table string
	Kind  Kind
}

// PickResult is what Pick decided.
type PickResult struct {
	// Start lists the attempts to start, in order.
	Start []JobRef
	// WantLease lists the tables that would start an attempt but do not
	// hold their lease: the lease loop is asked for it.
	WantLease []string
	// Drop lists the pending jobs that can never run (PickPending.Blocked).
	Drop []JobRef
	// Pending counts, per kind, the pending jobs that are not dropped
	// (the compactord_jobs_pending gauge).
	Pending map[Kind]int
}

// eligible: the table may start an attempt.
func (t *PickTable) eligible() bool {
	return !t.Removed && t.Owned && t.Synced && !t.Halted && !t.Paused && t.Open
}

// Pick chooses the attempts to start. Per table, the pending kind whose
// backoff is over and that has waited longest runs, Kinds order breaking
// ties (so kinds that came due together run in order); across tables, the
// one whose job has waited longest goes first, table names breaking ties.
// Waiting time, not Kinds order alone, decides: under constant flushing a
// merge is pending again whenever one ends, and strict order starved
// every other kind (found by a concurrency campaign). A table runs at most
// one attempt, and at most Workers run in all.
func Pick(env PickEnv) PickResult {
	res := PickResult{Pending: map[Kind]int{}}
	type cand struct {
		table string
		kind  Kind
		since time.Time
	}
	var cands []cand
	for ti := range env.Tables {
		t := &env.Tables[ti]
		var chosen *PickPending
		for _, k := range Kinds {
			for pi := range t.Pending {
				p := &t.Pending[pi]
				if p.Kind != k {
					continue
				}
				if p.Blocked {
					res.Drop = append(res.Drop, JobRef{t.Name, k})
					continue
				}
				res.Pending[k]++
				if !env.Now.Before(p.NotBefore) && (chosen == nil || p.Since.Before(chosen.Since)) {
					chosen = p
				}
			}
		}
		if chosen == nil || t.Running || !t.eligible() || env.Draining {
			continue
		}
		if !t.LeaseReady {
			res.WantLease = append(res.WantLease, t.Name)
			continue
		}
		cands = append(cands, cand{t.Name, chosen.Kind, chosen.Since})
	}
	sort.Slice(cands, func(a, b int) bool {
		if !cands[a].since.Equal(cands[b].since) {
			return cands[a].since.Before(cands[b].since)
		}
		return cands[a].table < cands[b].table
	})
	running := env.Running
	for _, c := range cands {
		if running >= env.Workers {
			break
		}
		res.Start = append(res.Start, JobRef{c.table, c.kind})
		running++
	}
	sort.Strings(res.WantLease)
	return res
}
