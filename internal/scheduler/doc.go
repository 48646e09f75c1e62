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
//   - INVARIANT: at most one attempt runs per table in this process. Within
//     a table, pending kinds run in the order merge → compact → index → trim
//     → cleanup: landing SSTables first gives compaction the newest
//     fragments, compaction before the index job lets one catch-up cover
//     the compacted fragments, and trim and cleanup then see the newest
//     positions and reclaim the most.
//   - A global worker limit bounds the attempts running at once; the table
//     whose pending job waited longest goes first.
//   - Error classes (errors.go): a retryable error backs off with jitter; a
//     non-retryable one backs off too and, after QuarantineAfter in a row
//     of one kind (or of table syncs), halts the table with a reason while
//     the other tables keep running; a cancellation the scheduler caused
//     (shutdown, table removed, lease lost) is not a failure (Mimir checks
//     errors.Is(err, context.Canceled) against its own named cause); a fatal
//     error stops the process.
//   - Leases (internal/lease) decide which instance works on which table.
//     Correctness never depends on them: the commit loop is the arbiter.
//   - Time comes from an injected clock.Clock; the scheduler never calls
//     time.Now, so tests move time by hand.
package scheduler
