package cli

import (
	"context"
	"fmt"

	"github.com/compactord/compactord/internal/inspect"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
)

// openLance opens rawURL (a plain path or any storage URL) as a Lance
// dataset. A location without a table, or with a table of another format
// (compactord's retired private format), is a one-line error and nothing
// stays open; ok is true whenever err is nil.
func openLance(ctx context.Context, rawURL string) (storage.Bucket, bool, error) {
	b, err := openBucket(ctx, rawURL)
	if err != nil {
		return nil, false, err
	}
	ok, err := meta.CheckLance(ctx, b)
	if err == nil && !ok {
		err = meta.ErrNoTable
	}
	if err != nil {
		_ = b.Close()
		return nil, false, fmt.Errorf("%s: %w", rawURL, err)
	}
	return b, true, nil
}

// lanceInspect runs `inspect` on a Lance dataset.
func lanceInspect(ctx context.Context, e *env, rawURL string, version uint64) (handled bool, err error) {
	b, ok, err := openLance(ctx, rawURL)
	if err != nil || !ok {
		return err != nil, err
	}
	defer b.Close()
	doc, err := inspect.Build(ctx, b, version)
	if err != nil {
		return true, fmt.Errorf("inspect %s: %w", rawURL, err)
	}
	return true, printJSON(e.stdout, doc)
}
