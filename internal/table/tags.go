package table

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/compactord/compactord/internal/storage"
)

// LoadTags reads `_tags/{name}`, each holding a version number, as a map
// from version to tag name.
func LoadTags(ctx context.Context, b storage.Bucket) (map[uint64]string, error) {
	tags := map[uint64]string{}
	var keys []string
	if err := b.List(ctx, TagsDir, func(a storage.Attrs) error { keys = append(keys, a.Key); return nil }); err != nil {
		return nil, fmt.Errorf("list tags: %w", err)
	}
	for _, k := range keys {
		data, err := b.Get(ctx, k)
		if err != nil {
			return nil, fmt.Errorf("read tag %s: %w", k, err)
		}
		v, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
		if err != nil {
			// Failing safe: an unreadable tag stops the caller rather than
			// letting the version it protects lose what it needs.
			return nil, fmt.Errorf("tag %s: not a version number: %q", k, data)
		}
		tags[v] = strings.TrimPrefix(k, TagsDir)
	}
	return tags, nil
}
