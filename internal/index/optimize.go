package index

import (
	"context"
	"fmt"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/fri"
	"github.com/compactord/compactord/internal/ops"
	"github.com/compactord/compactord/internal/table"
)

// MergeSegments writes one segment holding every segment of logical index
// name as of manifest m: addresses remapped through the FRI, rows whose
// fragment is dead or whose offset is deleted dropped, coverage the union
// of the segments' load-time coverage restricted to m's live fragments.
// It returns the new segment and the uuids it replaces; nothing is
// committed.
func MergeSegments(ctx context.Context, t *ops.Table, m *pb.Manifest, name string, cfg BuildConfig) (*pb.IndexMetadata, []string, error) {
	segs, err := Segments(m, name)
	if err != nil {
		return nil, nil, err
	}
	versions := table.FragReuse(m).GetVersions()
	chain, err := fri.Compile(versions)
	if err != nil {
		return nil, nil, fmt.Errorf("index %q: fragment-reuse index: %w", name, err)
	}
	cover, err := Covered(segs, versions)
	if err != nil {
		return nil, nil, err
	}
	cover.And(liveSet(m))
	seg, err := Rewrite(ctx, t.Bucket, m, segs, RewriteSpec{Chain: chain, Cover: cover}, cfg)
	if err != nil {
		return nil, nil, err
	}
	removed := make([]string, len(segs))
	for i, s := range segs {
		removed[i] = s.Uuid
	}
	return seg, removed, nil
}

// Optimize merges the segments of logical index name into one and commits
// it. It does nothing (nil result) when the index has one segment.
func Optimize(ctx context.Context, t *ops.Table, name string, cfg BuildConfig) (*commit.Result, error) {
	head, err := table.ReadLatest(ctx, t.Bucket)
	if err != nil {
		return nil, err
	}
	segs, err := Segments(head, name)
	if err != nil {
		return nil, err
	}
	if len(segs) < 2 {
		return nil, nil
	}
	seg, removed, err := MergeSegments(ctx, t, head, name, cfg)
	if err != nil {
		return nil, err
	}
	txn := t.NewTxn(head.Version)
	txn.Operation = &pb.Transaction_CreateIndex{CreateIndex: &pb.CreateIndex{NewIndices: []*pb.IndexMetadata{seg}, RemovedIndexUuids: removed}}
	return t.CommitOrClean(ctx, txn, SegmentFiles(seg))
}
