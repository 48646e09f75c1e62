package merge

import (
	"context"
	"fmt"
	"io"

	"github.com/RoaringBitmap/roaring/v2"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/format/deletion"
	"github.com/compactord/compactord/internal/format/file"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
)

// openFragment opens the data file of a single-file fragment. Fragments
// with several data files (columns added later) are refused for now: their
// rows are spread over files this job would have to align.
func openFragment(ctx context.Context, b storage.Bucket, f *pb.DataFragment) (*file.File, func(), error) {
	if len(f.GetFiles()) != 1 {
		return nil, nil, fmt.Errorf("fragment %d has %d data files; merging into fragments with added columns is not supported yet", f.GetId(), len(f.GetFiles()))
	}
	df := f.GetFiles()[0]
	key := meta.DataKey(df.GetPath())
	size := int64(df.GetFileSizeBytes())
	if size == 0 {
		a, err := b.Attributes(ctx, key)
		if err != nil {
			return nil, nil, fmt.Errorf("fragment %d: %w", f.GetId(), err)
		}
		size = a.Size
	}
	ra := storage.NewReaderAt(ctx, b, key, size)
	done := func() {
		if c, ok := ra.(io.Closer); ok {
			_ = c.Close()
		}
	}
	lf, err := file.Open(ra, size)
	if err != nil {
		done()
		return nil, nil, fmt.Errorf("fragment %d: %s: %w", f.GetId(), key, err)
	}
	return lf, done, nil
}

// deleted returns the fragment's deletion vector (empty without one).
func deleted(ctx context.Context, b storage.Bucket, fragID uint64, f *pb.DataFragment) (*roaring.Bitmap, error) {
	return deletion.Read(ctx, b, fragID, f.GetDeletionFile(), f.GetPhysicalRows())
}

// primaryKey returns the table's single primary-key field.
func primaryKey(m *pb.Manifest) (*pb.Field, error) {
	var pk []*pb.Field
	for _, f := range m.GetFields() {
		if f.GetUnenforcedPrimaryKey() {
			pk = append(pk, f)
		}
	}
	switch len(pk) {
	case 1:
		return pk[0], nil
	case 0:
		return nil, fmt.Errorf("the table has no primary key (LanceDB setUnenforcedPrimaryKey); MemWAL merges need one")
	}
	return nil, fmt.Errorf("the table has a compound primary key; merging is supported for single-column keys only")
}
