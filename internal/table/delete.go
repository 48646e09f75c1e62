package table

import (
	"context"
	"errors"
	"fmt"

	"github.com/RoaringBitmap/roaring/v2"
	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/format/deletion"
	"github.com/compactord/compactord/internal/scan"
)

// DeleteAttempts bounds the re-plans of DeleteWhere after a retryable
// conflict.
const DeleteAttempts = 5

// DeletePlan is what a row delete found at its read version.
type DeletePlan struct {
	ReadVersion uint64
	// Rows is the number of live rows the predicate matched.
	Rows uint64
	// Updated are the fragments that get a new deletion file; Removed the
	// fragments whose every row is now deleted (they leave the table, as
	// Lance drops them).
	Updated, Removed []uint64
}

// DeleteResult is a finished DeleteWhere.
type DeleteResult struct {
	DeletePlan
	// Commit is the landed Delete; nil when no row matched (nothing is
	// committed, as Lance commits nothing then).
	Commit *commit.Result
	// Replans counts the plans thrown away after a retryable conflict.
	Replans int
}

// DeleteWhere deletes the live rows matching the predicate (see
// ParsePredicate) as Lance's delete does: it reads only the predicate's
// columns of each fragment, extends the fragment's deletion file with the
// matching rows, drops the fragments left with no live row, and commits a
// Delete through the commit loop. A concurrent commit that moved or
// changed the deletions of a fragment it touches (a compaction, a merge,
// another delete) is a retryable conflict, and the delete re-plans on the
// new head, up to DeleteAttempts times: a delete never lands on rows that
// moved meanwhile, so no deleted row comes back.
func (h *Handle) DeleteWhere(ctx context.Context, expr string) (*DeleteResult, error) {
	replans := 0
	for {
		txn, plan, err := h.PlanDeleteWhere(ctx, expr)
		if err != nil {
			return nil, err
		}
		if txn == nil {
			return &DeleteResult{DeletePlan: *plan, Replans: replans}, nil
		}
		if h.beforeDeleteCommit != nil {
			if err := h.beforeDeleteCommit(ctx); err != nil {
				return nil, err
			}
		}
		res, err := h.Committer.Commit(ctx, txn)
		var ce *commit.ConflictError
		if err != nil && errors.As(err, &ce) && errors.Is(err, commit.ErrRetryable) && replans+1 < DeleteAttempts {
			replans++
			continue
		}
		if err != nil {
			return nil, err
		}
		return &DeleteResult{DeletePlan: *plan, Commit: res, Replans: replans}, nil
	}
}

// PlanDeleteWhere is one plan of DeleteWhere against the latest version:
// the transaction (nil when no row matched) with the deletion files it
// wrote, and what it found. A caller that commits it later owns the
// conflict handling.
func (h *Handle) PlanDeleteWhere(ctx context.Context, expr string) (*commit.Txn, *DeletePlan, error) {
	read, naming, err := h.ReadForWrite(ctx)
	if err != nil {
		return nil, nil, err
	}
	m := read.Manifest
	p, err := ParsePredicate(m.GetFields(), expr)
	if err != nil {
		return nil, nil, err
	}
	t, err := scan.OpenManifest(h.Bucket, m, scan.Options{Columns: p.Columns(), BatchRows: 1 << 16})
	if err != nil {
		return nil, nil, err
	}
	hits := map[uint64]*roaring.Bitmap{}
	err = t.Batches(ctx, func(b *scan.Batch) error {
		var bm *roaring.Bitmap
		for _, r := range b.Live {
			if !p.Match(b.Columns, r) {
				continue
			}
			if bm == nil {
				if bm = hits[b.Fragment]; bm == nil {
					bm = roaring.New()
					hits[b.Fragment] = bm
				}
			}
			bm.Add(uint32(b.Offset) + uint32(r))
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("delete: version %d: %w", m.GetVersion(), err)
	}
	plan := &DeletePlan{ReadVersion: m.GetVersion()}
	if len(hits) == 0 {
		return nil, plan, nil
	}
	del := &pb.Transaction_Delete{Predicate: p.String()}
	var files []string
	abandon := func() {
		for _, k := range files {
			_ = h.Bucket.Delete(context.WithoutCancel(ctx), k)
		}
	}
	for _, f := range m.GetFragments() {
		bm := hits[f.GetId()]
		if bm == nil {
			continue
		}
		plan.Rows += bm.GetCardinality()
		dv, err := deletion.Read(ctx, h.Bucket, f.GetId(), f.GetDeletionFile(), f.GetPhysicalRows())
		if err != nil {
			abandon()
			return nil, nil, fmt.Errorf("delete: fragment %d: %w", f.GetId(), err)
		}
		dv.Or(bm)
		if f.GetPhysicalRows() > 0 && dv.GetCardinality() >= f.GetPhysicalRows() {
			del.DeletedFragmentIds = append(del.DeletedFragmentIds, f.GetId())
			plan.Removed = append(plan.Removed, f.GetId())
			continue
		}
		df, key, data, err := deletion.Encode(f.GetId(), dv, m.GetVersion())
		if err != nil {
			abandon()
			return nil, nil, fmt.Errorf("delete: fragment %d: %w", f.GetId(), err)
		}
		if err := h.Bucket.Put(ctx, key, data); err != nil {
			abandon()
			return nil, nil, fmt.Errorf("delete: write %s: %w", key, err)
		}
		files = append(files, key)
		nf := proto.Clone(f).(*pb.DataFragment)
		nf.DeletionFile = df
		del.UpdatedFragments = append(del.UpdatedFragments, nf)
		plan.Updated = append(plan.Updated, f.GetId())
	}
	txn := commit.NewTransaction(m.GetVersion())
	txn.Operation = &pb.Transaction_Delete_{Delete: del}
	return &commit.Txn{Read: read, Naming: naming, Transaction: txn, Files: files}, plan, nil
}
