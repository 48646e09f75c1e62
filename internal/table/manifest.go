package table

import (
	"context"
	"errors"
	"fmt"
	"time"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/storage"
)

// VersionFloor is the age below which no version manifest is ever deleted,
// whatever the retention policy (cleanup judges a version's age by the later
// of its commit timestamp and its object's modification time, and keeps it
// when it cannot tell).
//
// The commit protocol rests on it. A committer puts version h+1 on the
// strength of a fact younger than HintTTL + the commit deadline (a listing
// that showed h as the newest version, or its own put of h): "no version
// above h existed at time t0". A put at h+1 can land below the head only if
// some version h+1 was created after t0 and deleted again before the put,
// which the floor forbids as long as the clock of a host running cleanup is
// not ahead of the object store's clock by more than the floor minus that
// bound (docs/format.md, "Commit protocol").
const VersionFloor = 10 * time.Minute

// ErrNoTable means the root holds no manifest.
var ErrNoTable = errors.New("no table here (no manifest under _versions/)")

// ErrVersionNotFound means the requested version is not retained.
var ErrVersionNotFound = errors.New("version not found")

var errStop = errors.New("stop")

// LatestVersion returns the newest committed version. Inverted names make
// the newest the first key of the listing, so this reads one entry.
func LatestVersion(ctx context.Context, b storage.Bucket) (uint64, error) {
	// Fast path: one one-key page. A stray object sorting first (a temp
	// file, an editor backup) falls back to the full listing.
	if a, ok, err := storage.First(ctx, b, VersionsDir); err != nil {
		return 0, fmt.Errorf("list versions: %w", err)
	} else if !ok {
		return 0, ErrNoTable
	} else if v, ok := ParseManifestKey(a.Key); ok {
		return v, nil
	}
	var latest uint64
	found := false
	err := b.List(ctx, VersionsDir, func(a storage.Attrs) error {
		v, ok := ParseManifestKey(a.Key)
		if !ok {
			return nil
		}
		latest, found = v, true
		return errStop
	})
	if err != nil && !errors.Is(err, errStop) {
		return 0, fmt.Errorf("list versions: %w", err)
	}
	if !found {
		return 0, ErrNoTable
	}
	return latest, nil
}

// ListVersions returns every retained version, newest first.
func ListVersions(ctx context.Context, b storage.Bucket) ([]uint64, error) {
	var out []uint64
	err := b.List(ctx, VersionsDir, func(a storage.Attrs) error {
		if v, ok := ParseManifestKey(a.Key); ok {
			out = append(out, v)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list versions: %w", err)
	}
	return out, nil
}

// ReadManifest loads version v.
func ReadManifest(ctx context.Context, b storage.Bucket, v uint64) (*pb.Manifest, error) {
	key := ManifestKey(v)
	data, err := b.Get(ctx, key)
	if err != nil {
		if storage.IsNotFound(err) {
			return nil, fmt.Errorf("version %d: %w", v, ErrVersionNotFound)
		}
		return nil, fmt.Errorf("read manifest of version %d: %w", v, err)
	}
	m := &pb.Manifest{}
	if err := DecodeProto("manifest "+key, data, m); err != nil {
		return nil, err
	}
	if m.Version != v {
		return nil, fmt.Errorf("manifest %s: %w: records version %d", key, ErrCorrupt, m.Version)
	}
	return m, nil
}

// ReadLatest loads the newest version.
func ReadLatest(ctx context.Context, b storage.Bucket) (*pb.Manifest, error) {
	v, err := LatestVersion(ctx, b)
	if err != nil {
		return nil, err
	}
	return ReadManifest(ctx, b, v)
}

// ReadTransaction loads a transaction file.
func ReadTransaction(ctx context.Context, b storage.Bucket, key string) (*pb.Transaction, error) {
	data, err := b.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read transaction %s: %w", key, err)
	}
	t := &pb.Transaction{}
	if err := DecodeProto("transaction "+key, data, t); err != nil {
		return nil, err
	}
	return t, nil
}

// FragmentByID returns the fragment with id, or nil.
func FragmentByID(m *pb.Manifest, id uint32) *pb.Fragment {
	for _, f := range m.Fragments {
		if f.Id == id {
			return f
		}
	}
	return nil
}

// LiveRows is the number of undeleted rows of a fragment.
func LiveRows(f *pb.Fragment) uint64 {
	if f.DeletionFile == nil {
		return f.PhysicalRows
	}
	return f.PhysicalRows - f.DeletionFile.NumDeleted
}

// IsSystemIndex reports whether an index is a system index ("__mem_wal",
// "__frag_reuse").
func IsSystemIndex(ix *pb.IndexMetadata) bool {
	return len(ix.Type) >= 2 && ix.Type[:2] == "__"
}

// System index names.
const (
	MemWalIndexName    = "__mem_wal"
	FragReuseIndexName = "__frag_reuse"
)

// FindIndex returns the first segment named name, or nil.
func FindIndex(m *pb.Manifest, name string) *pb.IndexMetadata {
	for _, ix := range m.Indices {
		if ix.Name == name {
			return ix
		}
	}
	return nil
}

// MemWal returns the MemWAL details, or nil when the table has none.
func MemWal(m *pb.Manifest) *pb.MemWalIndexDetails {
	if ix := FindIndex(m, MemWalIndexName); ix != nil {
		return ix.GetMemWal()
	}
	return nil
}

// FragReuse returns the FRI details, or nil.
func FragReuse(m *pb.Manifest) *pb.FragReuseIndexDetails {
	if ix := FindIndex(m, FragReuseIndexName); ix != nil {
		return ix.GetFragReuse()
	}
	return nil
}
