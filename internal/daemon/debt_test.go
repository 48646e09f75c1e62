package daemon_test

import (
	"sync"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/compact"
	"github.com/compactord/compactord/internal/daemon"
	"github.com/compactord/compactord/internal/scheduler"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/lancedb"
	"github.com/compactord/compactord/internal/testing/tables"
)

// The debt gauges of a table LanceDB wrote agree with LanceDB: fragments
// below compaction's target (live rows, deletions counted), the rows an
// index does not cover (LanceDB's numUnindexedRows), and after a cleanup
// the versions retained (LanceDB's listVersions) and the oldest one's age;
// a deferred compaction shows as an outstanding FRI version.
func TestDebtGaugesAgreeWithLanceDB(t *testing.T) {
	lancedb.Require(t)
	f := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
	f.Dir = f.URI + "/t.lance"
	f.Run(t, lancedb.Create(lancedb.BasicSchema, lancedb.BasicRows(0, 100)), lancedb.Add(lancedb.BasicRows(100, 200)),
		lancedb.CreateIndex("id", "btree", "id_idx"), lancedb.Add(lancedb.BasicRows(200, 250)),
		lancedb.Add(lancedb.BasicRows(250, 300)), lancedb.Delete("id % 10 = 0"))
	stats := f.Run(t, lancedb.IndexStats("id_idx"), lancedb.ListVersions())
	is, err := stats.IndexStats(0)
	if err != nil || is == nil {
		t.Fatalf("LanceDB index stats: %v", err)
	}
	before, err := stats.Versions(1)
	if err != nil {
		t.Fatal(err)
	}

	// Two days after LanceDB wrote the table, so that cleanup (older_than
	// 24h, keep 2) removes versions.
	fc := clock.NewFake(time.Now().Add(48 * time.Hour))
	cfg := baseConfig()
	cfg.Tables = []daemon.TableConfig{{URL: "file://" + f.Dir, Name: "t"}}
	cfg.Jobs.Compact.TargetRowsPerFragment = 90
	cfg.Jobs.Cleanup.RetainVersions = 2
	r := run(t, cfg, daemon.Deps{Clock: fc})
	s := r.d.Scheduler()
	eventually(t, "synced", func() bool { st, _ := s.Table("t"); return st.Synced })

	want := func(name string, v float64, labels ...string) {
		t.Helper()
		got, ok := gauge(t, r.d, name, append([]string{"table", "t"}, labels...)...)
		if !ok || got != v {
			t.Errorf("%s%v = %v (present %v), want %v", name, labels, got, ok, v)
		}
	}
	want("compactord_table_fragments", 4)
	// 90, 90, 45 and 45 live rows: the two appends of 50 are small.
	want("compactord_table_small_fragments", 2)
	want("compactord_index_unindexed_rows", float64(is.NumUnindexedRows), "index", "id_idx")
	if is.NumUnindexedRows != 90 {
		t.Errorf("LanceDB counts %d unindexed rows; the fixture meant 90", is.NumUnindexedRows)
	}
	want("compactord_fri_versions", 0)
	// Unknown until a cleanup recorded its oldest kept version.
	want("compactord_table_versions_retained", 0)
	want("compactord_table_oldest_retained_version_age_seconds", 0)

	if err := s.Trigger("t", scheduler.KindCleanup); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the cleanup", func() bool {
		st, _ := s.Table("t")
		lr := st.Jobs["cleanup"].LastRun
		return lr != nil && lr.Result == scheduler.ClassSuccess
	})
	after, err := f.Run(t, lancedb.ListVersions()).Versions(0)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) >= len(before) {
		t.Fatalf("cleanup kept %d of %d versions", len(after), len(before))
	}
	want("compactord_table_versions_retained", float64(len(after)))
	oldest := time.UnixMilli(after[0].Timestamp)
	for _, v := range after {
		if ts := time.UnixMilli(v.Timestamp); ts.Before(oldest) {
			oldest = ts
		}
	}
	age, ok := gauge(t, r.d, "compactord_table_oldest_retained_version_age_seconds", "table", "t")
	if d := fc.Now().Sub(oldest).Seconds(); !ok || age < d-1 || age > d+1 {
		t.Errorf("oldest retained age %v (present %v), want %v", age, ok, d)
	}

	// A deferred compaction leaves one fragment-reuse version.
	o := compact.DefaultOptions()
	o.DeferRemap = true
	if res, err := compact.Run(t.Context(), tables.Open(t, f.Dir), o, compact.Env{}); err != nil || res.FragReuse == nil {
		t.Fatalf("deferred compaction: %v", err)
	}
	fc.Advance(cfg.Scheduler.SyncInterval)
	eventually(t, "the FRI version seen", func() bool {
		v, _ := gauge(t, r.d, "compactord_fri_versions", "table", "t")
		return v == 1
	})
}

// A commit that finds its version taken by another writer counts as a
// conflict of its table.
func TestTableCommitConflictsCounted(t *testing.T) {
	root := memRoot(t)
	url := root + "/t"
	createTable(t, url)
	appendFragments(t, url, 4, 10)
	fc := clock.NewFake(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	cfg := baseConfig()
	cfg.Tables = []daemon.TableConfig{{URL: url}}
	cfg.Commit.BaseBackoff, cfg.Commit.MaxBackoff = time.Second, time.Second
	cfg.Scheduler.Timeouts.Default = 1000 * time.Hour
	var mu sync.Mutex
	var lb *losingBucket
	r := run(t, cfg, daemon.Deps{Clock: fc, WrapBucket: func(_ string, b storage.Bucket) storage.Bucket {
		mu.Lock()
		defer mu.Unlock()
		lb = &losingBucket{Bucket: b}
		return lb
	}})
	s := r.d.Scheduler()
	eventually(t, "synced", func() bool { st, _ := s.Table("t"); return st.Synced })
	if got := counter(t, r.d, "compactord_table_commit_conflicts_total", map[string]string{"table": "t"}); got != 0 {
		t.Fatalf("conflicts before any commit: %v", got)
	}
	if err := s.Trigger("t", scheduler.KindCompact); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the compaction committed after the lost race", func() bool {
		fc.Advance(time.Second)
		st, _ := s.Table("t")
		lr := st.Jobs["compact"].LastRun
		return lr != nil && lr.Result == scheduler.ClassSuccess && lr.Version > 0
	})
	if got := counter(t, r.d, "compactord_table_commit_conflicts_total", map[string]string{"table": "t"}); got != 1 {
		t.Fatalf("conflicts %v, want the one lost race (lost %d)", got, lb.lost.Load())
	}
}
