// Package table is the handle every job on a Lance table uses: the bucket,
// the commit loop and the logger, the read of a version to plan from, and
// the metadata-only operations (deleting whole fragments, dropping an
// index) and row deletes by predicate that commit through the loop.
package table

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
)

// Handle is one open Lance table.
type Handle struct {
	Bucket    storage.Bucket
	Committer *commit.Committer

	// beforeDeleteCommit, when set, runs between DeleteWhere's plan and its
	// commit (tests race other commits in there).
	beforeDeleteCommit func(context.Context) error
}

// New wraps an opened bucket and its committer.
func New(b storage.Bucket, c *commit.Committer) (*Handle, error) {
	if b == nil || c == nil {
		return nil, errors.New("table: bucket and committer are required")
	}
	return &Handle{Bucket: b, Committer: c}, nil
}

// ReadForWrite reads the latest version as the read state of a
// transaction, refusing a table whose feature flags compactord does not
// implement for writing.
func (h *Handle) ReadForWrite(ctx context.Context) (*meta.ManifestFile, meta.Naming, error) {
	f, n, err := meta.ReadLatest(ctx, h.Bucket)
	if err != nil {
		return nil, 0, err
	}
	if err := meta.CheckWrite(f.Manifest); err != nil {
		return nil, 0, err
	}
	return f, n, nil
}

// DeleteFragments removes whole fragments: a Lance Delete whose
// deleted_fragment_ids name them, as LanceDB commits when a predicate
// matches every row of a fragment. Index bitmaps keep naming the fragments,
// as Lance's do: readers intersect them with the live fragments.
func (h *Handle) DeleteFragments(ctx context.Context, ids []uint64) (*commit.Result, error) {
	txn, err := h.PlanDeleteFragments(ctx, ids)
	if err != nil {
		return nil, err
	}
	return h.Committer.Commit(ctx, txn)
}

// PlanDeleteFragments is DeleteFragments up to the commit: the transaction
// against the latest version, for a caller that commits it later.
func (h *Handle) PlanDeleteFragments(ctx context.Context, ids []uint64) (*commit.Txn, error) {
	read, naming, err := h.ReadForWrite(ctx)
	if err != nil {
		return nil, err
	}
	live := map[uint64]bool{}
	for _, f := range read.Manifest.GetFragments() {
		live[f.GetId()] = true
	}
	ids = uniqueSorted(ids)
	for _, id := range ids {
		if !live[id] {
			return nil, fmt.Errorf("fragment %d is not in version %d (live fragments: %s)", id, read.Manifest.GetVersion(), fragmentList(read.Manifest))
		}
	}
	txn := commit.NewTransaction(read.Manifest.GetVersion())
	txn.Operation = &pb.Transaction_Delete_{Delete: &pb.Transaction_Delete{DeletedFragmentIds: ids}}
	return &commit.Txn{Read: read, Naming: naming, Transaction: txn}, nil
}

// DropIndex removes every segment of a logical index: a CreateIndex with
// the segments as removed_indices and nothing new, as Lance drops one.
// System indexes cannot be dropped, and neither can an index the MemWAL
// maintains: LanceDB's writers would then be configured to maintain an
// index that does not exist.
func (h *Handle) DropIndex(ctx context.Context, name string) (*commit.Result, error) {
	txn, err := h.PlanDropIndex(ctx, name)
	if err != nil {
		return nil, err
	}
	return h.Committer.Commit(ctx, txn)
}

// PlanDropIndex is DropIndex up to the commit.
func (h *Handle) PlanDropIndex(ctx context.Context, name string) (*commit.Txn, error) {
	read, naming, err := h.ReadForWrite(ctx)
	if err != nil {
		return nil, err
	}
	if name == meta.MemWalIndexName || name == meta.FragReuseIndexName {
		return nil, fmt.Errorf("index %s is a system index; it cannot be dropped", name)
	}
	segs := meta.FindIndex(read.Indices, name)
	if len(segs) == 0 {
		var names []string
		for _, ix := range read.Indices {
			if !meta.IsSystemIndex(ix) {
				names = append(names, ix.GetName())
			}
		}
		return nil, fmt.Errorf("no index %q in version %d (indexes: %s)", name, read.Manifest.GetVersion(), strings.Join(slices.Compact(slices.Sorted(slices.Values(names))), ", "))
	}
	if mw := memwal.Index(read.Indices); mw != nil {
		d, err := memwal.Details(mw)
		if err != nil {
			return nil, err
		}
		for _, m := range d.GetMaintainedIndexes() {
			if m == name {
				return nil, fmt.Errorf("index %q is maintained by the MemWAL; remove it from the LSM write spec (LanceDB setLsmWriteSpec) before dropping it", name)
			}
		}
	}
	txn := commit.NewTransaction(read.Manifest.GetVersion())
	txn.Operation = &pb.Transaction_CreateIndex_{CreateIndex: &pb.Transaction_CreateIndex{RemovedIndices: segs}}
	return &commit.Txn{Read: read, Naming: naming, Transaction: txn}, nil
}

func fragmentList(m *pb.Manifest) string {
	var ids []string
	for _, f := range m.GetFragments() {
		ids = append(ids, fmt.Sprint(f.GetId()))
	}
	if len(ids) == 0 {
		return "none"
	}
	if len(ids) > 20 {
		ids = append(ids[:20], "…")
	}
	return strings.Join(ids, ", ")
}

func uniqueSorted(ids []uint64) []uint64 {
	return slices.Compact(slices.Sorted(slices.Values(ids)))
}
