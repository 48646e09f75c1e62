package meta

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"strings"

	"github.com/compactord/compactord/internal/storage"
)

// KnownFlags is every feature-flag bit lance 12 defines. A bit outside it
// was set by a newer writer; verify reports it, since neither reading nor
// writing can honour a flag whose meaning is unknown.
const KnownFlags uint64 = knownFlags

// Detect reports whether the location holds a Lance dataset: its newest
// _versions/*.manifest ends in the "LANC" footer magic. compactord's
// private format uses the same _versions/ names with a different framing
// (it starts with "CMPD"), so the name alone cannot tell them apart; only
// the last four bytes are read, so detection normally costs one listing
// and one small ranged read whatever the manifest's size.
//
// A damaged newest manifest must not make a Lance dataset look like some
// other format (verify would then report nonsense instead of naming the
// damaged object), so when the newest manifest is neither Lance nor
// private, up to a few older manifests decide, and failing those, Lance's
// own data and transaction file names. A location without any manifest is
// not a dataset (false, nil): the caller decides what that means.
func Detect(ctx context.Context, b storage.Bucket) (bool, error) {
	key, size, err := newestManifest(ctx, b)
	if err != nil {
		if errors.Is(err, ErrNoTable) {
			return false, nil
		}
		return false, err
	}
	kind, err := manifestKind(ctx, b, key, size)
	if err != nil || kind != kindUnknown {
		return kind == kindLance, err
	}
	const maxOlder = 3
	checked := 0
	errStop := errors.New("stop")
	err = b.List(ctx, VersionsDir, func(a storage.Attrs) error {
		if _, _, ok := ParseManifestKey(a.Key); !ok || a.Key == key {
			return nil
		}
		if kind, err = manifestKind(ctx, b, a.Key, a.Size); err != nil || kind != kindUnknown {
			return errStop
		}
		if checked++; checked >= maxOlder {
			return errStop
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return false, fmt.Errorf("detect the table format: %w", err)
	}
	if kind != kindUnknown {
		return kind == kindLance, nil
	}
	for _, p := range []struct{ dir, suffix string }{{DataDir, ".lance"}, {TransactionsDir, ".txn"}} {
		a, ok, err := storage.First(ctx, b, p.dir)
		if err != nil {
			return false, fmt.Errorf("detect the table format: %w", err)
		}
		if ok && strings.HasSuffix(a.Key, p.suffix) {
			return true, nil
		}
	}
	return false, nil
}

type formatKind int

const (
	kindUnknown formatKind = iota
	kindLance
	kindPrivate
)

// privateMagic starts every metadata object of compactord's private format.
const privateMagic = "CMPD"

// manifestKind reads a manifest's last four bytes (and, if they are not
// Lance's, its first four).
func manifestKind(ctx context.Context, b storage.Bucket, key string, size int64) (formatKind, error) {
	if size < int64(len(magic)) {
		return kindUnknown, nil
	}
	read := func(off int64) (string, error) {
		r, err := b.NewRangeReader(ctx, key, off, int64(len(magic)))
		if err != nil {
			if storage.IsNotFound(err) {
				return "", nil // cleaned up since the listing: says nothing
			}
			return "", fmt.Errorf("detect the table format: read %s: %w", key, err)
		}
		defer r.Close()
		buf := make([]byte, len(magic))
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", fmt.Errorf("detect the table format: read %s: %w", key, err)
		}
		return string(buf), nil
	}
	tail, err := read(size - int64(len(magic)))
	if err != nil {
		return kindUnknown, err
	}
	if tail == magic {
		return kindLance, nil
	}
	head, err := read(0)
	if err != nil {
		return kindUnknown, err
	}
	if head == privateMagic {
		return kindPrivate, nil
	}
	return kindUnknown, nil
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
		if n, ok := flagNames[bit]; ok && bit&knownFlags != 0 {
			out = append(out, n)
		} else if ok {
			// A newer Lance's flag: its number too, as the refusals print it.
			out = append(out, fmt.Sprintf("%s (flag %d)", n, bit))
		} else {
			out = append(out, fmt.Sprintf("unknown flag %d", bit))
		}
	}
	return out
}
