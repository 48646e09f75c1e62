package meta

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/compactord/compactord/internal/storage"
)

// ErrNoTable: the location holds no Lance manifest.
var ErrNoTable = errors.New("no Lance dataset here (no manifest under _versions/)")

// Latest finds the newest version. With V2 naming the newest manifest sorts
// first, so this is a one-key listing whatever the number of versions. A
// table with V1 naming needs the whole listing.
//
// Soundness against a concurrent cleaner (LanceDB's or ours): cleanup never
// deletes the newest version, so the first key listed is the head at some
// instant during the call.
func Latest(ctx context.Context, b storage.Bucket) (uint64, Naming, error) {
	a, ok, err := storage.First(ctx, b, VersionsDir)
	if err != nil {
		return 0, 0, fmt.Errorf("find the latest version: %w", err)
	}
	if ok {
		if v, n, ok := ParseManifestKey(a.Key); ok && n == NamingV2 {
			return v, n, nil
		}
	}
	vs, n, err := ListVersions(ctx, b)
	if err != nil {
		return 0, 0, err
	}
	return vs[len(vs)-1], n, nil
}

// ListVersions lists every version, ascending. Detached manifests are not
// versions of the main line and are left out.
func ListVersions(ctx context.Context, b storage.Bucket) ([]uint64, Naming, error) {
	var vs []uint64
	naming := NamingV2
	seen := map[Naming]bool{}
	err := b.List(ctx, VersionsDir, func(a storage.Attrs) error {
		if v, n, ok := ParseManifestKey(a.Key); ok {
			vs = append(vs, v)
			seen[n] = true
			naming = n
		}
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("list versions: %w", err)
	}
	if len(vs) == 0 {
		return nil, 0, ErrNoTable
	}
	if len(seen) > 1 {
		// A migration between the schemes is in progress or was abandoned;
		// which name wins is Lance's decision, not ours to guess.
		return nil, 0, fmt.Errorf("list versions: both V1 and V2 manifest names under %s; finish or undo the naming migration with LanceDB first", VersionsDir)
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i] < vs[j] })
	return vs, naming, nil
}

// ReadVersion reads and decodes version v's manifest file.
func ReadVersion(ctx context.Context, b storage.Bucket, n Naming, v uint64) (*ManifestFile, error) {
	key := ManifestKey(n, v)
	data, err := b.Get(ctx, key)
	if err != nil {
		if storage.IsNotFound(err) {
			return nil, fmt.Errorf("version %d: %w", v, err)
		}
		return nil, fmt.Errorf("read version %d: %w", v, err)
	}
	f, err := DecodeManifestFile(data)
	if err != nil {
		return nil, &CorruptError{Key: key, Err: err}
	}
	if got := f.Manifest.GetVersion(); got != v {
		return nil, &CorruptError{Key: key, Err: fmt.Errorf("manifest says version %d", got)}
	}
	return f, nil
}

// ReadLatest reads the newest version.
func ReadLatest(ctx context.Context, b storage.Bucket) (*ManifestFile, Naming, error) {
	v, n, err := Latest(ctx, b)
	if err != nil {
		return nil, 0, err
	}
	f, err := ReadVersion(ctx, b, n, v)
	return f, n, err
}
