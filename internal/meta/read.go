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

// Latest finds the newest version.
//
// It starts from the version hint: when the hinted manifest exists, it
// probes the versions above it one existence check at a time until one is
// absent. That costs a GET and two HEADs whatever the number of versions and
// on every backend; a listing does not (a directory read on file://, a sort
// of every key in memory). Without a usable hint (none, undecodable, naming
// a version that is not there, or too far behind) it lists: with V2 naming
// the newest manifest sorts first, so a one-key listing; with V1 naming the
// whole listing.
//
// Soundness against a concurrent cleaner (LanceDB's or ours): versions are
// consecutive (each is put-if-absent at the previous one plus 1), a cleaner
// never deletes the newest version, and it deletes versions older than a
// cutoff. Timestamps never decrease along the versions (verify checks it),
// so the untagged versions a finished cleanup keeps are a suffix ending at
// the head. A hinted version that was cleaned is absent, and Latest lists.
// A hinted version in that suffix probes along it to its end, the head.
// The probe can stop short only when the hint names a version kept by a tag
// (or not yet deleted by a cleaner that deletes versions out of order:
// compactord's deletes them one at a time, oldest first, LanceDB's may
// not; the concurrency campaign on S3 saw that happen with a cleanup that
// deleted them concurrently) while a cleaner removed the version right
// above it;
// every writer (LanceDB and compactord) rewrites the hint after each
// commit, so that needs a hint older than a range a cleaner already
// removed: a hint write overtaken by an older writer's and not rewritten
// since, and a cleanup of the versions above it before any writer's next
// commit rewrites the hint. A commit that probed short would put a version
// the cleaner removed, below the head: that window is the price of not
// listing, and the listing is what a reader without a hint pays.
func Latest(ctx context.Context, b storage.Bucket) (uint64, Naming, error) {
	if v, ok, err := latestFromHint(ctx, b); err != nil {
		return 0, 0, fmt.Errorf("find the latest version: %w", err)
	} else if ok {
		return v, NamingV2, nil
	}
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

// maxHintProbes bounds the walk above the hint; a hint further behind than
// this is cheaper to replace by a listing.
const maxHintProbes = 64

// latestFromHint probes upward from the hint. ok is false when the hint
// cannot be used and the caller must list.
func latestFromHint(ctx context.Context, b storage.Bucket) (uint64, bool, error) {
	data, err := b.Get(ctx, HintKey)
	if err != nil {
		if storage.IsNotFound(err) {
			return 0, false, nil
		}
		return 0, false, err
	}
	h, err := DecodeHint(data)
	if err != nil || h == 0 {
		return 0, false, nil // undecodable hints are advisory: list instead
	}
	switch ok, err := exists(ctx, b, ManifestKey(NamingV2, h)); {
	case err != nil:
		return 0, false, err
	case !ok:
		return 0, false, nil // cleaned, never written, or a V1 table
	}
	v := h
	for range maxHintProbes {
		ok, err := exists(ctx, b, ManifestKey(NamingV2, v+1))
		if err != nil {
			return 0, false, err
		}
		if !ok {
			return v, true, nil
		}
		v++
	}
	return 0, false, nil
}

func exists(ctx context.Context, b storage.Bucket, key string) (bool, error) {
	_, err := b.Attributes(ctx, key)
	switch {
	case err == nil:
		return true, nil
	case storage.IsNotFound(err):
		return false, nil
	}
	return false, err
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

// readLatestAttempts bounds ReadLatest's look-ups.
const readLatestAttempts = 5

// ReadLatest reads the newest version. Between finding it and reading it a
// writer can commit the next version and a cleanup (retaining one version)
// remove the one found; a cleanup never removes the newest, so a version
// found gone means a newer one exists, and ReadLatest looks again.
func ReadLatest(ctx context.Context, b storage.Bucket) (*ManifestFile, Naming, error) {
	var err error
	for range readLatestAttempts {
		var v uint64
		var n Naming
		if v, n, err = Latest(ctx, b); err != nil {
			return nil, 0, err
		}
		var f *ManifestFile
		if f, err = ReadVersion(ctx, b, n, v); err == nil || !storage.IsNotFound(err) {
			return f, n, err
		}
	}
	return nil, 0, err
}
