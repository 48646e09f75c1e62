package table

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/compactord/compactord/internal/cleanup"
	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/lancedb"
	"github.com/compactord/compactord/internal/testing/s3server"
	"github.com/compactord/compactord/internal/trim"
	"github.com/compactord/compactord/internal/verify"
)

// raceDuration is how long LanceDB's writers race compactord. COMPACTORD_RACE
// overrides it (a Go duration) for longer local runs.
func raceDuration(t *testing.T) time.Duration {
	if s := os.Getenv("COMPACTORD_RACE"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("COMPACTORD_RACE: %v", err)
		}
		return d
	}
	return 30 * time.Second
}

// sacrificial keys live in fragments of their own that compactord deletes
// whole while LanceDB's writers work on keys below them.
const (
	sacrificialBase = 100000
	sacrificialRows = 5
	sacrificialN    = 40
	writerKeys      = 400
)

// TestRaceWithLanceDBWriters: two LanceDB writers (appends, deletes,
// merge-inserts, one of them also through the MemWAL) race compactord's whole-fragment deletes, index drops and
// cleanups on one table. Afterwards every write either side acknowledged is
// visible, no version was claimed twice (no fork), and verify passes.
func TestRaceWithLanceDBWriters(t *testing.T) {
	lancedb.Require(t)
	t.Run("file", func(t *testing.T) {
		dir := t.TempDir()
		raceOn(t, dir, nil, "file://"+dir+"/t.lance")
	})
	t.Run("s3", func(t *testing.T) {
		srv := s3server.Start(t)
		uri, opts := lancedb.S3(srv, "race")
		raceOn(t, uri, opts, srv.URL("race/t.lance"))
	})
}

func raceOn(t *testing.T, uri string, storageOptions map[string]string, bucketURL string) {
	ctx := t.Context()
	// The table: writer keys 0..writerKeys-1 in one fragment, then one
	// fragment per batch of sacrificial keys, three indexes to drop, and a
	// MemWAL.
	steps := []lancedb.Step{lancedb.Create(lancedb.BasicSchema, lancedb.BasicRows(0, writerKeys))}
	for i := range sacrificialN {
		lo := int64(sacrificialBase + i*sacrificialRows)
		steps = append(steps, lancedb.Add(lancedb.BasicRows(lo, lo+sacrificialRows)))
	}
	steps = append(steps, lancedb.CreateIndex("id", "btree", "id_idx"), lancedb.CreateIndex("cat", "bitmap", "cat_idx"),
		lancedb.CreateIndex("f", "btree", "f_idx"),
		// The MemWAL: w1's merge-inserts go through it (one shard, so the
		// two writers do not fence each other), and trim runs beside them.
		lancedb.SetPrimaryKey("id"), lancedb.SetLsmWriteSpec(lancedb.LsmWriteSpec{SpecType: "unsharded", MaintainedIndexes: []string{}}))
	lancedb.MustRun(t, lancedb.Program{URI: uri, StorageOptions: storageOptions, Table: "t", Steps: steps})

	b, err := storage.Open(ctx, bucketURL)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cfg := commit.DefaultConfig()
	cfg.MaxAttempts = 50
	reg := prometheus.NewRegistry()
	c, err := commit.NewCommitter(cfg, b, clock.Real(), commit.NewMetrics(reg), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(b, c)
	if err != nil {
		t.Fatal(err)
	}
	start, _, err := meta.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	// Sacrificial fragments are the ones added after the first.
	var victims []uint64
	for _, f := range start.Manifest.GetFragments() {
		if f.GetId() > 0 {
			victims = append(victims, f.GetId())
		}
	}
	if len(victims) != sacrificialN {
		t.Fatalf("%d sacrificial fragments, want %d", len(victims), sacrificialN)
	}

	d := raceDuration(t)
	half := int64(writerKeys / 2)
	w1 := lancedb.StartWriter(t, lancedb.WriterOpts{URI: uri, StorageOptions: storageOptions, Table: "t", Duration: d, KeyMin: 0, KeyMax: half - 1, ID: "w1"})
	w2 := lancedb.StartWriter(t, lancedb.WriterOpts{URI: uri, StorageOptions: storageOptions, Table: "t", Duration: d, KeyMin: half, KeyMax: writerKeys - 1, ID: "w2",
		Weights: map[string]int{"append": 3, "delete": 1, "merge": 2, "lsmMerge": 0}})

	// compactord's side: until both writers finish, delete the next
	// sacrificial fragment, now and then drop an index or clean up.
	type ours struct {
		version uint64
		uuid    string
		what    string
	}
	var landed []ours
	deleted := map[uint64]bool{}
	drops := []string{"cat_idx", "f_idx", "id_idx"}
	var conflicts, rebases, cleanups, trims int
	for i := 0; ; i++ {
		if isDone(w1) && isDone(w2) {
			break
		}
		switch {
		case i%5 == 4 && len(drops) > 0:
			res, err := commitLate(ctx, h, w1, w2, func() (*commit.Txn, error) { return h.PlanDropIndex(ctx, drops[0]) })
			if err != nil {
				conflicts++
				t.Logf("index drop %s: %v", drops[0], err)
				continue
			}
			landed = append(landed, ours{res.Version, res.Transaction.GetUuid(), "drop " + drops[0]})
			rebases += res.Rebases
			drops = drops[1:]
		case i%7 == 3:
			if _, err := trim.Run(ctx, b, trim.DefaultConfig(), time.Now()); err != nil {
				t.Logf("trim: %v", err)
				continue
			}
			trims++
		case i%7 == 6:
			if _, err := cleanup.Run(ctx, b, cleanup.Config{Options: cleanup.Options{RetainVersions: 15, OlderThan: 0, MinAge: 7 * 24 * time.Hour}, Concurrency: 4}, time.Now()); err != nil {
				t.Logf("cleanup: %v", err)
				continue
			}
			cleanups++
		case len(victims) > 0:
			res, err := commitLate(ctx, h, w1, w2, func() (*commit.Txn, error) { return h.PlanDeleteFragments(ctx, victims[:1]) })
			if err != nil {
				conflicts++
				t.Logf("delete fragment %d: %v", victims[0], err)
				continue
			}
			landed = append(landed, ours{res.Version, res.Transaction.GetUuid(), fmt.Sprintf("delete fragment %d", victims[0])})
			rebases += res.Rebases
			deleted[victims[0]] = true
			victims = victims[1:]
		default:
			// Everything to do is done; wait for the writers.
			for _, w := range []*lancedb.Writer{w1, w2} {
				select {
				case <-w.Done():
				case <-ctx.Done():
					t.Fatal(ctx.Err())
				}
			}
		}
	}
	ops1, err1 := w1.Stop()
	ops2, err2 := w2.Stop()
	if err1 != nil || err2 != nil {
		t.Fatalf("writers: %v, %v", err1, err2)
	}
	ack1, ack2 := lancedb.Acknowledged(ops1), lancedb.Acknowledged(ops2)
	t.Logf("LanceDB acknowledged %d + %d writes (%d + %d failed); compactord landed %d commits (%d re-planned conflicts, %d rebases), %d cleanups and %d trims",
		len(ack1), len(ack2), len(lancedb.Failed(ops1)), len(lancedb.Failed(ops2)), len(landed), conflicts, rebases, cleanups, trims)
	// How many LanceDB commits compactord's commits found between their
	// read and their put, and classified: the race really interleaved.
	classified := 0.0
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "compactord_commit_conflicts_total" {
			for _, m := range mf.GetMetric() {
				classified += m.GetCounter().GetValue()
			}
		}
	}
	t.Logf("compactord classified %.0f concurrent commits", classified)
	if classified == 0 {
		t.Error("no LanceDB commit landed between a compactord read and its commit: the race did not interleave")
	}
	if len(ack1) == 0 || len(ack2) == 0 || len(landed) < 3 {
		t.Fatalf("the race did not happen: %d/%d LanceDB writes, %d compactord commits", len(ack1), len(ack2), len(landed))
	}

	// No fork: every version compactord landed is a distinct version that
	// holds compactord's own transaction (where cleanup kept it). The
	// versions LanceDB reports for its writes are not used: under
	// concurrency its add/delete results can name a version another
	// writer made (seen for appends and deletes, with every write's rows
	// present), so LanceDB's writes are proven by the rows below.
	claimed := map[uint64]string{}
	for _, o := range landed {
		if prev, ok := claimed[o.version]; ok {
			t.Errorf("version %d landed twice: %s and %s", o.version, prev, o.what)
		}
		claimed[o.version] = o.what
		f, err := meta.ReadVersion(ctx, b, meta.NamingV2, o.version)
		if storage.IsNotFound(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := f.Transaction.GetUuid(); got != o.uuid {
			t.Errorf("version %d holds transaction %s, not compactord's %s (%s)", o.version, got, o.uuid, o.what)
		}
	}
	// The line of versions has no hole above what cleanup may remove.
	vs, _, err := meta.ListVersions(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(vs); i++ {
		if vs[i] != vs[i-1]+1 {
			t.Errorf("versions jump from %d to %d (cleanup keeps a contiguous tail)", vs[i-1], vs[i])
		}
	}

	// Every acknowledged write is visible; sacrificial rows are gone
	// exactly for the fragments compactord deleted.
	initial := map[int64]string{}
	rows, err := lancedb.RowsByID(lancedb.BasicRows(0, writerKeys))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range rows {
		initial[k] = v
	}
	want := map[int64]string{}
	part := func(lo, hi int64) map[int64]string {
		m := map[int64]string{}
		for k, v := range initial {
			if k >= lo && k < hi {
				m[k] = v
			}
		}
		return m
	}
	for k, v := range lancedb.Expected(part(0, half), ops1) {
		want[k] = v
	}
	for k, v := range lancedb.Expected(part(half, writerKeys), ops2) {
		want[k] = v
	}
	for i, f := range start.Manifest.GetFragments() {
		if f.GetId() == 0 || deleted[f.GetId()] {
			continue
		}
		lo := int64(sacrificialBase + (i-1)*sacrificialRows)
		srows, _ := lancedb.RowsByID(lancedb.BasicRows(lo, lo+sacrificialRows))
		for k, v := range srows {
			want[k] = v
		}
	}
	out := lancedb.MustRun(t, lancedb.Program{URI: uri, StorageOptions: storageOptions, Table: "t", Steps: []lancedb.Step{lancedb.ReadRows(lancedb.ReadOpts{}), lancedb.ListIndices()}})
	gotRows, err := out.Rows(0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := lancedb.RowsByID(gotRows)
	if err != nil {
		t.Fatal(err)
	}
	if diff := lancedb.DiffByID(got, want); diff != "" {
		t.Errorf("LanceDB reads after the race: %s", diff)
	}
	ixs, _ := out.Indices(1)
	var names []string
	for _, ix := range ixs {
		names = append(names, ix.Name)
	}
	sort.Strings(names)
	if strings.Join(names, ",") != strings.Join(sortedCopy(drops), ",") {
		t.Errorf("indexes after the race: %v, want the undropped %v", names, drops)
	}

	rep, err := verify.Run(context.WithoutCancel(ctx), b, verify.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range rep.Violations {
		t.Errorf("verify: %s", v)
	}
}

// commitLate plans a transaction, then commits it only once LanceDB has
// committed a version after its read (or its writers are done), so that
// every compactord commit classifies LanceDB's transactions and LanceDB's
// next commits classify compactord's.
func commitLate(ctx context.Context, h *Handle, w1, w2 *lancedb.Writer, plan func() (*commit.Txn, error)) (*commit.Result, error) {
	txn, err := plan()
	if err != nil {
		return nil, err
	}
	read := txn.Transaction.GetReadVersion()
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		if v, _, err := meta.Latest(ctx, h.Bucket); err == nil && v > read {
			break
		}
		if isDone(w1) && isDone(w2) {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-w1.Done():
		case <-w2.Done():
		case <-time.After(wait):
		}
	}
	return h.Committer.Commit(ctx, txn)
}

func isDone(w *lancedb.Writer) bool {
	select {
	case <-w.Done():
		return true
	default:
		return false
	}
}

func sortedCopy(ss []string) []string {
	out := append([]string(nil), ss...)
	sort.Strings(out)
	return out
}
