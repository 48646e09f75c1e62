package compact

import (
	"context"
	"fmt"

	"github.com/RoaringBitmap/roaring/v2"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/fri"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/table"
)

// inlineRemap rewrites, through the compaction's own row map, every index
// segment whose coverage meets the rewritten fragments. The new segments
// name the new fragments, so their ids are reserved first with a
// ReserveFragments commit (compatible with everything) and written into rw
// and friGroups; when no segment is affected nothing is reserved. It returns the segment changes, the files it wrote (even on
// error) and the number of segments rewritten.
func (c *Compactor) inlineRemap(ctx context.Context, read *pb.Manifest, rw *pb.Rewrite, friGroups []*pb.FragReuseGroup) (*pb.RewrittenIndices, []string, int, error) {
	var n uint32
	old := roaring.New()
	for _, g := range rw.Groups {
		n += uint32(len(g.NewFragments))
		for _, f := range g.OldFragments {
			old.Add(f.Id)
		}
	}
	versions := table.FragReuse(read).GetVersions()
	chain, err := fri.Compile(versions)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("fragment-reuse index: %w", err)
	}
	// Decide the affected segments and check them before reserving ids:
	// the reservation is a commit, and bad segments must fail the job
	// before it changes anything.
	var affected []*pb.IndexMetadata
	for _, seg := range read.Indices {
		if table.IsSystemIndex(seg) {
			continue
		}
		cov, err := index.Coverage(seg, versions)
		if err != nil {
			return nil, nil, 0, err
		}
		if cov == nil {
			return nil, nil, 0, fmt.Errorf("index %q segment %s has no fragment bitmap; inline remap cannot tell what it covers (use the deferred remap)", seg.Name, seg.Uuid)
		}
		if !cov.Intersects(old) {
			continue
		}
		if err := index.CheckSegment(ctx, c.t.Bucket, seg); err != nil {
			return nil, nil, 0, err
		}
		affected = append(affected, seg)
	}
	if len(affected) == 0 {
		// No segment names the old fragments: ids can be assigned at
		// build time, as for any rewrite.
		return &pb.RewrittenIndices{}, nil, 0, nil
	}
	if n > 0 {
		txn := c.t.NewTxn(read.Version)
		txn.Operation = &pb.Transaction_ReserveFragments{ReserveFragments: &pb.ReserveFragments{NumFragments: n}}
		res, err := c.t.CommitOrClean(ctx, txn, nil)
		if err != nil {
			return nil, nil, 0, fmt.Errorf("reserve %d fragment ids: %w", n, err)
		}
		next := res.Manifest.GetMaxFragmentId() - n + 1
		for gi, g := range rw.Groups {
			for i, f := range g.NewFragments {
				f.Id = next
				friGroups[gi].NewFragments[i].Id = next
				next++
			}
		}
		rw.FragmentIdsReserved = true
	}
	// The row map is compiled as one FRI version newer than every segment.
	rowMap, err := fri.Compile([]*pb.FragReuseVersion{{DatasetVersion: read.Version + 1, Groups: friGroups}})
	if err != nil {
		return nil, nil, 0, fmt.Errorf("compile the row map: %w", err)
	}
	live := roaring.New()
	for _, f := range read.Fragments {
		live.Add(f.Id)
	}
	ri := &pb.RewrittenIndices{}
	var files []string
	for _, seg := range affected {
		cov, err := index.Coverage(seg, versions)
		if err != nil {
			return nil, files, 0, err
		}
		cov.And(live)
		cover := rowMap.RemapBitmap(cov, 0)
		ns, err := index.Rewrite(ctx, c.t.Bucket, read, []*pb.IndexMetadata{seg}, index.RewriteSpec{Chain: chain, RowMap: rowMap, Cover: cover}, c.IndexConfig)
		if err != nil {
			return nil, files, 0, err
		}
		files = append(files, index.SegmentFiles(ns)...)
		ri.NewIndices = append(ri.NewIndices, ns)
		ri.RemovedIndexUuids = append(ri.RemovedIndexUuids, seg.Uuid)
	}
	return ri, files, len(ri.NewIndices), nil
}
