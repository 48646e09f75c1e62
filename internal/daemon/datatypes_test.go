package daemon_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/daemon"
	"github.com/compactord/compactord/internal/jobclass"
	"github.com/compactord/compactord/internal/scheduler"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

// TestLanceDaemonCompactsDictColumns: a LanceDB table whose columns are
// Arrow dictionaries (int32 and int8 keys) and large strings, with
// deletions, is compacted by the daemon's own schedule like any other: no
// job fails and the table is not quarantined (the daemon used to halt
// such tables on "unsupported logical type"), and LanceDB reads the same
// rows afterwards.
func TestLanceDaemonCompactsDictColumns(t *testing.T) {
	lancedb.Require(t)
	schema := []lancedb.Column{{Name: "id", Type: "int64"}, {Name: "cat", Type: "dict<utf8>", Nullable: true},
		{Name: "cat8", Type: "dict<utf8,int8>"}, {Name: "name", Type: "large_utf8", Nullable: true}}
	words := []string{"alpha", "beta", "gamma ünï", ""}
	rows := func(lo, hi int64) []lancedb.Row {
		var out []lancedb.Row
		for i := lo; i < hi; i++ {
			r := lancedb.Row{"id": i, "cat": words[i%4], "cat8": words[i%3], "name": fmt.Sprintf("n%d", i)}
			if i%7 == 0 {
				r["cat"], r["name"] = nil, nil
			}
			out = append(out, r)
		}
		return out
	}
	dir := t.TempDir()
	f := &lancedb.Fixture{URI: dir, Table: "t", Dir: filepath.Join(dir, "t.lance")}
	f.Run(t, lancedb.CreateVersion(schema, rows(0, 200), "2.1"), lancedb.Add(rows(200, 400)), lancedb.Add(rows(400, 600)),
		lancedb.Delete("id % 10 = 3"))
	read := func() map[int64]string {
		res := f.Run(t, lancedb.ReadRows(lancedb.ReadOpts{}))
		got, err := lancedb.RowsByID(mustRows(t, res))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	before := read()
	if len(before) != 540 {
		t.Fatalf("LanceDB reads %d rows before, want 540", len(before))
	}

	cfg := baseConfig()
	cfg.Tables = []daemon.TableConfig{{URL: "file://" + f.Dir, Name: "t"}}
	cfg.Scheduler.PollInterval = 100 * time.Millisecond
	cfg.Scheduler.Schedule.Compact = "@every 1s"
	r := run(t, cfg, daemon.Deps{})
	var done scheduler.JobRecord
	waitFor(t, "a compaction of t", 2*time.Minute, func() bool {
		ts, ok := r.d.Scheduler().Table("t")
		if !ok {
			return false
		}
		if ts.Halted != nil {
			t.Fatalf("the daemon quarantined the table: %+v", ts.Halted)
		}
		for _, rec := range ts.Recent {
			if rec.Kind == scheduler.KindCompact && rec.Result == jobclass.Error {
				t.Fatalf("compaction failed: %s", rec.Error)
			}
			if rec.Kind == scheduler.KindCompact && rec.Result == jobclass.Success && rec.Version > 0 {
				done = rec
				return true
			}
		}
		return false
	})
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	after := read()
	if d := lancedb.DiffByID(after, before); d != "" {
		t.Fatalf("LanceDB reads other rows after the daemon's compaction (version %d): %s", done.Version, d)
	}
}

func mustRows(t *testing.T, res *lancedb.Results) []lancedb.Row {
	t.Helper()
	rows, err := res.Rows(0)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}
