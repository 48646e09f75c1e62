package cli

import (
	"context"
	"fmt"

	"github.com/compactord/compactord/internal/lance/inspect"
	"github.com/compactord/compactord/internal/lance/meta"
	"github.com/compactord/compactord/internal/storage"
)

// openLance opens rawURL (a plain path or any storage URL) and reports
// whether it holds a Lance dataset. When it does not, the bucket is closed
// and the caller falls back to the private format, which is retired later;
// the check is one listing and a four-byte read, so the fallback costs the
// private path almost nothing.
func openLance(ctx context.Context, rawURL string) (storage.Bucket, bool, error) {
	u, err := normalizeURL(rawURL)
	if err != nil {
		return nil, false, err
	}
	b, err := storage.Open(ctx, u)
	if err != nil {
		return nil, false, err
	}
	ok, err := meta.Detect(ctx, b)
	if err != nil || !ok {
		_ = b.Close()
		return nil, false, err
	}
	return b, true, nil
}

// lanceInspect runs `inspect` on a Lance dataset. handled is false when
// rawURL is not one, and the private-format command should run instead.
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
