package storage

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"gocloud.dev/blob"
)

// FirstLister is implemented by buckets that can return the first key under
// a prefix without fetching a whole listing page. Latest-version discovery
// is one such call per commit: a default page of 1 000 keys made a commit on
// S3 cost O(retained versions).
type FirstLister interface {
	First(ctx context.Context, prefix string) (Attrs, bool, error)
}

var errFirstStop = errors.New("stop")

// First returns the lexically first object under prefix, using FirstLister
// when b implements it and an early-stopped List otherwise.
func First(ctx context.Context, b Bucket, prefix string) (Attrs, bool, error) {
	if fl, ok := b.(FirstLister); ok {
		return fl.First(ctx, prefix)
	}
	var out Attrs
	found := false
	err := b.List(ctx, prefix, func(a Attrs) error {
		out, found = a, true
		return errFirstStop
	})
	if err != nil && !errors.Is(err, errFirstStop) {
		return Attrs{}, false, err
	}
	return out, found, nil
}

// First asks the store for a one-key page.
func (c *cloudBucket) First(ctx context.Context, prefix string) (Attrs, bool, error) {
	if c.closed.Load() {
		return Attrs{}, false, fmt.Errorf("list %s: %w", prefix, errBucketClosed)
	}
	if err := validatePrefix(prefix); err != nil {
		return Attrs{}, false, fmt.Errorf("list %s: %w", prefix, err)
	}
	token := blob.FirstPageToken
	for {
		objs, next, err := c.b.ListPage(ctx, token, 1, &blob.ListOptions{Prefix: prefix})
		if err != nil {
			return Attrs{}, false, fmt.Errorf("list %s: %w", prefix, classify(err))
		}
		for _, o := range objs {
			if !o.IsDir {
				return Attrs{Key: o.Key, Size: o.Size, ModTime: o.ModTime}, true, nil
			}
		}
		if len(next) == 0 {
			return Attrs{}, false, nil
		}
		token = next
	}
}

func (mb *metricsBucket) First(ctx context.Context, prefix string) (Attrs, bool, error) {
	start := time.Now()
	a, ok, err := First(ctx, mb.b, prefix)
	mb.m.observe(OpList, start, err)
	return a, ok, err
}

func (s *subBucket) First(ctx context.Context, prefix string) (Attrs, bool, error) {
	if s.err != nil {
		return Attrs{}, false, fmt.Errorf("list %s: %w", prefix, s.err)
	}
	if err := validatePrefix(prefix); err != nil {
		return Attrs{}, false, fmt.Errorf("list %s: %w", prefix, err)
	}
	a, ok, err := First(ctx, s.b, s.prefix+prefix)
	a.Key = strings.TrimPrefix(a.Key, s.prefix)
	return a, ok, err
}
