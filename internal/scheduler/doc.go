// Package scheduler decides which maintenance job runs on which table, when,
// and what its outcome means.
//
// # Spec → Job → Attempt
//
//   - A Spec says what to do: a table (TableSpec) and, per job kind, a cron
//     schedule, a time budget and a JobFunc (Config, Deps.Jobs). Specs change
//     only by configuration (SetTables, Reconfigure).
//   - A Job is the decision to run one kind on one table: a pending entry
//     made by the schedule coming due, by change polling (new SSTables in a
//     shard trigger a merge), by an operator (Trigger), by a retry after a
//     failure, or by a job reporting that more work remains. Pending jobs
//     of one kind on one table collapse into one.
//   - An Attempt is one run of a Job: it takes a worker, publishes an
//     in-flight marker (internal/inflight) so that cleanup keeps its files,
//     runs the JobFunc under the job's time budget, and ends with exactly
//     one outcome: success, skipped, canceled, retry, error or fatal.
//
// # Rules
//
//   - INVARIANT: at most one attempt runs per table in this process.
//   - Which attempts start is a pure function of a plain value (Pick over a
//     PickEnv, pick.go; scenarios in testdata/pick). Within a table, the
//     pending kind that has waited longest and is out of its backoff runs;
//     kinds that became pending at the same instant run in the order merge
//     → compact → index → trim → cleanup (Kinds). Waiting time rather than
//     that order decides because under constant flushing a merge is
//     pending again whenever one ends, and a fixed order starved the other
//     kinds. The order still holds for follow-ups: a merge that landed
//     generations queues index catch-up and trim, a landed compaction the
//     index job, so that one catch-up covers the new fragments and trim
//     sees the newest positions.
//   - A global worker limit bounds the attempts running at once; across
//     tables, the one whose chosen job has waited longest goes first.
//   - Error classes (errors.go) are marked where the failure happens
//     (internal/jobclass: the commit loop marks its conflicts, meta its
//     corrupt metadata), so that the scheduler knows no job's errors: a
//     retryable error backs off with jitter; a
//     non-retryable one backs off too and, after QuarantineAfter in a row
//     of one kind (or of table syncs), halts the table with a reason while
//     the other tables keep running; a cancellation the scheduler caused
//     (shutdown, table removed, lease lost) is not a failure (Mimir checks
//     errors.Is(err, context.Canceled) against its own named cause); a fatal
//     error stops the process.
//   - Leases (internal/lease) decide which instance works on which table.
//     Correctness never depends on them: the commit loop is the arbiter.
//   - The scheduler knows jobs, not table formats: the opener supplies each
//     table's Observer (internal/memwal's for Lance tables), whose
//     snapshots (internal/observe) say what changed, and the jobs keep
//     their own handles of the table.
//   - Time comes from an injected clock.Clock; the scheduler never calls
//     time.Now, so tests move time by hand.
package scheduler
