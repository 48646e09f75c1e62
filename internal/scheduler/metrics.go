package scheduler

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/compactord/compactord/internal/marker"
)

// Metrics of the scheduler (documented in docs/operations.md).
//
// Per-table series are created when the table is added, at 0, only where
// an alert needs the zero or the value always exists: compactord_table_halted
// and compactord_table_paused (compared with 1), compactord_lease_owned
// (alerted at 0), compactord_job_failures_total and
// compactord_table_sync_failures_total (alerted on their increase, which a
// counter born at 1 hides), the table's version, last sync and FRI
// versions, and the merged and trimmed totals the dashboards rate. The
// others (runs, durations, last success, fragment counters) are created
// when they first get a value: pre-creating them all was 110
// series and most of the heap per table of an idle daemon. Every series of
// a table is deleted when it is removed; per-shard and per-index series are
// created when a sync first sees the shard or index.
type Metrics struct {
	runs          *prometheus.CounterVec
	failures      *prometheus.CounterVec
	duration      *prometheus.HistogramVec
	syncFailures  *prometheus.CounterVec
	pendingGens   *prometheus.GaugeVec
	retainedBytes *prometheus.GaugeVec
	catchupLag    *prometheus.GaugeVec
	merged        *prometheus.CounterVec
	trimmedBytes  *prometheus.CounterVec
	fragsIn       *prometheus.CounterVec
	fragsOut      *prometheus.CounterVec
	busy          prometheus.Gauge
	workers       prometheus.Gauge
	pending       *prometheus.GaugeVec
	tables        prometheus.Gauge
}

// durationBuckets span a no-op job (tens of ms) to a long compaction.
// Few buckets: the histogram exists per table and kind, and its series
// are most of an idle daemon's memory.
var durationBuckets = []float64{0.1, 1, 10, 60, 300, 1800}

// Kinds that move fragments: only their fragment series exist.
var (
	fragsInKinds  = []Kind{KindCompact}
	fragsOutKinds = []Kind{KindMerge, KindCompact}
)

// NewMetrics registers the scheduler metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := promauto.With(reg)
	tk := []string{"table", "kind"}
	m := &Metrics{
		runs: f.NewCounterVec(prometheus.CounterOpts{Name: "compactord_job_runs_total",
			Help: "Finished job attempts by table, kind and result (success, skipped, canceled, retry, error, fatal)."}, []string{"table", "kind", "result"}),
		failures: f.NewCounterVec(prometheus.CounterOpts{Name: "compactord_job_failures_total",
			Help: "Failed job attempts (results retry, error and fatal) by table and kind."}, tk),
		duration: f.NewHistogramVec(prometheus.HistogramOpts{Name: "compactord_job_duration_seconds",
			Help: "Duration of finished job attempts by table and kind.", Buckets: durationBuckets}, tk),
		syncFailures: f.NewCounterVec(prometheus.CounterOpts{Name: "compactord_table_sync_failures_total",
			Help: "Failed reads of a table's manifest and shard manifests."}, []string{"table"}),
		pendingGens: f.NewGaugeVec(prometheus.GaugeOpts{Name: "compactord_mem_wal_pending_generations",
			Help: "Flushed SSTable generations not yet merged into the base table, by table and shard."}, []string{"table", "shard"}),
		retainedBytes: f.NewGaugeVec(prometheus.GaugeOpts{Name: "compactord_sstable_retained_bytes",
			Help: "Bytes of SSTables still stored, by table, shard and why they are kept (not_merged, index_lag, version_retention)."}, []string{"table", "shard", "reason"}),
		catchupLag: f.NewGaugeVec(prometheus.GaugeOpts{Name: "compactord_index_catchup_lag_generations",
			Help: "Merged generations an index does not provably cover, by table, index and shard (an absent catch-up entry counts as 0 covered)."}, []string{"table", "index", "shard"}),
		merged: f.NewCounterVec(prometheus.CounterOpts{Name: "compactord_sstables_merged_total",
			Help: "SSTables merged into the base table by this instance's jobs."}, []string{"table"}),
		trimmedBytes: f.NewCounterVec(prometheus.CounterOpts{Name: "compactord_sstable_trimmed_bytes_total",
			Help: "Bytes of SSTables and WAL entries deleted by this instance's trim jobs."}, []string{"table"}),
		fragsIn: f.NewCounterVec(prometheus.CounterOpts{Name: "compactord_job_fragments_in_total",
			Help: "Fragments consumed (rewritten away) by jobs, by table and kind (compact)."}, tk),
		fragsOut: f.NewCounterVec(prometheus.CounterOpts{Name: "compactord_job_fragments_out_total",
			Help: "Fragments written by jobs, by table and kind (merge, compact)."}, tk),
		busy: f.NewGauge(prometheus.GaugeOpts{Name: "compactord_workers_busy",
			Help: "Job attempts running now."}),
		workers: f.NewGauge(prometheus.GaugeOpts{Name: "compactord_workers_limit",
			Help: "The configured worker limit."}),
		pending: f.NewGaugeVec(prometheus.GaugeOpts{Name: "compactord_jobs_pending",
			Help: "Jobs waiting for a worker (or a backoff to end), by kind."}, []string{"kind"}),
		tables: f.NewGauge(prometheus.GaugeOpts{Name: "compactord_tables",
			Help: "Tables this instance watches."}),
	}
	for _, k := range Kinds {
		m.pending.WithLabelValues(string(k))
	}
	return m
}

// addTable pre-creates the per-table counters that alerts need at 0 (the
// per-table gauges are jobCollector's).
func (m *Metrics) addTable(name string, kinds []Kind) {
	for _, k := range kinds {
		m.failures.WithLabelValues(name, string(k))
	}
	m.syncFailures.WithLabelValues(name)
	m.merged.WithLabelValues(name)
	m.trimmedBytes.WithLabelValues(name)
}

// addCounter adds v to a counter, creating its series only for work done
// (a zero add would create it for every table and kind).
func addCounter(c *prometheus.CounterVec, v float64, labels ...string) {
	if v > 0 {
		c.WithLabelValues(labels...).Add(v)
	}
}

// removeTable deletes every series of the table.
func (m *Metrics) removeTable(name string) {
	l := prometheus.Labels{"table": name}
	for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{
		m.runs, m.failures, m.syncFailures,
		m.pendingGens, m.retainedBytes, m.catchupLag, m.merged, m.trimmedBytes,
		m.fragsIn, m.fragsOut,
	} {
		v.DeletePartialMatch(l)
	}
	m.duration.DeletePartialMatch(l)
}

// jobCollector exports, at scrape time, the per-job state that changes
// without an attempt finishing (the clock moving a schedule, a backoff):
// every (table, kind) series exists from the moment the table is added,
// like the pre-created ones, and disappears with it.
type jobCollector struct{ s *Scheduler }

var (
	descConsecutiveFailures = prometheus.NewDesc("compactord_job_consecutive_failures",
		"Failed attempts in a row (results retry, error and fatal) by table and kind; 0 after a success or skip.", []string{"table", "kind"}, nil)
	descNextRun = prometheus.NewDesc("compactord_job_next_run_timestamp_seconds",
		"Unix time when the next attempt may start, by table and kind: the end of a retry's backoff, or the next scheduled run; 0 when none is planned (schedule off, table paused or halted).", []string{"table", "kind"}, nil)
	descInterval = prometheus.NewDesc("compactord_job_schedule_interval_seconds",
		"The longest gap between two runs of the kind's schedule (an @every interval, or the widest gap of a cron spec over its next runs); 0 when the schedule is off or this build has no job of the kind.", []string{"kind"}, nil)
	descSyncFailures = prometheus.NewDesc("compactord_table_sync_consecutive_failures",
		"Failed syncs of the table in a row; 0 after a successful sync.", []string{"table"}, nil)
	// The per-table gauges the scheduler's state already holds, read at
	// scrape time rather than kept as a labelled child per table (each
	// costs about 600 bytes of heap, which adds up over 1000 tables).
	descHalted = prometheus.NewDesc("compactord_table_halted",
		"1 when the table is quarantined for the reason (corrupt, failing, retry_budget, unsupported_feature: a newer Lance's feature flag holds it back); resume it through the API.", []string{"table", "reason"}, nil)
	descPaused = prometheus.NewDesc("compactord_table_paused",
		"1 when an operator paused the table.", []string{"table"}, nil)
	descLeaseOwned = prometheus.NewDesc("compactord_lease_owned",
		"1 when this instance serves the table: assigned to it by membership (any instance without) and no other instance's lease on it live; always 1 with leasing off.", []string{"table"}, nil)
	descVersion = prometheus.NewDesc("compactord_table_version",
		"The newest table version seen by the last sync.", []string{"table"}, nil)
	descLastSync = prometheus.NewDesc("compactord_table_last_sync_timestamp_seconds",
		"Unix time of the last successful sync of the table; 0 before the first.", []string{"table"}, nil)
	descFRIVersions = prometheus.NewDesc("compactord_fri_versions",
		"Fragment-reuse index versions outstanding (not yet trimmed) by table.", []string{"table"}, nil)
	// From the job state kept in the table's bucket (jobstate.go), so
	// that they survive restarts and exist, at 0, for a kind that never
	// succeeded.
	descLastSuccess = prometheus.NewDesc("compactord_job_last_success_timestamp_seconds",
		"Unix time of the last successful (or skipped) attempt by table and kind, by any instance, kept in the table's bucket across restarts; 0 when none is known (never, or before the first sync read the bucket).", []string{"table", "kind"}, nil)
	descLastRun = prometheus.NewDesc("compactord_job_last_run_timestamp_seconds",
		"Unix time when the last finished attempt (any result but canceled) by table and kind started, by any instance, kept in the table's bucket across restarts; 0 when none is known.", []string{"table", "kind"}, nil)
	// The debt a table carries, from its last sync (observe.Snapshot,
	// which the opener enriches from the version it read) and its job
	// state: labelled per table, and per index or reason at most.
	descFragments = prometheus.NewDesc("compactord_table_fragments",
		"Fragments of the table's newest version.", []string{"table"}, nil)
	descSmallFragments = prometheus.NewDesc("compactord_table_small_fragments",
		"Fragments with fewer live rows than compaction's target (jobs.compact.target_rows_per_fragment): compaction debt.", []string{"table"}, nil)
	descVersionsRetained = prometheus.NewDesc("compactord_table_versions_retained",
		"Versions from the oldest one the last cleanup kept to the newest, by table; 0 until a cleanup (of any instance) recorded its oldest kept version in the table's bucket.", []string{"table"}, nil)
	descOldestAge = prometheus.NewDesc("compactord_table_oldest_retained_version_age_seconds",
		"Age of the oldest version the last cleanup kept (now minus its commit time), by table; 0 until a cleanup recorded it.", []string{"table"}, nil)
	descUnindexedRows = prometheus.NewDesc("compactord_index_unindexed_rows",
		"Live rows of the fragments no segment of the index covers, by table and index (0 when the index records no fragment bitmap).", []string{"table", "index"}, nil)
	descRetainedGens = prometheus.NewDesc("compactord_table_retained_generations",
		"MemWAL generations (SSTables) still stored, by table and why they are kept (not_merged, index_lag, version_retention), summed over shards.", []string{"table", "reason"}, nil)
	descRetainedBytes = prometheus.NewDesc("compactord_table_retained_bytes",
		"Bytes of MemWAL generations still stored, by table and why they are kept, summed over shards (compactord_sstable_retained_bytes has them per shard).", []string{"table", "reason"}, nil)
	descRunningAge = prometheus.NewDesc("compactord_job_running_seconds",
		"How long the attempt of the kind running on the table has run; 0 when none runs.", []string{"table", "kind"}, nil)
	descBudget = prometheus.NewDesc("compactord_job_budget_seconds",
		"The time budget of one attempt of the kind (scheduler.timeouts), after which the attempt is canceled.", []string{"kind"}, nil)
	descMarkSince = prometheus.NewDesc("compactord_table_mark_since_timestamp_seconds",
		"Unix time since when an operator's mark (pause, no-compact) has been on the table, by table and mark; 0 when it is not.", []string{"table", "mark"}, nil)
	descFirstSeen = prometheus.NewDesc("compactord_table_first_seen_timestamp_seconds",
		"Unix time when an instance first watched the table, kept in its bucket: a kind that has not succeeded since is overdue 5 intervals after it; 0 before the first sync read the bucket.", []string{"table"}, nil)
)

// collectDebt exports the table's debt gauges. The series exist whether
// or not there is debt, at 0 when there is none (no attempt running, no
// mark, nothing known yet), so that dashboards and rules always find
// them; they cost nothing between scrapes. REQUIRES: s.mu held.
func (s *Scheduler) collectDebt(ch chan<- prometheus.Metric, st *tableState, now time.Time) {
	name := st.spec.Name
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{name}, labels...)...)
	}
	for _, k := range Kinds {
		if _, have := s.deps.Jobs[k]; !have {
			continue
		}
		age := 0.0
		if a := st.running; a != nil && a.kind == k {
			age = max(now.Sub(a.started), 0).Seconds()
		}
		gauge(descRunningAge, age, string(k))
	}
	for _, mk := range marker.Kinds {
		gauge(descMarkSince, unixSeconds(st.marks[mk].Since), string(mk))
	}
	snap := st.snap
	if snap == nil {
		return
	}
	gauge(descFragments, float64(snap.Fragments))
	gauge(descSmallFragments, float64(snap.SmallFragments))
	var versions, age float64
	if o := st.state.OldestRetained; o > 0 && o <= snap.Version {
		versions = float64(snap.Version - o + 1)
		if t := st.state.OldestRetainedTime; !t.IsZero() {
			age = max(now.Sub(t), 0).Seconds()
		}
	}
	gauge(descVersionsRetained, versions)
	gauge(descOldestAge, age)
	for _, ix := range snap.Indices {
		gauge(descUnindexedRows, float64(ix.UnindexedRows), ix.Name)
	}
	if snap.MemWal {
		for _, r := range retainedReasons {
			var gens, bytes uint64
			for _, sh := range snap.Shards {
				gens += sh.RetainedGenerations[r]
				bytes += sh.Retained[r]
			}
			gauge(descRetainedGens, float64(gens), r)
			gauge(descRetainedBytes, float64(bytes), r)
		}
	}
}

// unixSeconds is t as a timestamp gauge: 0 for the zero time.
func unixSeconds(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixMilli()) / 1e3
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (c jobCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descConsecutiveFailures
	ch <- descNextRun
	ch <- descInterval
	ch <- descSyncFailures
	for _, d := range []*prometheus.Desc{descHalted, descPaused, descLeaseOwned, descVersion, descLastSync, descFRIVersions,
		descLastSuccess, descLastRun, descFirstSeen, descFragments, descSmallFragments, descVersionsRetained, descOldestAge,
		descUnindexedRows, descRetainedGens, descRetainedBytes, descRunningAge, descBudget, descMarkSince} {
		ch <- d
	}
}

func (c jobCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	for i, k := range Kinds {
		// The widest over every table's schedule, so that a staleness
		// alert allows for the table with the longest one.
		iv := s.interval[i]
		for _, st := range s.tables {
			if st.spec.Schedule.Get(k) != "" {
				iv = max(iv, st.interval[i])
			}
		}
		ch <- prometheus.MustNewConstMetric(descInterval, prometheus.GaugeValue, iv.Seconds(), string(k))
		if _, have := s.deps.Jobs[k]; have {
			ch <- prometheus.MustNewConstMetric(descBudget, prometheus.GaugeValue, s.cfg.Timeouts.For(k).Seconds(), string(k))
		}
	}
	for _, st := range s.tables {
		name := st.spec.Name
		ch <- prometheus.MustNewConstMetric(descSyncFailures, prometheus.GaugeValue, float64(st.syncRetries), name)
		for _, r := range allReasons {
			ch <- prometheus.MustNewConstMetric(descHalted, prometheus.GaugeValue, boolGauge(st.halted != nil && st.halted.Reason == r), name, r)
		}
		ch <- prometheus.MustNewConstMetric(descPaused, prometheus.GaugeValue, boolGauge(st.paused), name)
		ch <- prometheus.MustNewConstMetric(descLeaseOwned, prometheus.GaugeValue, boolGauge(st.owned), name)
		var version, fri, last float64
		if st.snap != nil {
			version, fri = float64(st.snap.Version), float64(len(st.snap.FRI))
		}
		if !st.lastSync.IsZero() {
			last = float64(st.lastSync.UnixMilli()) / 1e3
		}
		ch <- prometheus.MustNewConstMetric(descVersion, prometheus.GaugeValue, version, name)
		ch <- prometheus.MustNewConstMetric(descLastSync, prometheus.GaugeValue, last, name)
		ch <- prometheus.MustNewConstMetric(descFRIVersions, prometheus.GaugeValue, fri, name)
		ch <- prometheus.MustNewConstMetric(descFirstSeen, prometheus.GaugeValue, unixSeconds(st.state.Since), name)
		s.collectDebt(ch, st, now)
		for i, k := range Kinds {
			if _, have := s.deps.Jobs[k]; have {
				ks := st.state.Kinds[k]
				ch <- prometheus.MustNewConstMetric(descLastSuccess, prometheus.GaugeValue, unixSeconds(ks.LastSuccess), name, string(k))
				ch <- prometheus.MustNewConstMetric(descLastRun, prometheus.GaugeValue, unixSeconds(ks.LastRun), name, string(k))
			}
			ch <- prometheus.MustNewConstMetric(descConsecutiveFailures, prometheus.GaugeValue, float64(st.retries[i]), name, string(k))
			next := 0.0
			if t, ok := s.nextAttemptLocked(st, i); ok {
				next = float64(t.UnixMilli()) / 1e3
			}
			ch <- prometheus.MustNewConstMetric(descNextRun, prometheus.GaugeValue, next, name, string(k))
		}
	}
}
