package meta

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/bits"

	"github.com/compactord/compactord/internal/storage"
)

// KnownFlags is every feature-flag bit lance 12 defines. A bit outside it
// was set by a newer writer; verify reports it, since neither reading nor
// writing can honour a flag whose meaning is unknown.
const KnownFlags uint64 = knownFlags

// Detect reports whether the location holds a Lance dataset: its newest
// _versions/*.manifest ends in the "LANC" footer magic. compactord's
// private format uses the same _versions/ names with a different framing,
// so the name alone cannot tell them apart; only the last four bytes are
// read, so detection costs one listing and one small ranged read whatever
// the manifest's size. A location without any manifest is not a dataset
// (false, nil): the caller decides what that means.
func Detect(ctx context.Context, b storage.Bucket) (bool, error) {
	key, size, err := newestManifest(ctx, b)
	if err != nil {
		if errors.Is(err, ErrNoTable) {
			return false, nil
		}
		return false, err
	}
	if size < footerLen {
		return false, nil
	}
	r, err := b.NewRangeReader(ctx, key, size-int64(len(magic)), int64(len(magic)))
	if err != nil {
		if storage.IsNotFound(err) {
			// Cleaned up between the listing and the read: only a newer
			// version can have replaced it, so look again once.
			return false, fmt.Errorf("detect the table format: %s vanished while being read; try again", key)
		}
		return false, fmt.Errorf("detect the table format: read %s: %w", key, err)
	}
	defer r.Close()
	tail := make([]byte, len(magic))
	if _, err := io.ReadFull(r, tail); err != nil {
		return false, fmt.Errorf("detect the table format: read %s: %w", key, err)
	}
	return string(tail) == magic, nil
}

// newestManifest is the key and size of the newest manifest: the first key
// listed under V2 naming, the highest version of a full listing otherwise.
func newestManifest(ctx context.Context, b storage.Bucket) (string, int64, error) {
	a, ok, err := storage.First(ctx, b, VersionsDir)
	if err != nil {
		return "", 0, fmt.Errorf("detect the table format: %w", err)
	}
	if !ok {
		return "", 0, ErrNoTable
	}
	if _, n, ok := ParseManifestKey(a.Key); ok && n == NamingV2 {
		return a.Key, a.Size, nil
	}
	var best storage.Attrs
	var bestV uint64
	err = b.List(ctx, VersionsDir, func(a storage.Attrs) error {
		if v, _, ok := ParseManifestKey(a.Key); ok && v >= bestV {
			best, bestV = a, v
		}
		return nil
	})
	if err != nil {
		return "", 0, fmt.Errorf("detect the table format: %w", err)
	}
	if bestV == 0 {
		return "", 0, ErrNoTable
	}
	return best.Key, best.Size, nil
}

// FlagNames names the feature-flag bits set in bs, lowest bit first; a bit
// lance 12 does not define is "unknown flag N".
func FlagNames(bs uint64) []string {
	out := []string{}
	for bs != 0 {
		bit := uint64(1) << bits.TrailingZeros64(bs)
		bs &^= bit
		if n, ok := flagNames[bit]; ok {
			out = append(out, n)
		} else {
			out = append(out, fmt.Sprintf("unknown flag %d", bit))
		}
	}
	return out
}
