package scheduler

import (
	"context"
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
	"go.uber.org/zap"

	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/lease"
	"github.com/compactord/compactord/internal/marker"
	"github.com/compactord/compactord/internal/progress"
	"github.com/compactord/compactord/internal/storage"
)

// TableSpec names a table to maintain.
type TableSpec struct {
	// Name identifies the table in metrics, logs and the API.
	Name string `json:"name"`
	URL  string `json:"url"`
	// Schedule is the table's own schedule, kind by kind: an empty spec
	// keeps the configuration's, "off" turns the kind off for this table
	// only (the daemon's per-table policy sets it).
	Schedule Schedules `json:"schedule,omitzero"`
}

// TableHandle is an open table, as a job sees it.
type TableHandle struct {
	Name string
	URL  string
	// Bucket is the table root, instrumented with the object-store metrics.
	Bucket storage.Bucket
	// Observer reads the table's state for the scheduler (syncs, change
	// polling, the head version). The opener's jobs may keep what they
	// need of the table with it (the daemon keeps the Lance dataset and
	// its commit loop there): the scheduler knows only this interface.
	Observer Observer
	// Logger is scoped to the table, the job kind and the attempt.
	Logger *zap.Logger
	// Clock is the scheduler's clock, which the jobs read time from.
	Clock clock.Clock
	// Trigger says why this attempt runs.
	Trigger Trigger
	// Close releases the bucket; the scheduler calls it when the table is
	// removed or the scheduler stops.
	Close func() error
}

// Opener opens a table; the daemon supplies one that instruments the
// bucket, shares the commit metrics and observes the table (a handle
// without an Observer is refused).
type Opener func(ctx context.Context, spec TableSpec) (*TableHandle, error)

// Outcome is what a job reports besides its error.
type Outcome struct {
	// Version is the version the job committed (0: none).
	Version uint64
	// Summary is one line for logs and the status page.
	Summary string
	// More asks for another attempt at once: the job stopped with work
	// left (e.g. it merged some generations of many).
	More bool
	// Waiting says work is left that only time releases (trim holding
	// SSTables for the reader grace): the next scheduled attempt runs even
	// if the table did not change, instead of being elided.
	Waiting bool
	// NothingToDo: the attempt found no work (nothing to merge, compact,
	// catch up, trim or delete). It is recorded as result "skipped", as
	// the documentation defines it, not as "success".
	NothingToDo bool
	Stats       Stats
	// Retained, when set, is the oldest version the job left in place
	// (cleanup): with the table's newest version, the version-retention
	// debt until the next cleanup.
	Retained *RetainedVersion
}

// RetainedVersion is a table's oldest retained version and its commit time.
type RetainedVersion struct {
	Version   uint64
	Timestamp time.Time
}

// Stats feed the work counters (compactord_*_total).
type Stats struct {
	SSTablesMerged uint64
	BytesTrimmed   uint64
	FragmentsIn    uint64
	FragmentsOut   uint64
}

// JobFunc runs one attempt of a job kind on a table. It must honour ctx,
// and it returns errors classified as Classify describes.
type JobFunc func(ctx context.Context, t *TableHandle) (Outcome, error)

// attempt is one run of a job.
type attempt struct {
	id      uint64
	kind    Kind
	trigger Trigger
	started time.Time
	cancel  context.CancelCauseFunc
	logger  *zap.Logger // the scheduler's, scoped to the attempt
	// progress is the attempt's reporter, on its context: the status
	// API's running.progress.
	progress *progress.Reporter
	// fp is the table's fingerprint when the attempt started.
	fp string
}

// tableState is everything the scheduler tracks per table.
// REQUIRES: Scheduler.mu held for every field.
type tableState struct {
	spec TableSpec
	// logger is the scheduler's (component=scheduler) scoped to the table;
	// jobLogger has no component, which each job package adds itself.
	logger    *zap.Logger
	jobLogger *zap.Logger
	handle    *TableHandle
	openErr   error

	next [numKinds]time.Time
	// sched and interval are the table's own schedules (spec.Schedule),
	// parsed; a kind the spec leaves empty follows the configuration
	// (Scheduler.schedLocked).
	sched     [numKinds]cron.Schedule
	interval  [numKinds]time.Duration
	pending   [numKinds]Trigger
	pendSince [numKinds]time.Time
	notBefore [numKinds]time.Time
	// failures counts non-retryable failures in a row per kind; retries
	// counts failures of any class in a row (the streak the API shows, and
	// the backoff), since failingSince.
	failures     [numKinds]int
	retries      [numKinds]int
	failingSince [numKinds]time.Time

	running *attempt
	// paused mirrors the pause mark (marks), set at once by Pause and
	// Resume and read back by every sync.
	paused bool
	marks  map[marker.Kind]marker.Mark
	// marksSeq counts the operator's Pause and Resume calls: a sync that
	// read the marks before one of them does not apply what it read.
	marksSeq uint64
	halted   *Halt
	removed  bool

	synced bool
	snap   *Snapshot
	// shardsChecked is when the shard manifests behind snap were last
	// checked (by a sync or a change poll) without error.
	shardsChecked time.Time
	lastSync      time.Time
	syncErr       string
	// syncFailures counts non-retryable sync failures in a row;
	// syncRetries failures of any class, since syncFailingSince.
	syncFailures     int
	syncRetries      int
	syncFailingSince time.Time

	// owned: this instance serves the table (leases.go); held: it holds
	// lease, the newest record it knows, live; leaseWanted: a job waits
	// for the lease loop to take or renew it; assignee: the instance
	// membership assigns the table to ("" without membership).
	owned       bool
	assignee    string
	held        bool
	leaseWanted bool
	lease       lease.State

	history  []JobRecord
	lastRuns [numKinds]*JobRecord
	// clean is the table's fingerprint when a kind last succeeded without
	// committing anything; a scheduled run on the same fingerprint would
	// find nothing to do and is elided. upToDate is when a kind last
	// succeeded or was elided.
	clean    [numKinds]string
	upToDate [numKinds]time.Time
	// added is when this instance started watching the table. state is
	// the job state kept in the bucket (jobstate.go), merged with this
	// instance's news; stateLoaded: the first sync read it (until then the
	// schedules run from added). startChecked: an eligible sync looked for
	// work waiting since before this instance started.
	added        time.Time
	state        JobState
	stateLoaded  bool
	startChecked bool
	// gauge label sets in use, to delete the ones that disappear.
	gaugeShards map[string]bool
	gaugeLag    map[[2]string]bool
}

// Halt is why a table is quarantined.
type Halt struct {
	Reason string    `json:"reason"`
	Error  string    `json:"error"`
	Kind   string    `json:"kind"` // the job kind, or "sync"
	Since  time.Time `json:"since"`
}

func (st *tableState) pend(k Kind, t Trigger, now time.Time) {
	i := k.index()
	if st.pending[i] == "" {
		st.pendSince[i] = now
		st.pending[i] = t
		return
	}
	// An operator's request wins over the reason already recorded, and
	// skips the backoff.
	if t == TriggerManual {
		st.pending[i] = t
		st.notBefore[i] = time.Time{}
	}
}

func (st *tableState) String() string { return fmt.Sprintf("table %s (%s)", st.spec.Name, st.spec.URL) }
