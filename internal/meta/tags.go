package meta

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/compactord/compactord/internal/storage"
)

// Tag is one _refs/tags/{name}.json. Only the version matters to
// maintenance; the rest is shown by inspect.
type Tag struct {
	Name    string  `json:"-"`
	Branch  *string `json:"branch"`
	Version uint64  `json:"version"`
	// CreatedAt and UpdatedAt are RFC 3339 strings as LanceDB writes them.
	CreatedAt    string `json:"createdAt,omitempty"`
	UpdatedAt    string `json:"updatedAt,omitempty"`
	ManifestSize uint64 `json:"manifestSize,omitempty"`
}

// LoadTags reads every tag of the main branch. A tag that cannot be parsed
// fails the call: cleanup and trim must not lose what a tag protects
// because its file was unreadable.
func LoadTags(ctx context.Context, b storage.Bucket) ([]Tag, error) {
	var keys []string
	if err := b.List(ctx, TagsDir, func(a storage.Attrs) error {
		if strings.HasSuffix(a.Key, ".json") && !strings.Contains(strings.TrimPrefix(a.Key, TagsDir), "/") {
			keys = append(keys, a.Key)
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("list tags: %w", err)
	}
	tags := make([]Tag, 0, len(keys))
	for _, k := range keys {
		data, err := b.Get(ctx, k)
		if err != nil {
			if storage.IsNotFound(err) {
				continue // deleted since the listing
			}
			return nil, fmt.Errorf("read tag %s: %w", k, err)
		}
		t, err := DecodeTag(data)
		if err != nil {
			return nil, &CorruptError{Key: k, Err: err}
		}
		if t.Branch != nil && *t.Branch != "" {
			// A tag of another branch pins that branch's versions, which
			// live under tree/; the main line's cleanup may not touch them
			// either way, and counting it here would pin the wrong number.
			continue
		}
		t.Name = strings.TrimSuffix(strings.TrimPrefix(k, TagsDir), ".json")
		tags = append(tags, t)
	}
	return tags, nil
}

// TaggedVersions is the set of versions some tag names.
func TaggedVersions(tags []Tag) map[uint64][]string {
	out := map[uint64][]string{}
	for _, t := range tags {
		out[t.Version] = append(out[t.Version], t.Name)
	}
	return out
}

// DecodeTag parses one tag file.
func DecodeTag(data []byte) (Tag, error) {
	var t Tag
	if err := json.Unmarshal(data, &t); err != nil {
		return Tag{}, err
	}
	if t.Version == 0 {
		return Tag{}, fmt.Errorf("tag names no version")
	}
	return t, nil
}
