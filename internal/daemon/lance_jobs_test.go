package daemon_test

import (
	"context"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/daemon"
	"github.com/compactord/compactord/internal/lance/fri"
	lindex "github.com/compactord/compactord/internal/lance/index"
	"github.com/compactord/compactord/internal/lance/meta"
	"github.com/compactord/compactord/internal/scheduler"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testutil/lancedb"
)

// unindexedFragments is what compactord's catch-up finds the latest
// version's index name lacking (through the FRI's load-time remap, as
// LanceDB counts unindexed rows): the fragments and their live rows, and
// the version read.
func unindexedFragments(t *testing.T, b storage.Bucket, name string) (frags []uint32, rows uint64, version uint64) {
	t.Helper()
	ctx := context.Background()
	read, _, err := meta.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	ix, err := fri.Load(ctx, b, read)
	if err != nil {
		t.Fatal(err)
	}
	plans, _, err := lindex.Plan(read, lindex.Options{Indices: []string{name}, FRI: ix})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range plans {
		frags = append(frags, p.Missing.ToArray()...)
		for _, f := range read.Manifest.GetFragments() {
			if p.Missing.Contains(uint32(f.GetId())) {
				rows += f.GetPhysicalRows() - f.GetDeletionFile().GetNumDeletedRows()
			}
		}
	}
	return frags, rows, read.Manifest.GetVersion()
}

// TestLanceIndexScheduleCatchesUpPlainWrites: LanceDB's plain writes (an
// append, a merge-insert) change no MemWAL shard, so change polling queues
// no merge and no index follow-up for them; the index schedule catches
// them up. After the daemon merged the pending generations (merge → index
// chain) and went idle, two plain LanceDB writes leave id_idx lacking
// fragments; a scheduled index run covers them, and LanceDB counts no
// unindexed row.
func TestLanceIndexScheduleCatchesUpPlainWrites(t *testing.T) {
	lancedb.Require(t)
	dir := t.TempDir()
	f := lancedb.MemWAL(t, dir, 1, 2)
	tb, err := storage.Open(context.Background(), "file://"+f.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()

	cfg := baseConfig()
	cfg.Discover.URL = "file://" + dir
	cfg.Discover.Interval = time.Second
	cfg.Scheduler.PollInterval = 100 * time.Millisecond
	cfg.Scheduler.SyncInterval = 200 * time.Millisecond
	// The fixture's generations were flushed before the daemon started,
	// so change polling never sees them appear: the merge schedule merges
	// them.
	cfg.Scheduler.Schedule.Merge = "@every 1s"
	cfg.Scheduler.Schedule.Index = "@every 1s"
	r := run(t, cfg, daemon.Deps{})
	eventually(t, "the pending generations merged", func() bool {
		_, p := lsmState(t, tb)
		return p == 0
	})
	eventually(t, "id_idx caught up with the merges", func() bool {
		frags, _, _ := unindexedFragments(t, tb, "id_idx")
		return len(frags) == 0
	})

	res := f.Run(t, lancedb.Add(lancedb.BasicRows(500, 503)), lancedb.PlainMergeInsert("id", lancedb.TaggedRows(502, 506, "p")), lancedb.CurrentVersion())
	written, err := res.Version(2)
	if err != nil {
		t.Fatal(err)
	}
	if frags, rows, _ := unindexedFragments(t, tb, "id_idx"); len(frags) == 0 || rows == 0 {
		t.Fatalf("after LanceDB's plain writes compactord finds id_idx lacking %v (%d rows), want the new fragments", frags, rows)
	}
	waitFor(t, "a scheduled index run to cover LanceDB's plain writes", 30*time.Second, func() bool {
		frags, _, v := unindexedFragments(t, tb, "id_idx")
		return len(frags) == 0 && v > written
	})
	eventually(t, "the daemon idle", func() bool {
		ts, _ := r.d.Scheduler().Table("t")
		return ts.Running == nil && len(ts.Pending) == 0
	})
	ts, _ := r.d.Scheduler().Table("t")
	scheduled := false
	for _, rec := range ts.Recent {
		scheduled = scheduled || rec.Kind == scheduler.KindIndex && rec.Trigger == scheduler.TriggerSchedule && rec.Result == scheduler.ClassSuccess && rec.Version > written
	}
	if !scheduled {
		t.Errorf("no scheduled index run committed after version %d: %+v", written, ts.Recent)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	out := f.Run(t, lancedb.IndexStats("id_idx"), lancedb.ReadRows(lancedb.ReadOpts{Where: "id >= 500"}))
	if is, err := out.IndexStats(0); err != nil || is == nil || is.NumUnindexedRows != 0 {
		t.Errorf("LanceDB's indexStats(id_idx): %+v, %v", is, err)
	}
	if rows := rowsByID(t, out, 1); len(rows) != 6 || rows[505] != "p505" || rows[500] != "v500" {
		t.Errorf("LanceDB reads %v", rows)
	}
}
