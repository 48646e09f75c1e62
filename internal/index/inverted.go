package index

import (
	"context"
	"fmt"
	"io"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/index/fts"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
)

// invertedOpener opens the files of segment m.
func invertedOpener(ctx context.Context, b storage.Bucket, m *pb.IndexMetadata) fts.Opener {
	dir := meta.IndexDir(meta.UUIDString(m.GetUuid()))
	return func(name string) (io.ReaderAt, int64, error) {
		key := dir + name
		a, err := b.Attributes(ctx, key)
		if err != nil {
			return nil, 0, fmt.Errorf("index %s (%s): %w", m.GetName(), meta.UUIDString(m.GetUuid()), err)
		}
		return storage.NewReaderAt(ctx, b, key, a.Size), a.Size, nil
	}
}

// CanRemapInverted says why compactord cannot remap the full-text
// segment m (nil if it can): its metadata.lance names a format it does
// not read.
func CanRemapInverted(ctx context.Context, b storage.Bucket, m *pb.IndexMetadata) error {
	_, err := fts.ReadMetadata(invertedOpener(ctx, b, m))
	return err
}

// remapInverted is Remap of a full-text (inverted) segment: fts.Remap
// rewrites its docs, postings and token set for the new addresses; the
// files are written under a new uuid with m's name, fields, details and
// index version, its creation time kept as Lance's remap keeps it.
func remapInverted(ctx context.Context, b storage.Bucket, m *pb.IndexMetadata, remap func(uint64) (uint64, bool), o RemapOptions) (*pb.IndexMetadata, []string, RemapStats, error) {
	var st RemapStats
	files, fst, err := fts.Remap(invertedOpener(ctx, b, m), remap)
	if err != nil {
		return nil, nil, st, fmt.Errorf("index %s: %w", m.GetName(), err)
	}
	st = RemapStats{Entries: fst.Docs, Kept: fst.Kept, Dropped: fst.Dropped}
	u, id := meta.NewUUID()
	w := &Written{UUID: u}
	for _, f := range files {
		key := meta.IndexDir(id) + f.Name
		w.Keys = append(w.Keys, key)
		if err := b.Put(ctx, key, f.Data); err != nil {
			return nil, w.Keys, st, fmt.Errorf("index %s: write %s: %w", m.GetName(), key, err)
		}
		w.Files = append(w.Files, &pb.IndexFile{Path: f.Name, SizeBytes: uint64(len(f.Data))})
	}
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	nm, err := SegmentMetadata(m.GetName(), m.GetFields(), KindInverted, m, o.DatasetVersion, o.Bitmap, w, now)
	if err != nil {
		return nil, w.Keys, st, err
	}
	if m.CreatedAt != nil {
		nm.CreatedAt = proto.Uint64(m.GetCreatedAt())
	}
	return nm, w.Keys, st, nil
}
