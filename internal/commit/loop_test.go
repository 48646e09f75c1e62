package commit

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
)

const (
	segA   = "00000000-0000-4000-8000-0000000000a1"
	segB   = "00000000-0000-4000-8000-0000000000b1"
	segC   = "00000000-0000-4000-8000-0000000000c1"
	friOld = "00000000-0000-4000-8000-0000000000f1"
	friNew = "00000000-0000-4000-8000-0000000000f2"
)

// friEntry is a fragment-reuse index entry (the commit loop decides on its
// name and uuid only).
func friEntry(t testing.TB, id string) *pb.IndexMetadata {
	return &pb.IndexMetadata{Uuid: uuidOf(t, id), Name: meta.FragReuseIndexName}
}

// loopTable writes f as version 1 of a fresh mem:// table and returns a
// committer on it.
func loopTable(t *testing.T, f *meta.ManifestFile) (*Committer, storage.Bucket) {
	t.Helper()
	ctx := context.Background()
	b, err := storage.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	data, err := meta.EncodeManifestFile(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.PutIfAbsent(ctx, meta.ManifestKey(meta.NamingV2, f.Manifest.GetVersion()), data); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.MaxAttempts = 3
	c, err := NewCommitter(cfg, b, clock.Real(), NewMetrics(prometheus.NewRegistry()), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	return c, b
}

func createIndex(read uint64, op *pb.Transaction_CreateIndex) *pb.Transaction {
	txn := NewTransaction(read)
	txn.Operation = &pb.Transaction_CreateIndex_{CreateIndex: op}
	return txn
}

// trimOp replaces the FRI entry by a trimmed one, as fri.Trim does.
func trimOp(t testing.TB) *pb.Transaction_CreateIndex {
	return &pb.Transaction_CreateIndex{RemovedIndices: []*pb.IndexMetadata{friEntry(t, friOld)},
		NewIndices: []*pb.IndexMetadata{friEntry(t, friNew)}}
}

// catchupOp adds a segment of id_idx over fragment 2, as a catch-up does.
func catchupOp(t testing.TB) *pb.Transaction_CreateIndex {
	return &pb.Transaction_CreateIndex{NewIndices: []*pb.IndexMetadata{segment(t, "id_idx", segB, []uint32{2})}}
}

func mustCommit(t *testing.T, c *Committer, read *meta.ManifestFile, txn *pb.Transaction) *Result {
	t.Helper()
	res, err := c.Commit(context.Background(), &Txn{Read: read, Naming: meta.NamingV2, Transaction: txn})
	if err != nil {
		t.Fatalf("commit %s: %v", OpName(txn), err)
	}
	return res
}

func wantRetryable(t *testing.T, err error, reason string) {
	t.Helper()
	var ce *ConflictError
	if !errors.As(err, &ce) || !errors.Is(err, ErrRetryable) {
		t.Fatalf("got %v, want a retryable conflict (%s)", err, reason)
	}
	if !strings.Contains(err.Error(), reason) {
		t.Fatalf("conflict %q does not say %q", err, reason)
	}
}

// An FRI trim decided on version 1's segments must not land over a segment
// that landed since: the trim may drop a version the new segment's
// addresses need.
func TestTrimReplansOverConcurrentSegment(t *testing.T) {
	read := version(1, []uint64{1, 2}, segment(t, "id_idx", segA, []uint32{1}), friEntry(t, friOld))
	c, _ := loopTable(t, read)
	mustCommit(t, c, read, createIndex(1, catchupOp(t)))
	_, err := c.Commit(context.Background(), &Txn{Read: read, Naming: meta.NamingV2, Transaction: createIndex(1, trimOp(t))})
	wantRetryable(t, err, `a segment of index "id_idx" landed meanwhile`)
}

// A segment built on the addresses of version 1 must not land over a trim
// decided without it, whether the trim replaced the FRI or removed it.
func TestSegmentReplansOverConcurrentTrim(t *testing.T) {
	for _, removeAll := range []bool{false, true} {
		read := version(1, []uint64{1, 2}, segment(t, "id_idx", segA, []uint32{1}), friEntry(t, friOld))
		c, _ := loopTable(t, read)
		op := trimOp(t)
		if removeAll {
			op.NewIndices = nil
		}
		mustCommit(t, c, read, createIndex(1, op))
		_, err := c.Commit(context.Background(), &Txn{Read: read, Naming: meta.NamingV2, Transaction: createIndex(1, catchupOp(t))})
		wantRetryable(t, err, "the fragment-reuse index was trimmed meanwhile")
	}
}

// A physical remap (segments replaced) and a trim race the same way.
func TestRemapAndTrimRace(t *testing.T) {
	remap := func() *pb.Transaction_CreateIndex {
		return &pb.Transaction_CreateIndex{RemovedIndices: []*pb.IndexMetadata{segment(t, "id_idx", segA, []uint32{1})},
			NewIndices: []*pb.IndexMetadata{segment(t, "id_idx", segC, []uint32{3})}}
	}
	read := version(1, []uint64{2, 3}, segment(t, "id_idx", segA, []uint32{1}), friEntry(t, friOld))
	c, _ := loopTable(t, read)
	mustCommit(t, c, read, createIndex(1, remap()))
	_, err := c.Commit(context.Background(), &Txn{Read: read, Naming: meta.NamingV2, Transaction: createIndex(1, trimOp(t))})
	wantRetryable(t, err, "landed meanwhile")

	c, _ = loopTable(t, read)
	mustCommit(t, c, read, createIndex(1, trimOp(t)))
	_, err = c.Commit(context.Background(), &Txn{Read: read, Naming: meta.NamingV2, Transaction: createIndex(1, remap())})
	wantRetryable(t, err, "trimmed meanwhile")
}

// Changes that leave every FRI version a segment can need in place do not
// send an index job or a trim back: a trim over a dropped index, a segment
// over an unrelated CreateIndex of the MemWAL, an append.
func TestFRIRaceLeavesUnrelatedCommits(t *testing.T) {
	read := version(1, []uint64{1, 2}, segment(t, "id_idx", segA, []uint32{1}), segment(t, "cat_idx", segC, []uint32{1}), friEntry(t, friOld))
	c, _ := loopTable(t, read)
	drop := &pb.Transaction_CreateIndex{RemovedIndices: []*pb.IndexMetadata{segment(t, "cat_idx", segC, []uint32{1})}}
	mustCommit(t, c, read, createIndex(1, drop))
	mustCommit(t, c, read, appendTxn(1, 1))
	res := mustCommit(t, c, read, createIndex(1, trimOp(t)))
	if res.Version != 4 {
		t.Fatalf("trim landed as version %d, want 4", res.Version)
	}
}

// A segment another writer removed without naming it (LanceDB drops a
// segment whose fragments all left the table) is a conflict to re-plan
// on, not a failure to build the version.
func TestReplacedSegmentGoneIsRetryable(t *testing.T) {
	ctx := context.Background()
	read := version(1, []uint64{1, 2}, segment(t, "id_idx", segA, []uint32{1}), segment(t, "id_idx", segC, []uint32{2}))
	c, b := loopTable(t, read)
	// Version 2 as LanceDB writes a delete of fragment 1: segment A,
	// whose only fragment left, is gone, and the transaction names no
	// index.
	v2 := version(2, []uint64{2}, segment(t, "id_idx", segC, []uint32{2}))
	v2.Transaction = &pb.Transaction{ReadVersion: 1, Uuid: "33333333-3333-4333-8333-333333333333",
		Operation: &pb.Transaction_Delete_{Delete: &pb.Transaction_Delete{DeletedFragmentIds: []uint64{1}}}}
	data, err := meta.EncodeManifestFile(v2)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.PutIfAbsent(ctx, meta.ManifestKey(meta.NamingV2, 2), data); err != nil {
		t.Fatal(err)
	}
	rebuild := &pb.Transaction_CreateIndex{
		RemovedIndices: []*pb.IndexMetadata{segment(t, "id_idx", segA, []uint32{1}), segment(t, "id_idx", segC, []uint32{2})},
		NewIndices:     []*pb.IndexMetadata{segment(t, "id_idx", segB, []uint32{1, 2})}}
	_, err = c.Commit(ctx, &Txn{Read: read, Naming: meta.NamingV2, Transaction: createIndex(1, rebuild)})
	wantRetryable(t, err, "index segment "+segA+" to replace was removed meanwhile")
}

// A segment built on version 1's addresses must not land over a deferred
// compaction that added an FRI version since (its dataset_version, the
// compaction's read, may be older than the segment's): once LanceDB
// stores the remapped bitmap nothing shows the segment needs that version.
// The compaction's own entry lands whatever the segment.
func TestSegmentReplansOverDeferredCompaction(t *testing.T) {
	for _, hadFRI := range []bool{false, true} {
		ixs := []*pb.IndexMetadata{segment(t, "id_idx", segA, []uint32{1})}
		if hadFRI {
			ixs = append(ixs, friEntry(t, friOld))
		}
		read := version(1, []uint64{1, 2, 3}, ixs...)
		c, _ := loopTable(t, read)
		rw := NewTransaction(1)
		rw.Operation = &pb.Transaction_Rewrite_{Rewrite: &pb.Transaction_Rewrite{Groups: []*pb.Transaction_Rewrite_RewriteGroup{group([]uint64{2}, 4)}}}
		if _, err := c.Commit(context.Background(), &Txn{Read: read, Naming: meta.NamingV2, Transaction: rw, Extra: Extra{FragReuse: friEntry(t, friNew)}}); err != nil {
			t.Fatal(err)
		}
		_, err := c.Commit(context.Background(), &Txn{Read: read, Naming: meta.NamingV2, Transaction: createIndex(1, catchupOp(t))})
		wantRetryable(t, err, `the new segment of index "id_idx" holds addresses it may remap`)
	}
}

// Two creates of one index name on different columns, planned on one
// version: the second must not land (one logical index over two fields
// would let catch-up prove coverage from segments of the other field), and
// a segment whose field or kind differs from its name's segments is refused
// by the build whatever the classification decided.
func TestConcurrentCreatesOfOneIndexName(t *testing.T) {
	read := version(1, []uint64{1, 2})
	c, _ := loopTable(t, read)
	onID := segment(t, "x_idx", segA, []uint32{1, 2})
	onCat := segment(t, "x_idx", segC, []uint32{1, 2})
	onCat.Fields = []int32{1}
	landed := mustCommit(t, c, read, createIndex(1, &pb.Transaction_CreateIndex{NewIndices: []*pb.IndexMetadata{onID}}))
	_, err := c.Commit(context.Background(), &Txn{Read: read, Naming: meta.NamingV2,
		Transaction: createIndex(1, &pb.Transaction_CreateIndex{NewIndices: []*pb.IndexMetadata{onCat}})})
	wantRetryable(t, err, `index "x_idx" changed meanwhile`)
	_, err = BuildManifest(landed.Manifest, createIndex(2, &pb.Transaction_CreateIndex{NewIndices: []*pb.IndexMetadata{onCat}}), landed.Manifest, t0)
	if err == nil || !strings.Contains(err.Error(), `index "x_idx": a new segment on fields [1]`) {
		t.Fatalf("build of a segment on another field: %v", err)
	}
	bitmap := segment(t, "x_idx", segB, []uint32{1, 2})
	bitmap.IndexDetails.TypeUrl = meta.TypeURLBitmap
	if _, err = BuildManifest(landed.Manifest, createIndex(2, &pb.Transaction_CreateIndex{NewIndices: []*pb.IndexMetadata{bitmap}}), landed.Manifest, t0); err == nil || !strings.Contains(err.Error(), "disagrees") {
		t.Fatalf("build of a segment of another kind: %v", err)
	}
}
