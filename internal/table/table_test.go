package table

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/faults"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

func open(t testing.TB, dir string) storage.Bucket {
	t.Helper()
	b, err := storage.Open(t.Context(), "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func handle(t testing.TB, b storage.Bucket, cfg commit.Config) *Handle {
	t.Helper()
	c, err := commit.NewCommitter(cfg, b, clock.Real(), commit.NewMetrics(prometheus.NewRegistry()), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(b, c)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func without(want map[int64]string, lo, hi int64) map[int64]string {
	out := map[int64]string{}
	for k, v := range want {
		if k < lo || k >= hi {
			out[k] = v
		}
	}
	return out
}

func readRows(t *testing.T, f *lancedb.Fixture, res *lancedb.Results, i int) map[int64]string {
	t.Helper()
	rows, err := res.Rows(i)
	if err != nil {
		t.Fatal(err)
	}
	got, err := lancedb.RowsByID(rows)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestDeleteFragmentReadByLanceDB: compactord's Delete of a whole fragment is
// a version LanceDB reads, writes on top of, and classifies.
func TestDeleteFragmentReadByLanceDB(t *testing.T) {
	lancedb.Require(t)
	f := lancedb.Indexed(t, "")
	h := handle(t, open(t, f.Dir), commit.DefaultConfig())
	res, err := h.DeleteFragments(t.Context(), []uint64{1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Version != f.Version+1 {
		t.Fatalf("committed version %d, want %d", res.Version, f.Version+1)
	}
	want := without(f.Want, 10, 20)
	out := f.Run(t, lancedb.ReadRows(lancedb.ReadOpts{}), lancedb.CurrentVersion(), lancedb.ListIndices(),
		lancedb.Add(lancedb.BasicRows(100, 105)), lancedb.ReadRows(lancedb.ReadOpts{}), lancedb.ListVersions())
	if d := lancedb.DiffByID(readRows(t, f, out, 0), want); d != "" {
		t.Errorf("LanceDB reads after our delete: %s", d)
	}
	if v, _ := out.Version(1); v != res.Version {
		t.Errorf("LanceDB's version = %d, want %d", v, res.Version)
	}
	if ixs, _ := out.Indices(2); len(ixs) != 2 {
		t.Errorf("LanceDB lists %d indexes after our delete, want 2: %+v", len(ixs), ixs)
	}
	added, err := lancedb.RowsByID(lancedb.BasicRows(100, 105))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range added {
		want[k] = v
	}
	if d := lancedb.DiffByID(readRows(t, f, out, 4), want); d != "" {
		t.Errorf("LanceDB's append on top of our version: %s", d)
	}
	vs, _ := out.Versions(5)
	if len(vs) != int(res.Version)+1 {
		t.Errorf("LanceDB lists %d versions, want %d", len(vs), res.Version+1)
	}
	// Our manifest names us as its writer and carries a transaction file
	// LanceDB can classify from.
	mf, err := meta.ReadVersion(t.Context(), h.Bucket, meta.NamingV2, res.Version)
	if err != nil {
		t.Fatal(err)
	}
	if mf.Manifest.GetWriterVersion().GetLibrary() != commit.WriterLibrary {
		t.Errorf("writer = %v", mf.Manifest.GetWriterVersion())
	}
	if _, err := h.Bucket.Get(t.Context(), meta.TransactionKey(mf.Manifest.GetTransactionFile())); err != nil {
		t.Errorf("transaction file: %v", err)
	}
}

// TestDropIndexReadByLanceDB: after index drop LanceDB lists the other index
// only, and can create the dropped one again.
func TestDropIndexReadByLanceDB(t *testing.T) {
	lancedb.Require(t)
	f := lancedb.Indexed(t, "")
	h := handle(t, open(t, f.Dir), commit.DefaultConfig())
	if _, err := h.DropIndex(t.Context(), "cat_idx"); err != nil {
		t.Fatal(err)
	}
	out := f.Run(t, lancedb.ListIndices(), lancedb.CreateIndex("cat", "bitmap", "cat_idx"), lancedb.ListIndices(), lancedb.ReadRows(lancedb.ReadOpts{}))
	ixs, _ := out.Indices(0)
	if len(ixs) != 1 || ixs[0].Name != "id_idx" {
		t.Errorf("after drop LanceDB lists %+v, want id_idx only", ixs)
	}
	if ixs, _ := out.Indices(2); len(ixs) != 2 {
		t.Errorf("after re-create LanceDB lists %+v", ixs)
	}
	if d := lancedb.DiffByID(readRows(t, f, out, 3), f.Want); d != "" {
		t.Errorf("rows after drop: %s", d)
	}
	if _, err := h.DropIndex(t.Context(), "nope"); err == nil || !strings.Contains(err.Error(), `no index "nope"`) {
		t.Errorf("drop of a missing index: %v", err)
	}
}

func TestRefusals(t *testing.T) {
	ctx := t.Context()
	t.Run("maintained index", func(t *testing.T) {
		h := handle(t, open(t, lancedb.CorpusDir(t, "memwal_1")), commit.DefaultConfig())
		if _, err := h.DropIndex(ctx, "id_idx"); err == nil || !strings.Contains(err.Error(), "maintained by the MemWAL") {
			t.Errorf("drop of a maintained index: %v", err)
		}
		if _, err := h.DropIndex(ctx, meta.MemWalIndexName); err == nil || !strings.Contains(err.Error(), "system index") {
			t.Errorf("drop of the MemWAL index: %v", err)
		}
	})
	t.Run("missing fragment", func(t *testing.T) {
		h := handle(t, open(t, lancedb.CorpusDir(t, "plain")), commit.DefaultConfig())
		if _, err := h.DeleteFragments(ctx, []uint64{7}); err == nil || !strings.Contains(err.Error(), "fragment 7 is not in version 3") {
			t.Errorf("delete of a missing fragment: %v", err)
		}
	})
	t.Run("unknown writer flag", func(t *testing.T) {
		b := open(t, lancedb.CorpusDir(t, "plain"))
		f, n, err := meta.ReadLatest(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		f.Manifest.WriterFeatureFlags |= meta.FlagDataOverlays
		raw, _ := meta.EncodeManifestFile(f)
		if err := b.Put(ctx, meta.ManifestKey(n, f.Manifest.GetVersion()), raw); err != nil {
			t.Fatal(err)
		}
		h := handle(t, b, commit.DefaultConfig())
		_, err = h.DeleteFragments(ctx, []uint64{0})
		var fe *meta.FeatureError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), "data overlay") {
			t.Errorf("commit on a table with overlays: %v", err)
		}
		if v, _, _ := meta.Latest(ctx, b); v != 3 {
			t.Errorf("a refused commit left version %d", v)
		}
	})
}

// syntheticTable writes a table of n fragments (metadata only) at version 1.
func syntheticTable(t *testing.T, b storage.Bucket, n int) {
	t.Helper()
	m := &pb.Manifest{Version: 1, DataFormat: &pb.Manifest_DataStorageFormat{FileFormat: "lance", Version: "2.2"}}
	for i := range n {
		m.Fragments = append(m.Fragments, &pb.DataFragment{Id: uint64(i), PhysicalRows: 10,
			Files: []*pb.DataFile{{Path: fmt.Sprintf("f%d.lance", i), Fields: []int32{0}, FileMajorVersion: 2, FileMinorVersion: 2}}})
	}
	raw, err := meta.EncodeManifestFile(&meta.ManifestFile{Manifest: m})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.PutIfAbsent(t.Context(), meta.ManifestKey(meta.NamingV2, 1), raw); err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentCommitters: committers deleting disjoint and overlapping
// fragments all land, on one line of versions, with nothing lost.
func TestConcurrentCommitters(t *testing.T) {
	for _, url := range []string{"file://" + t.TempDir(), "mem://"} {
		t.Run(strings.SplitN(url, ":", 2)[0], func(t *testing.T) {
			ctx := t.Context()
			b, err := storage.Open(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			syntheticTable(t, b, 16)
			cfg := commit.DefaultConfig()
			cfg.MaxAttempts = 100
			var wg sync.WaitGroup
			errs := make(chan error, 16)
			rebased := make(chan int, 16)
			for w := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					h := handle(t, b, cfg)
					// Each worker deletes its own two fragments, and one
					// of the next worker's (an overlap that rebases).
					res, err := h.DeleteFragments(ctx, []uint64{uint64(2 * w), uint64(2*w + 1)})
					if err != nil {
						errs <- err
						return
					}
					rebased <- res.Rebases
				}()
			}
			wg.Wait()
			close(errs)
			close(rebased)
			for err := range errs {
				t.Error(err)
			}
			vs, _, err := meta.ListVersions(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			if len(vs) != 9 || vs[0] != 1 || vs[8] != 9 {
				t.Fatalf("versions = %v, want 1..9", vs)
			}
			f, _, err := meta.ReadLatest(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(f.Manifest.GetFragments()); n != 0 {
				t.Errorf("%d fragments left", n)
			}
			if f.Manifest.GetMaxFragmentId() != 15 {
				t.Errorf("max_fragment_id = %d", f.Manifest.GetMaxFragmentId())
			}
		})
	}
}

// TestSameFragmentTwice: two deletes of one fragment both commit; the second
// is rebased to delete nothing (the fragment is already gone).
func TestSameFragmentTwice(t *testing.T) {
	ctx := t.Context()
	b := open(t, t.TempDir())
	syntheticTable(t, b, 2)
	h1, h2 := handle(t, b, commit.DefaultConfig()), handle(t, b, commit.DefaultConfig())
	read, n, err := h2.ReadForWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h1.DeleteFragments(ctx, []uint64{0}); err != nil {
		t.Fatal(err)
	}
	txn := commit.NewTransaction(read.Manifest.GetVersion())
	txn.Operation = &pb.Transaction_Delete_{Delete: &pb.Transaction_Delete{DeletedFragmentIds: []uint64{0, 1}}}
	res, err := h2.Committer.Commit(ctx, &commit.Txn{Read: read, Naming: n, Transaction: txn})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rebases != 1 || res.Version != 3 {
		t.Errorf("version %d after %d rebases, want 3 after 1", res.Version, res.Rebases)
	}
	if got := res.Transaction.GetDelete().GetDeletedFragmentIds(); len(got) != 1 || got[0] != 1 {
		t.Errorf("rebased delete removes %v, want [1]", got)
	}
}

// TestAmbiguousPutIsOurs: the put landed but its answer was lost; the commit
// reads the version back and reports success, and no file is removed.
func TestAmbiguousPutIsOurs(t *testing.T) {
	ctx := t.Context()
	fb := faults.NewFaulty(open(t, t.TempDir()))
	syntheticTable(t, fb, 3)
	rule := fb.Add(faults.Fault{Ops: []storage.Op{storage.OpPutIfAbsent}, KeyPrefix: meta.VersionsDir, Nth: 1, Action: faults.LandThenFail(nil)})
	h := handle(t, fb, commit.DefaultConfig())
	res, err := h.DeleteFragments(ctx, []uint64{1})
	if err != nil {
		t.Fatal(err)
	}
	if rule.Fired() != 1 || res.Version != 2 {
		t.Fatalf("fired %d, version %d", rule.Fired(), res.Version)
	}
	if _, err := fb.Get(ctx, meta.TransactionKey(meta.TransactionName(1, res.Transaction.GetUuid()))); err != nil {
		t.Errorf("the transaction file of a landed commit was removed: %v", err)
	}
	if v, _, _ := meta.Latest(ctx, fb); v != 2 {
		t.Errorf("head %d, want 2 (one version, not two)", v)
	}
}

// TestRetriesExhausted: every put loses; the caller gets a retryable
// conflict and the transaction files are gone.
func TestRetriesExhausted(t *testing.T) {
	ctx := t.Context()
	fb := faults.NewFaulty(open(t, t.TempDir()))
	syntheticTable(t, fb, 3)
	fb.Add(faults.Fault{Ops: []storage.Op{storage.OpPutIfAbsent}, KeyPrefix: meta.VersionsDir, Action: faults.Fail(storage.ErrAlreadyExists)})
	cfg := commit.DefaultConfig()
	cfg.MaxAttempts = 3
	h := handle(t, fb, cfg)
	_, err := h.DeleteFragments(ctx, []uint64{1})
	if !errors.Is(err, commit.ErrRetryable) {
		t.Fatalf("err = %v, want retryable", err)
	}
	var left []string
	_ = fb.List(ctx, meta.TransactionsDir, func(a storage.Attrs) error { left = append(left, a.Key); return nil })
	if len(left) != 0 {
		t.Errorf("transaction files left: %v", left)
	}
}
