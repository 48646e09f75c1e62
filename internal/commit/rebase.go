package commit

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// rebaseDeletions rewrites the fragment changes of a Delete or MergeSSTables
// so they apply on top of head: for every fragment whose deletion file
// changed since the read version, our bitmap is unioned with head's (Delete
// vs Delete). A fragment head no longer has was fully deleted by someone
// else, which subsumes our deletions in it. A union that covers every row
// moves the fragment to removed.
//
// It returns the rebased transaction and the deletion files it wrote.
// REQUIRES: classification found no compaction that consumed our fragments.
func rebaseDeletions(ctx context.Context, b storage.Bucket, txn *pb.Transaction, read, head *pb.Manifest) (*pb.Transaction, []string, error) {
	out := proto.Clone(txn).(*pb.Transaction)
	var updated *[]*pb.Fragment
	var removed *[]uint32
	switch op := out.GetOperation().(type) {
	case *pb.Transaction_Delete:
		updated, removed = &op.Delete.UpdatedFragments, &op.Delete.RemovedFragmentIds
	case *pb.Transaction_MergeSstables:
		updated, removed = &op.MergeSstables.UpdatedFragments, &op.MergeSstables.RemovedFragmentIds
	default:
		return nil, nil, fmt.Errorf("rebase: %s has no fragment deletions", OpName(txn))
	}
	var written []string
	var keep []*pb.Fragment
	for _, f := range *updated {
		hf := table.FragmentByID(head, f.Id)
		if hf == nil {
			continue // fully deleted since our read: our deletions are subsumed
		}
		rf := table.FragmentByID(read, f.Id)
		if sameDeletion(hf, rf) {
			keep = append(keep, f)
			continue
		}
		ours, err := table.ReadDeletionFile(ctx, b, f.DeletionFile)
		if err != nil {
			return nil, written, err
		}
		theirs, err := table.ReadDeletionFile(ctx, b, hf.DeletionFile)
		if err != nil {
			return nil, written, err
		}
		ours.Or(theirs)
		if ours.GetCardinality() >= hf.PhysicalRows {
			*removed = append(*removed, f.Id)
			continue
		}
		df, err := table.WriteDeletionFile(ctx, b, f.Id, head.Version, ours)
		if err != nil {
			return nil, written, err
		}
		written = append(written, df.Path)
		nf := proto.Clone(hf).(*pb.Fragment)
		nf.DeletionFile = df
		keep = append(keep, nf)
	}
	*updated = keep
	var rem []uint32
	for _, id := range *removed {
		if table.FragmentByID(head, id) != nil {
			rem = append(rem, id)
		}
	}
	*removed = rem
	return out, written, nil
}

func sameDeletion(a, b *pb.Fragment) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.GetDeletionFile().GetPath() == b.GetDeletionFile().GetPath()
}
