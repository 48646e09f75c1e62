package storage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// First finds the lexically first object under prefix with one unsorted
// directory read, when prefix ends at a directory boundary ("_versions/")
// and the first entry is a file: latest-version discovery on every commit,
// in a directory that holds every retained version. Other cases, and an
// entry removed between the read and its stat, take the ordered walk.
func (b *fileBucket) First(ctx context.Context, prefix string) (Attrs, bool, error) {
	walk := func() (Attrs, bool, error) { return First(ctx, listOnly{b}, prefix) }
	if err := validatePrefix(prefix); err != nil {
		return Attrs{}, false, fmt.Errorf("list %s: %w", prefix, err)
	}
	if !strings.HasSuffix(prefix, "/") {
		return walk()
	}
	if err := ctx.Err(); err != nil {
		return Attrs{}, false, fmt.Errorf("list %s: %w", prefix, err)
	}
	dir := filepath.Join(b.root, filepath.FromSlash(strings.TrimSuffix(prefix, "/")))
	f, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return Attrs{}, false, nil
	}
	if err != nil {
		return Attrs{}, false, fmt.Errorf("list %s: %w", prefix, err)
	}
	entries, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return Attrs{}, false, fmt.Errorf("list %s: %w", prefix, err)
	}
	var first fs.DirEntry
	firstKey := ""
	for _, e := range entries {
		k, ok := listOrderKey(e)
		if ok && (first == nil || k < firstKey) {
			first, firstKey = e, k
		}
	}
	if first == nil {
		return Attrs{}, false, nil
	}
	if !first.Type().IsRegular() {
		return walk()
	}
	fi, err := first.Info()
	if err != nil {
		return walk()
	}
	return Attrs{Key: prefix + first.Name(), Size: fi.Size(), ModTime: fi.ModTime()}, true, nil
}

// listOnly hides a bucket's First, so that First falls back to List.
type listOnly struct{ Bucket }
