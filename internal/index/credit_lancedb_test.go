package index_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/compact"
	"github.com/compactord/compactord/internal/fri"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/merge"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/testing/lancedb"
	"github.com/compactord/compactord/internal/trim"
)

// memwalState is the latest version's merged and caught-up positions of
// id_idx, per shard.
func memwalState(t *testing.T, h *table.Handle) (f *meta.ManifestFile, merged, caught map[string]uint64) {
	t.Helper()
	f = creditHead(t, h)
	d, err := memwal.Details(memwal.Index(f.Indices))
	if err != nil {
		t.Fatal(err)
	}
	return f, memwal.Compacted(d), memwal.Catchup(d)["id_idx"]
}

// trimAll runs trim with no reader grace and requires it to delete every
// flushed generation: none kept for index lag or anything else.
func trimAll(t *testing.T, h *table.Handle) *trim.Result {
	t.Helper()
	cfg := trim.DefaultConfig()
	cfg.ReaderGrace = 0
	res, err := trim.Run(t.Context(), h.Bucket, cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	r := map[string]int{}
	for _, g := range res.Plan.Generations {
		if g.Delete {
			r["delete"]++
		} else {
			r[g.Reason]++
		}
	}
	if r["delete"] == 0 || len(r) != 1 || res.DeletedGenerations != r["delete"] {
		t.Fatalf("trim --reader-grace 0s: %v, %d deleted (want every generation deleted, none kept)", r, res.DeletedGenerations)
	}
	return res
}

// lagRecord publishes, as a foreign writer would, the next version of the
// table with id_idx's catch-up record at 0 on every shard and nothing else
// changed: the state in which a covering index's record stayed behind
// (the commits that moved the index read fragments its new bitmaps no
// longer name). compactord's own commits cannot produce it directly: the
// derivation carries a position forward over any commit that leaves the
// index alone.
func lagRecord(t *testing.T, h *table.Handle) {
	t.Helper()
	for !lagRecordOnce(t, h) {
	}
}

// lagRecordOnce is one attempt of lagRecord; false: another writer took
// the version.
func lagRecordOnce(t *testing.T, h *table.Handle) bool {
	t.Helper()
	ctx := t.Context()
	head, naming, err := h.ReadForWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	i := -1
	for k, ix := range head.Indices {
		if ix.GetName() == meta.MemWalIndexName {
			i = k
		}
	}
	d, err := memwal.Details(head.Indices[i])
	if err != nil {
		t.Fatal(err)
	}
	d = proto.Clone(d).(*pb.MemWalIndexDetails)
	zero := map[string]uint64{}
	for s := range memwal.Compacted(d) {
		zero[s] = 0
	}
	list, err := memwal.CompactedList(zero)
	if err != nil {
		t.Fatal(err)
	}
	d.IndexCatchup = []*pb.IndexCatchupProgress{{IndexName: "id_idx", CaughtUpGenerations: list}}
	any, err := memwal.EncodeDetails(d)
	if err != nil {
		t.Fatal(err)
	}
	mw := proto.Clone(head.Indices[i]).(*pb.IndexMetadata)
	mw.Uuid, _ = meta.NewUUID()
	mw.IndexDetails = any
	next := &meta.ManifestFile{Manifest: proto.Clone(head.Manifest).(*pb.Manifest)}
	next.Indices = append([]*pb.IndexMetadata(nil), head.Indices...)
	next.Indices[i] = mw
	v := head.Manifest.GetVersion() + 1
	next.Manifest.Version = v
	next.Manifest.IndexSection, next.Manifest.TransactionSection = nil, nil
	_, id := meta.NewUUID()
	txn := &pb.Transaction{ReadVersion: v - 1, Uuid: id,
		Operation: &pb.Transaction_CreateIndex_{CreateIndex: &pb.Transaction_CreateIndex{}}}
	next.Manifest.TransactionFile = meta.TransactionName(v-1, txn.GetUuid())
	tdata, err := meta.EncodeTransaction(txn)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Bucket.Put(ctx, meta.TransactionKey(next.Manifest.TransactionFile), tdata); err != nil {
		t.Fatal(err)
	}
	data, err := meta.EncodeManifestFile(next)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Bucket.PutIfAbsent(ctx, meta.ManifestKey(naming, v), data); storage.IsAlreadyExists(err) {
		return false
	} else if err != nil {
		t.Fatal(err)
	}
	if err := meta.WriteHint(ctx, h.Bucket, v); err != nil {
		t.Fatal(err)
	}
	return true
}

// TestCatchUpCredit: on a MemWAL table whose merged rows id_idx covers,
// index catch-up gets the merged generations recorded as caught up
// whoever built the covering segments, so trim with no reader grace
// retires every generation and LanceDB reads the same rows:
//   - LanceDB's optimize() indexed the merged rows (it records the credit
//     itself): catch-up finds nothing to do and commits nothing;
//   - the record lags behind a covering index (built directly): catch-up
//     has nothing to index and commits a record-only version (an empty
//     CreateIndex) that records the credit; a second run finds nothing
//     due;
//   - compactord's inline compaction moved the index: its Rewrite carries
//     the position forward, and catch-up commits nothing.
func TestCatchUpCredit(t *testing.T) {
	lancedb.Require(t)
	for _, c := range []struct {
		name string
		// cover makes id_idx cover the merged fragments with the record
		// lagging or not; recordOnly: catch-up must commit the credit.
		cover      func(t *testing.T, f *lancedb.Fixture, h *table.Handle)
		recordOnly bool
	}{
		{"LanceDB's optimize indexed the merged rows", func(t *testing.T, f *lancedb.Fixture, h *table.Handle) {
			f.Run(t, lancedb.Optimize(lancedb.OptimizeOpts{}))
		}, false},
		{"the record lags behind a covering index", func(t *testing.T, f *lancedb.Fixture, h *table.Handle) {
			cu, err := index.CatchUp(t.Context(), h, index.Options{})
			if err != nil || !cu.Committed || len(cu.Indices) != 1 {
				t.Fatalf("catch-up of the merged fragments: %+v, %v", cu, err)
			}
			lagRecord(t, h)
		}, true},
		{"compactord's inline compaction moved the index", func(t *testing.T, f *lancedb.Fixture, h *table.Handle) {
			// The Rewrite remaps id_idx onto the new fragments and carries
			// its position forward (the remapped segments hold the rows
			// the old ones held), so nothing is left to record.
			cu, err := index.CatchUp(t.Context(), h, index.Options{})
			if err != nil || !cu.Committed || len(cu.Indices) != 1 {
				t.Fatalf("catch-up of the merged fragments: %+v, %v", cu, err)
			}
			o := compact.DefaultOptions()
			o.DeferRemap = false
			res, err := compact.Run(t.Context(), h, o, compact.Env{})
			if err != nil || res.Commit == nil {
				t.Fatalf("compact: %+v, %v", res, err)
			}
		}, false},
	} {
		for _, shards := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s/%d shards", c.name, shards), func(t *testing.T) {
				f := lancedb.MemWAL(t, "", shards, 3)
				before := creditRows(t, f, true)
				h := creditHandle(t, f.Dir)
				if out, err := merge.RunAll(t.Context(), h, merge.Env{MaxGenerations: 8}); err != nil || len(out.Landed) == 0 {
					t.Fatalf("merge: %v, %+v", err, out)
				}
				c.cover(t, f, h)
				read, merged, caught := memwalState(t, h)
				if plans, _, err := index.Plan(read, index.Options{FRI: loadFRI(t, h, read)}); err != nil || len(plans) != 0 {
					t.Fatalf("id_idx does not cover the table: %+v, %v", plans, err)
				}
				lags := false
				for s, g := range merged {
					lags = lags || caught[s] < g
				}
				if lags != c.recordOnly {
					t.Fatalf("before catch-up: merged %v, id_idx caught up to %v (want lagging: %v)", merged, caught, c.recordOnly)
				}

				cu, err := index.CatchUp(t.Context(), h, index.Options{})
				if err != nil {
					t.Fatal(err)
				}
				if len(cu.Indices) != 0 || cu.Committed != c.recordOnly {
					t.Fatalf("catch-up: %+v (want record-only commit: %v)", cu, c.recordOnly)
				}
				after, merged, caught := memwalState(t, h)
				for s, g := range merged {
					if caught[s] != g {
						t.Errorf("shard %s: id_idx caught up to %d, merged %d", s, caught[s], g)
					}
				}
				if c.recordOnly {
					if after.Manifest.GetVersion() != read.Manifest.GetVersion()+1 || len(cu.Credited) != len(merged) {
						t.Fatalf("record-only commit: version %d after %d, credited %+v", after.Manifest.GetVersion(), read.Manifest.GetVersion(), cu.Credited)
					}
					if ci := after.Transaction.GetCreateIndex(); ci == nil || len(ci.GetNewIndices())+len(ci.GetRemovedIndices()) != 0 {
						t.Fatalf("record-only commit is %s %v, want an empty CreateIndex", commit.OpName(after.Transaction), after.Transaction)
					}
					if len(after.Manifest.GetFragments()) != len(read.Manifest.GetFragments()) {
						t.Fatalf("record-only commit changed the fragments")
					}
					again, err := index.CatchUp(t.Context(), h, index.Options{})
					if err != nil || again.Committed {
						t.Fatalf("second catch-up: %+v, %v (want nothing committed)", again, err)
					}
				}

				trimAll(t, h)
				res := f.Run(t, lancedb.IndexStats("id_idx"), lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(false)}), lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(true)}))
				if st, err := res.IndexStats(0); err != nil || st == nil || st.NumUnindexedRows != 0 {
					t.Errorf("LanceDB's indexStats: %+v", st)
				}
				for i := 1; i <= 2; i++ {
					rows, err := res.Rows(i)
					if err != nil {
						t.Fatal(err)
					}
					m, err := lancedb.RowsByID(rows)
					if err != nil {
						t.Fatal(err)
					}
					if d := lancedb.DiffByID(m, before); d != "" {
						t.Errorf("LanceDB's view %d after trim: %s", i, d)
					}
				}
			})
		}
	}
}

func creditHandle(t *testing.T, dir string) *table.Handle {
	t.Helper()
	b, err := storage.Open(t.Context(), "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	c, err := commit.NewCommitter(commit.DefaultConfig(), b, clock.Real(), commit.NewMetrics(prometheus.NewRegistry()), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	h, err := table.New(b, c)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func creditHead(t *testing.T, h *table.Handle) *meta.ManifestFile {
	t.Helper()
	f, _, err := h.ReadForWrite(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// creditRows is what LanceDB reads, by id, through its LSM view or not.
func creditRows(t *testing.T, f *lancedb.Fixture, lsm bool) map[int64]string {
	t.Helper()
	rows, err := f.Run(t, lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(lsm)})).Rows(0)
	if err != nil {
		t.Fatal(err)
	}
	m, err := lancedb.RowsByID(rows)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func loadFRI(t *testing.T, h *table.Handle, read *meta.ManifestFile) *fri.Index {
	t.Helper()
	ix, err := fri.Load(t.Context(), h.Bucket, read)
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

// TestCatchUpCreditRacingLanceDB: LanceDB writers (append, delete, plain
// mergeInsert) racing record-only commits rebase over them: every
// operation LanceDB acknowledges lands, some of them on top of a
// record-only version committed after they read the table, and LanceDB
// reads exactly the rows its acknowledged operations leave. Between
// catch-ups the record is made to lag (as a foreign writer would, and as
// LanceDB's own deletes do), so record-only commits keep coming.
func TestCatchUpCreditRacingLanceDB(t *testing.T) {
	lancedb.Require(t)
	ctx := t.Context()
	f := lancedb.MemWAL(t, "", 1, 2)
	h := creditHandle(t, f.Dir)
	if out, err := merge.RunAll(ctx, h, merge.Env{MaxGenerations: 8}); err != nil || len(out.Landed) == 0 {
		t.Fatalf("merge: %v, %+v", err, out)
	}
	if cu, err := index.CatchUp(ctx, h, index.Options{}); err != nil || !cu.Committed {
		t.Fatalf("catch-up of the merged fragments: %+v, %v", cu, err)
	}
	prior := creditRows(t, f, false)

	w := lancedb.StartWriter(t, lancedb.WriterOpts{URI: f.URI, Duration: time.Minute, KeyMin: 1000, KeyMax: 1300, Seed: 7,
		ID: "w", Weights: map[string]int{"append": 2, "delete": 2, "merge": 2}})
	// recordOnly are the versions our record-only commits made.
	recordOnly := map[uint64]bool{}
	raced := map[string]int{}
	var replans int
	countRaces := func(ops []lancedb.WriterOp) {
		clear(raced)
		for _, op := range lancedb.Acknowledged(ops) {
			if op.Version == 0 {
				continue
			}
			v, err := meta.ReadVersion(ctx, h.Bucket, meta.NamingV2, op.Version)
			if err != nil {
				t.Fatal(err)
			}
			txn, err := meta.ReadTransaction(ctx, h.Bucket, v)
			if err != nil {
				t.Fatal(err)
			}
			// Lance moves a rebased Delete's or Update's read_version to
			// the version it rebased on; the deletion files it wrote
			// before still name the version it read.
			read := txn.GetReadVersion()
			for _, fr := range append(txn.GetDelete().GetUpdatedFragments(), txn.GetUpdate().GetUpdatedFragments()...) {
				if df := fr.GetDeletionFile(); df != nil && df.GetReadVersion() < read {
					read = df.GetReadVersion()
				}
			}
			for r := read + 1; r < op.Version; r++ {
				if recordOnly[r] {
					raced[op.Op]++
					break
				}
			}
		}
	}
	for {
		ops, err := w.Ops()
		if err != nil {
			t.Fatal(err)
		}
		countRaces(ops)
		if raced["append"] > 0 && raced["delete"] > 0 && raced["merge"] > 0 {
			break
		}
		select {
		case <-w.Done():
			kinds := map[string]int{}
			for _, op := range lancedb.Acknowledged(ops) {
				kinds[op.Op]++
			}
			for _, op := range lancedb.Failed(ops) {
				t.Logf("failed: %+v", op)
			}
			t.Logf("acknowledged %v", kinds)
			t.Fatalf("the writer finished before every kind of operation raced a record-only commit: %v (%d record-only commits)", raced, len(recordOnly))
		default:
		}
		// Index what LanceDB added, make the record lag, then catch up:
		// with nothing new to index, that is a record-only commit.
		for _, lag := range []bool{false, true} {
			if lag {
				lagRecord(t, h)
			}
			cu, err := index.CatchUp(ctx, h, index.Options{Attempts: 10})
			if err != nil {
				t.Fatal(err)
			}
			replans += cu.Attempts - 1
			if cu.Committed && len(cu.Indices) == 0 {
				recordOnly[cu.Version] = true
			}
		}
		// Paced by the writer: the next round starts once LanceDB has
		// finished another operation, so each of its commits meets a few
		// of ours, as beside a daemon, and not an unbroken run of them
		// that outlasts its retries (20) on a loaded machine.
		waitForWriter(t, w, len(ops))
	}
	ops, err := w.Stop()
	if err != nil {
		t.Fatal(err)
	}
	countRaces(ops)
	if failed := lancedb.Failed(ops); len(failed) > 0 {
		t.Fatalf("LanceDB failed %d operations, first %+v", len(failed), failed[0])
	}
	kinds := map[string]int{}
	for _, op := range lancedb.Acknowledged(ops) {
		kinds[op.Op]++
	}
	t.Logf("writer acknowledged %v; %d record-only commits; LanceDB rebased over one in %v; catch-up re-planned %d times", kinds, len(recordOnly), raced, replans)

	// LanceDB opens the table and reads what its operations left; the
	// table then drains as usual.
	want := lancedb.Expected(prior, ops)
	if d := lancedb.DiffByID(creditRows(t, f, false), want); d != "" {
		t.Fatalf("LanceDB after the race: %s", d)
	}
	if _, err := index.CatchUp(ctx, h, index.Options{}); err != nil {
		t.Fatal(err)
	}
	_, merged, caught := memwalState(t, h)
	for s, g := range merged {
		if caught[s] != g {
			t.Errorf("shard %s: id_idx caught up to %d, merged %d", s, caught[s], g)
		}
	}
	trimAll(t, h)
	if d := lancedb.DiffByID(creditRows(t, f, true), want); d != "" {
		t.Fatalf("LanceDB's LSM view after trim: %s", d)
	}
}

// waitForWriter polls until the writer has reported more than n
// operations, or has finished.
func waitForWriter(t *testing.T, w *lancedb.Writer, n int) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		ops, err := w.Ops()
		if err != nil {
			t.Fatal(err)
		}
		if len(ops) > n {
			return
		}
		select {
		case <-w.Done():
			return
		case <-tick.C:
		}
	}
}
