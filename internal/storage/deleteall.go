package storage

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
)

// DeleteAllFunc deletes keys with at most limit deletes in flight, treating
// a missing key as deleted, and calls deleted(i), when not nil, as keys[i]
// is gone (concurrently, from the deleting goroutines). It returns how many
// keys are gone.
func DeleteAllFunc(ctx context.Context, b Bucket, keys []string, limit int, deleted func(i int)) (int, error) {
	if limit < 1 {
		return 0, fmt.Errorf("delete: concurrency must be at least 1, got %d", limit)
	}
	var n atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(limit)
	for i, k := range keys {
		g.Go(func() error {
			if err := b.Delete(gctx, k); err != nil && !errors.Is(err, ErrNotFound) {
				return fmt.Errorf("delete %s: %w", k, err)
			}
			n.Add(1)
			if deleted != nil {
				deleted(i)
			}
			return nil
		})
	}
	err := g.Wait()
	return int(n.Load()), err
}
