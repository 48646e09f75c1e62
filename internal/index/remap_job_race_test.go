package index

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/fri"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

// holdTxnFile parks the first transaction-file write (a commit that has
// planned and classified, about to publish) until release is closed.
type holdTxnFile struct {
	storage.Bucket
	reached chan struct{}
	release chan struct{}
	held    bool
}

func (h *holdTxnFile) Put(ctx context.Context, key string, data []byte) error {
	if !h.held && strings.HasPrefix(key, meta.TransactionsDir) {
		h.held = true
		close(h.reached)
		select {
		case <-h.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return h.Bucket.Put(ctx, key, data)
}

// TestTrimRacingCatchUp: a catch-up planned before a deferred compaction
// builds its delta on the compacted fragment's old addresses and is held
// at its commit while the compaction lands and an FRI trim is planned
// (no segment of its read covers the compacted fragment, so the trim
// drops the FRI). Landing the delta would leave it stamped with a
// dataset_version newer than the FRI version's, so once LanceDB stores
// the remapped bitmap nothing would show it still needs that version;
// it re-plans instead, over the new fragment. The trim planned before the
// delta landed re-plans too (a segment landed since its read), and its
// re-plan removes the FRI, which no segment needs. LanceDB then counts
// every row as indexed and answers right.
func TestTrimRacingCatchUp(t *testing.T) {
	lancedb.Require(t)
	ctx := t.Context()
	f, deleted := ghostFixture(t)
	f.Run(t, lancedb.Add(lancedb.BasicRows(40, 45))) // fragment 4, in no index
	h := openHandle(t, f.Dir)
	// Settle the fixture's history: a compaction remapped and trimmed, so
	// the indexes name live fragments only (0 and 5) and fragment 4 is the
	// one no index covers.
	deferredCompaction(t, h, []uint64{2, 3})
	if rm, err := RemapIndexes(ctx, h, RemapJobOptions{}); err != nil || rm.Trim == nil || !rm.Trim.Removed {
		t.Fatalf("settling remap: %+v, %v", rm, err)
	}

	hold := &holdTxnFile{Bucket: h.Bucket, reached: make(chan struct{}), release: make(chan struct{})}
	hc, err := commit.NewCommitter(commit.DefaultConfig(), hold, clock.Real(), commit.NewMetrics(prometheus.NewRegistry()), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	held, err := table.New(hold, hc)
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		res *Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := CatchUp(ctx, held, Options{Indices: []string{"id_idx"}})
		done <- outcome{res, err}
	}()
	select {
	case <-hold.reached:
	case o := <-done:
		t.Fatalf("catch-up finished before its commit was held: %+v, %v", o.res, o.err)
	}

	v1, _ := deferredCompaction(t, h, []uint64{4})
	read, naming, err := h.ReadForWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ix, err := fri.Load(ctx, h.Bucket, read)
	if err != nil || ix == nil {
		t.Fatal(ix, err)
	}
	op, keys, err := ix.Trim(ctx, h.Bucket, read, time.Now())
	if err != nil || op == nil || len(op.GetNewIndices()) != 0 {
		t.Fatalf("trim plan: %v, %v (want the FRI removed: no segment of the read covers fragment 4)", op, err)
	}

	close(hold.release)
	o := <-done
	if o.err != nil || !o.res.Committed {
		t.Fatalf("held catch-up: %+v, %v", o.res, o.err)
	}
	if o.res.Attempts != 2 || len(o.res.Indices) != 1 || len(o.res.Indices[0].Fragments) != 1 || o.res.Indices[0].Fragments[0] == 4 {
		t.Fatalf("held catch-up: %d attempts built %+v, want a re-plan over the compacted fragment, not fragment 4", o.res.Attempts, o.res.Indices)
	}

	txn := commit.NewTransaction(read.Manifest.GetVersion())
	txn.Operation = &pb.Transaction_CreateIndex_{CreateIndex: op}
	_, err = h.Committer.Commit(ctx, &commit.Txn{Read: read, Naming: naming, Transaction: txn, Files: keys})
	if !errors.Is(err, commit.ErrRetryable) {
		t.Fatalf("trim planned before the delta landed: %v, want a retryable conflict", err)
	}
	tr, err := TrimFRI(ctx, h, RemapJobOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tr == nil || !tr.Removed || len(tr.Dropped) != 1 || tr.Dropped[0] != v1.DatasetVersion {
		t.Fatalf("re-planned trim %+v, want v%d dropped and the FRI removed", tr, v1.DatasetVersion)
	}

	res := f.Run(t, lancedb.IndexStats("id_idx"), lancedb.ReadRows(lancedb.ReadOpts{Where: "id = 42 OR id = 35 OR id = 15"}))
	if s := stats(t, res, 0); s.NumUnindexedRows != 0 || s.NumIndexedRows != int64(45-len(deleted)) {
		t.Errorf("LanceDB stats %+v, want %d indexed and 0 unindexed", s, 45-len(deleted))
	}
	if got := idsOf(t, res, 1); !sameIDs(got, []int64{35, 42}) {
		t.Errorf("id = 42 OR id = 35 OR id = 15: %v", got)
	}
}
