package index

import (
	"context"
	"fmt"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/index/vector"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
)

// The index kinds other than btree and bitmap are handled by their own
// packages; these functions route a segment to its package, so callers
// never switch on kinds themselves.

// SegmentRemappable reports whether Remap handles the segment: btree,
// bitmap, label-list and full-text segments (a full-text segment in a
// format compactord does not read is found by CanRemapInverted), and the
// vector segments package vector remaps.
func SegmentRemappable(m *pb.IndexMetadata) bool {
	switch meta.IndexKind(m) {
	case KindBTree, KindBitmap, KindLabelList, KindInverted:
		return true
	case vector.Kind:
		return vector.Remappable(m)
	}
	return false
}

// remapOther remaps a segment of a kind another package owns; handled is
// false for btree and bitmap segments.
func remapOther(ctx context.Context, b storage.Bucket, m *pb.IndexMetadata, remap func(uint64) (uint64, bool), o RemapOptions) (nm *pb.IndexMetadata, keys []string, st RemapStats, handled bool, err error) {
	if meta.IndexKind(m) != vector.Kind {
		return nil, nil, st, false, nil
	}
	if o.Bitmap == nil {
		return nil, nil, st, true, errNoBitmap(m)
	}
	nm, keys, vs, err := vector.Remap(ctx, b, m, remap, vector.RemapOptions{DatasetVersion: o.DatasetVersion, Bitmap: o.Bitmap, Now: o.Now, Memory: o.Memory})
	return nm, keys, RemapStats{Entries: vs.Entries, Kept: vs.Kept, Dropped: vs.Dropped}, true, err
}

func errNoBitmap(m *pb.IndexMetadata) error {
	return fmt.Errorf("index %s: remap needs the new fragment bitmap", m.GetName())
}

// Buildable reports whether catch-up and rebuild can write a segment of
// the index m belongs to: btree, bitmap, label list, full-text (when
// compactord reproduces its tokenizer; catch-up and rebuild say when not),
// and vector indexes but IVF_RQ (encoded with the index's own centroids
// and quantizer).
func Buildable(m *pb.IndexMetadata) bool {
	switch meta.IndexKind(m) {
	case KindBTree, KindBitmap, KindLabelList, KindInverted:
		return true
	case vector.Kind:
		return vector.Buildable(m)
	}
	return false
}

// buildOther writes the catch-up or rebuilt segment of a job of a kind
// another package owns; handled is false for btree and bitmap jobs.
func buildOther(ctx context.Context, b storage.Bucket, p Job, version uint64, frags *roaring.Bitmap, now time.Time) (ix *pb.IndexMetadata, keys []string, rows int, handled bool, err error) {
	if p.Kind != vector.Kind {
		return nil, nil, 0, false, nil
	}
	ix, keys, rows, err = vector.BuildSegment(ctx, b, p.Segments[0], vector.BuildOptions{Version: version, Field: p.Field, Fragments: frags, Now: now, Rebuild: p.Rebuild})
	return ix, keys, rows, true, err
}
