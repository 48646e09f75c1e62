package index

import (
	"context"
	"fmt"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
)

// ReadSegment reads the entries of a btree, bitmap or label-list segment. full gives
// the physical rows of a fragment a bitmap segment holds whole (nil: such
// a segment is an error).
func ReadSegment(ctx context.Context, b storage.Bucket, m *pb.IndexMetadata, full func(frag uint32) (uint64, bool)) (*Entries, error) {
	// A newer index version may store something else under the same
	// layout (Lance 14 btrees: row addresses); every reader of segment
	// content (remap, lookup, checks) stops here.
	if err := meta.CheckIndexVersion(m); err != nil {
		return nil, err
	}
	dir := meta.IndexDir(meta.UUIDString(m.GetUuid()))
	open := func(name string) (Reader, error) {
		key := dir + name
		a, err := b.Attributes(ctx, key)
		if err != nil {
			return Reader{}, fmt.Errorf("index %s (%s): %w", m.GetName(), meta.UUIDString(m.GetUuid()), err)
		}
		return Reader{R: storage.NewReaderAt(ctx, b, key, a.Size), Size: a.Size}, nil
	}
	switch kind := meta.IndexKind(m); kind {
	case KindBTree:
		d, err := open(BTreeDataFile)
		if err != nil {
			return nil, err
		}
		l, err := open(BTreeLookupFile)
		if err != nil {
			return nil, err
		}
		bt, err := ReadBTree(d, l)
		if err != nil {
			return nil, err
		}
		return bt.Entries, nil
	case KindBitmap:
		r, err := open(BitmapLookupFile)
		if err != nil {
			return nil, err
		}
		bm, err := ReadBitmap(r)
		if err != nil {
			return nil, err
		}
		return bm.Entries(full)
	case KindLabelList:
		r, err := open(BitmapLookupFile)
		if err != nil {
			return nil, err
		}
		ll, err := ReadLabelList(r)
		if err != nil {
			return nil, err
		}
		return ll.Entries(full)
	default:
		return nil, fmt.Errorf("index %s: compactord reads btree, bitmap and label-list segments, not %s", m.GetName(), kind)
	}
}

// RemapOptions say what a remapped segment becomes.
type RemapOptions struct {
	// Field is the table field the index is on (the type of the values
	// written).
	Field *pb.Field
	// DatasetVersion of the new segment: the version whose addresses it
	// holds (the head the remap read).
	DatasetVersion uint64
	// Bitmap is the new segment's fragment bitmap: the old one through the
	// load-time remap (fri.Index.RemapBitmap), which for an inline remap
	// is that of an FRI of the one rewrite. Required.
	Bitmap *roaring.Bitmap
	// Full gives the physical rows of a fragment a bitmap segment holds
	// whole (live fragments and the FRI's old fragments).
	Full func(frag uint32) (uint64, bool)
	// Now stamps created_at (time.Now if zero).
	Now time.Time
	// Memory, when set, takes the bytes the remap is about to hold from
	// the caller's memory budget (waiting until they fit) and returns the
	// function that gives them back: a streamed remap's window for the
	// whole remap, a vector or full-text remap's a partition at a time.
	// nil is no bound.
	Memory func(ctx context.Context, n int64) (release func(), err error)
}

// RemapStats count what a remap did to a segment's entries.
type RemapStats struct {
	Entries, Kept, Dropped int
}

// Remap rebuilds the btree, bitmap, label-list or full-text segment m
// with every row address passed through remap: a row remap reports
// deleted is dropped. A btree, bitmap or label-list segment streams
// (remap_stream.go): the old segment is read a window at a time and the
// new one written as it goes, so its memory does not grow with the
// segment; a full-text segment is remapped a partition at a time. The new
// segment gets a new uuid, dataset_version and fragment_bitmap from o, and
// m's name, fields, details and index version. It returns the segment's
// metadata and the objects written (also on error, for cleanup); the
// caller commits it (a CreateIndex replacing m, or a Rewrite's
// rewritten_indices).
//
// For a deferred compaction's FRI, remap is fri.Index.Remapper(0); for an
// inline remap, that of an fri.Index holding the one Rewrite's version.
func Remap(ctx context.Context, b storage.Bucket, m *pb.IndexMetadata, remap func(uint64) (uint64, bool), o RemapOptions) (*pb.IndexMetadata, []string, RemapStats, error) {
	var st RemapStats
	if nm, keys, st, ok, err := remapOther(ctx, b, m, remap, o); ok {
		return nm, keys, st, err
	}
	if o.Field == nil || o.Bitmap == nil {
		return nil, nil, st, fmt.Errorf("index %s: remap needs the table field and the new fragment bitmap", m.GetName())
	}
	kind := meta.IndexKind(m)
	if kind == KindInverted {
		return remapInverted(ctx, b, m, remap, o)
	}
	if err := meta.CheckIndexVersion(m); err != nil {
		return nil, nil, st, err
	}
	release, err := hold(ctx, o.Memory, streamMemory)
	if err != nil {
		return nil, nil, st, err
	}
	defer release()
	out := newSegmentOut(ctx, b)
	switch kind {
	case KindBTree:
		err = remapBTree(ctx, b, m, remap, o.Field, out, &st)
	case KindBitmap:
		err = remapBitmap(ctx, b, m, remap, o.Full, o.Field, out, &st)
	case KindLabelList:
		err = remapLabelList(ctx, b, m, remap, o.Full, out, &st)
	default:
		err = fmt.Errorf("compactord does not remap %s segments", kind)
	}
	w, keys := out.w, out.w.Keys
	if err != nil {
		return nil, keys, st, fmt.Errorf("index %s: %w", m.GetName(), err)
	}
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	nm, err := SegmentMetadata(m.GetName(), m.GetFields(), kind, m, o.DatasetVersion, o.Bitmap, w, now)
	if err != nil {
		return nil, keys, st, err
	}
	// Lance's remap keeps the segment's creation time: the data is the
	// same index, only its addresses moved.
	if m.CreatedAt != nil {
		nm.CreatedAt = proto.Uint64(m.GetCreatedAt())
	}
	return nm, keys, st, nil
}

// hold takes n bytes from mem (nil: no budget) and returns their release.
func hold(ctx context.Context, mem func(context.Context, int64) (func(), error), n int64) (func(), error) {
	if mem == nil {
		return func() {}, nil
	}
	return mem(ctx, n)
}
