package daemon_test

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/daemon"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/index/fts"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/scheduler"
	"github.com/compactord/compactord/internal/testing/lancedb"
	"github.com/compactord/compactord/internal/testing/tables"
)

// ftsPartitions counts the partitions of full-text index name in the
// latest version of the table at dir, and its segments.
func ftsPartitions(t *testing.T, dir, name string) (parts, segs int) {
	t.Helper()
	h := tables.Open(t, dir)
	read, _, err := meta.ReadLatest(t.Context(), h.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range meta.FindIndex(read.Indices, name) {
		segs++
		d := filepath.Join(dir, meta.IndexDir(meta.UUIDString(s.GetUuid())))
		m, err := fts.ReadMetadata(func(n string) (io.ReaderAt, int64, error) {
			f, err := os.Open(filepath.Join(d, n))
			if err != nil {
				return nil, 0, err
			}
			t.Cleanup(func() { _ = f.Close() })
			st, err := f.Stat()
			if err != nil {
				return nil, 0, err
			}
			return f, st.Size(), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		parts += len(m.Partitions)
	}
	return parts, segs
}

// The index job rebuilds a full-text index whose partitions (catch-up,
// like LanceDB's optimize(), adds one per call) outnumber jobs.index.rebuild_segments_over,
// though it lags no fragment: table t, whose override sets the threshold
// to 2, goes from 4 partitions to 1 and LanceDB still finds every row; table
// u, on the defaults (0: off), keeps its 4. The daemon runs on a fake
// clock; the test waits by polling the job's last run.
func TestIndexJobRebuildsCrowdedFullText(t *testing.T) {
	lancedb.Require(t)
	schema := []lancedb.Column{{Name: "id", Type: "int64"}, {Name: "doc", Type: "utf8", Nullable: true}}
	opts := map[string]any{"baseTokenizer": "whitespace", "stem": false, "removeStopWords": false, "asciiFolding": false}
	rows := func(lo, hi int64) []lancedb.Row {
		var out []lancedb.Row
		for i := lo; i < hi; i++ {
			out = append(out, lancedb.Row{"id": i, "doc": "common w" + strings.Repeat("x", int(i%3)) + " r" + string(rune('a'+i%26))})
		}
		return out
	}
	root := t.TempDir()
	dirs := map[string]string{}
	for _, name := range []string{"t", "u"} {
		f := &lancedb.Fixture{URI: root, Table: name, Dir: filepath.Join(root, name+".lance")}
		f.Run(t, lancedb.Create(schema, rows(0, 100)), lancedb.CreateVectorIndex("doc", "fts", "doc_idx", opts))
		// Three appends, each caught up by a partition of its own (never
		// rebuilt), as optimize() after each append would.
		for i := int64(1); i <= 3; i++ {
			f.Run(t, lancedb.Add(rows(100*i, 100*i+50)))
			if _, err := index.CatchUp(t.Context(), tables.Open(t, f.Dir), index.Options{MaxSegments: -1}); err != nil {
				t.Fatal(err)
			}
		}
		if p, s := ftsPartitions(t, f.Dir, "doc_idx"); p != 4 || s != 1 {
			t.Fatalf("%s: %d partitions in %d segments, want 4 in 1", name, p, s)
		}
		dirs[name] = f.Dir
	}

	fc := clock.NewFake(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	cfg, err := daemon.Parse([]byte(`overrides:
  - match: t
    jobs:
      index: {rebuild_segments_over: 2}
`), "c.yaml", daemon.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	base := baseConfig()
	cfg.HTTP, cfg.Scheduler.Schedule, cfg.Scheduler.Lease, cfg.Scheduler.PollInterval, cfg.Scheduler.ShutdownGrace =
		base.HTTP, base.Scheduler.Schedule, base.Scheduler.Lease, base.Scheduler.PollInterval, base.Scheduler.ShutdownGrace
	cfg.Scheduler.Timeouts.Default = 1000 * time.Hour // the job's budget runs on the fake clock
	cfg.Tables = []daemon.TableConfig{{URL: "file://" + dirs["t"], Name: "t"}, {URL: "file://" + dirs["u"], Name: "u"}}
	if cfg.Jobs.Index.RebuildSegmentsOver != 0 || cfg.PolicyFor("t").Jobs.Index.RebuildSegmentsOver != 2 {
		t.Fatalf("threshold: defaults %d, t's %d", cfg.Jobs.Index.RebuildSegmentsOver, cfg.PolicyFor("t").Jobs.Index.RebuildSegmentsOver)
	}
	r := run(t, cfg, daemon.Deps{Clock: fc})
	s := r.d.Scheduler()
	last := map[string]*scheduler.JobRecord{}
	for _, name := range []string{"t", "u"} {
		eventually(t, name+" synced", func() bool { st, _ := s.Table(name); return st.Synced })
		if err := s.Trigger(name, scheduler.KindIndex); err != nil {
			t.Fatal(err)
		}
		eventually(t, name+"'s index job to run", func() bool {
			st, _ := s.Table(name)
			last[name] = st.Jobs["index"].LastRun
			return last[name] != nil
		})
	}
	if lr := last["t"]; lr.Result != scheduler.ClassSuccess || lr.Version == 0 || !strings.Contains(lr.Summary, "rebuilt doc_idx: 4 pieces over rebuild_segments_over 2") {
		t.Fatalf("t's index job: %+v; want doc_idx rebuilt", lr)
	}
	if lr := last["u"]; lr.Result != scheduler.ClassSkipped || lr.Summary != "indices up to date" {
		t.Fatalf("u's index job: %+v; want nothing to do", lr)
	}
	if p, _ := ftsPartitions(t, dirs["t"], "doc_idx"); p != 1 {
		t.Errorf("t: %d partitions after the rebuild, want 1", p)
	}
	if p, _ := ftsPartitions(t, dirs["u"], "doc_idx"); p != 4 {
		t.Errorf("u: %d partitions, want its 4 kept", p)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	f := &lancedb.Fixture{URI: root, Table: "t", Dir: dirs["t"]}
	out := f.Run(t, lancedb.Open(), lancedb.IndexStats("doc_idx"), lancedb.TextSearch("common", "doc", 0, []string{"id"}), lancedb.TextSearch("wxx", "doc", 0, []string{"id"}))
	if st, err := out.IndexStats(1); err != nil || st == nil || st.NumUnindexedRows != 0 {
		t.Errorf("indexStats after the rebuild: %+v (%v)", st, err)
	}
	if rs, err := out.Rows(2); err != nil || len(rs) != 250 {
		t.Errorf("LanceDB finds common in %d rows (%v), want 250", len(rs), err)
	}
	if rs, err := out.Rows(3); err != nil || len(rs) == 0 {
		t.Errorf("LanceDB finds wxx in %d rows (%v)", len(rs), err)
	}
}

// The index job catches up what it can and names each index it leaves to
// LanceDB with the reason, in the job's summary and so on the status page:
// here a Turkish-stemmed full-text index (a stemmer compactord does not
// reproduce) beside a btree it catches up.
func TestIndexJobNamesIndexesLeftToLanceDB(t *testing.T) {
	lancedb.Require(t)
	schema := []lancedb.Column{{Name: "id", Type: "int64"}, {Name: "doc", Type: "utf8", Nullable: true}}
	rows := func(lo, hi int64) []lancedb.Row {
		var out []lancedb.Row
		for i := lo; i < hi; i++ {
			out = append(out, lancedb.Row{"id": i, "doc": "kitaplar evler w" + strings.Repeat("x", int(i%3))})
		}
		return out
	}
	root := t.TempDir()
	f := &lancedb.Fixture{URI: root, Table: "t", Dir: filepath.Join(root, "t.lance")}
	f.Run(t, lancedb.Create(schema, rows(0, 100)), lancedb.CreateIndex("id", "btree", "id_idx"),
		lancedb.CreateVectorIndex("doc", "fts", "doc_idx", map[string]any{"language": "Turkish", "withPosition": false}),
		lancedb.Add(rows(100, 120)))

	cfg := baseConfig()
	cfg.Tables = []daemon.TableConfig{{URL: "file://" + f.Dir, Name: "t"}}
	r := run(t, cfg, daemon.Deps{})
	s := r.d.Scheduler()
	eventually(t, "t synced", func() bool { st, _ := s.Table("t"); return st.Synced })
	if err := s.Trigger("t", scheduler.KindIndex); err != nil {
		t.Fatal(err)
	}
	var lr *scheduler.JobRecord
	eventually(t, "the index job to run", func() bool {
		st, _ := s.Table("t")
		lr = st.Jobs["index"].LastRun
		return lr != nil
	})
	if lr.Result != scheduler.ClassSuccess || !strings.Contains(lr.Summary, "catch-up id_idx: delta") ||
		!strings.Contains(lr.Summary, "catch-up doc_idx: left to LanceDB: ") || !strings.Contains(lr.Summary, "Turkish") {
		t.Fatalf("index job: %+v; want id_idx caught up and doc_idx left to LanceDB naming the language", lr)
	}
	if page := do(t, "GET", r.base+"/", "").body; !strings.Contains(page, "doc_idx: left to LanceDB") || !strings.Contains(page, "Turkish") {
		t.Fatalf("the status page does not say why doc_idx is left to LanceDB:\n%s", page)
	}
}
