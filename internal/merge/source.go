package merge

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/RoaringBitmap/roaring/v2"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/format/deletion"
	"github.com/compactord/compactord/internal/format/file"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
)

// openFragment opens the data file of a single-file fragment of the
// dataset b, which is at dir ("" for the base table, a generation's
// directory for a generation) of the table's bucket. name is the file's
// path from the table's root, for errors. Fragments with several data
// files (columns added later) are refused for now: their rows are spread
// over files this job would have to align.
func openFragment(ctx context.Context, b storage.Bucket, dir string, f *pb.DataFragment) (lf *file.File, name string, done func(), err error) {
	if len(f.GetFiles()) != 1 {
		return nil, "", nil, fmt.Errorf("fragment %d has %d data files; merging into fragments with added columns is not supported yet", f.GetId(), len(f.GetFiles()))
	}
	df := f.GetFiles()[0]
	key := meta.DataKey(df.GetPath())
	name = dir + key
	size := int64(df.GetFileSizeBytes())
	if size == 0 {
		a, err := b.Attributes(ctx, key)
		if err != nil {
			return nil, "", nil, fmt.Errorf("fragment %d: %w", f.GetId(), named(name, err))
		}
		size = a.Size
	}
	ra := storage.NewReaderAt(ctx, b, key, size)
	done = func() {
		if c, ok := ra.(io.Closer); ok {
			_ = c.Close()
		}
	}
	lf, err = file.Open(ra, size)
	if err != nil {
		done()
		return nil, "", nil, fmt.Errorf("fragment %d: %w", f.GetId(), named(name, err))
	}
	return lf, name, done, nil
}

// named prefixes err with the object it concerns unless err names it
// already (the storage layer's errors name the object they read).
func named(name string, err error) error {
	if strings.Contains(err.Error(), name) {
		return err
	}
	return fmt.Errorf("%s: %w", name, err)
}

// deleted returns the deletion vector (empty without one) of a fragment
// of the dataset b at dir (see openFragment); an error names the file by
// its path from the table's root.
func deleted(ctx context.Context, b storage.Bucket, dir string, f *pb.DataFragment) (*roaring.Bitmap, error) {
	df := f.GetDeletionFile()
	if df == nil {
		return roaring.New(), nil
	}
	key := deletion.Key(f.GetId(), df)
	data, err := b.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("fragment %d: deletion file: %w", f.GetId(), named(dir+key, err))
	}
	bm, err := deletion.Decode(df, data, f.GetPhysicalRows())
	if err != nil {
		return nil, fmt.Errorf("fragment %d: %s: %w", f.GetId(), dir+key, err)
	}
	return bm, nil
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
