package index

import (
	"context"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"

	"github.com/compactord/compactord/internal/storage"
)

// parquetFile is an open Parquet object and the reader behind it, which must
// be closed to release a local file descriptor.
type parquetFile struct {
	*parquet.File
	ra  io.ReaderAt
	key string
}

func (p *parquetFile) Close() error {
	if c, ok := p.ra.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// openParquet opens key (size <= 0: stat it first). A missing object and an
// unreadable one are different errors: the first is "missing", the second
// wraps corrupt.
func openParquet(ctx context.Context, b storage.Bucket, key string, size int64, corrupt error) (*parquetFile, error) {
	if size <= 0 {
		a, err := b.Attributes(ctx, key)
		if err != nil {
			if storage.IsNotFound(err) {
				return nil, fmt.Errorf("%s is missing: %w", key, err)
			}
			return nil, fmt.Errorf("stat %s: %w", key, err)
		}
		size = a.Size
	}
	ra := storage.NewReaderAt(ctx, b, key, size)
	f, err := parquet.OpenFile(ra, size, parquet.SkipBloomFilters(true))
	if err != nil {
		if c, ok := ra.(io.Closer); ok {
			_ = c.Close()
		}
		if storage.IsNotFound(err) {
			return nil, fmt.Errorf("%s is missing: %w", key, err)
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("open %s: %w", key, ctx.Err())
		}
		return nil, fmt.Errorf("%w: %s: %v", corrupt, key, err)
	}
	return &parquetFile{File: f, ra: ra, key: key}, nil
}
