package memwal

import (
	"context"
	"fmt"
	"math/bits"
	"sort"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
)

// MemWAL names: a shard's manifests and WAL entries are named by their
// version or position written as 64 binary digits, least significant bit
// first (the bit-reversed number), which spreads consecutive keys across
// object-store partitions. Version 1 is "1000…0", 5 is "1010…0".

// BitName is the bit-reversed 64-digit name of n.
func BitName(n uint64) string { return fmt.Sprintf("%064b", bits.Reverse64(n)) }

// ParseBitName is the inverse of BitName.
func ParseBitName(s string) (uint64, bool) {
	if len(s) != 64 || strings.Trim(s, "01") != "" {
		return 0, false
	}
	x, err := strconv.ParseUint(s, 2, 64)
	if err != nil {
		return 0, false
	}
	return bits.Reverse64(x), true
}

// ShardDir is a shard's directory.
func ShardDir(shard string) string { return meta.MemWalDir + shard + "/" }

// ShardManifestDir holds a shard's manifests.
func ShardManifestDir(shard string) string { return ShardDir(shard) + "manifest/" }

// ShardManifestKey is the key of a shard manifest version.
func ShardManifestKey(shard string, v uint64) string {
	return ShardManifestDir(shard) + BitName(v) + ".binpb"
}

// ShardHintKey is the shard's version hint (a different name from the
// table's hint).
func ShardHintKey(shard string) string { return ShardManifestDir(shard) + "version_hint.json" }

// WALDir holds a shard's WAL entries.
func WALDir(shard string) string { return ShardDir(shard) + "wal/" }

// WALKey is the key of the WAL entry at a 1-based position.
func WALKey(shard string, pos uint64) string { return WALDir(shard) + BitName(pos) + ".arrow" }

// GenerationDir is a flushed generation's directory, from the path the
// shard manifest records ("{rand8}_gen_{N}").
func GenerationDir(shard, path string) string { return ShardDir(shard) + strings.Trim(path, "/") + "/" }

// ParseGenerationDir returns the generation a directory name claims.
func ParseGenerationDir(name string) (uint64, bool) {
	_, n, ok := strings.Cut(name, "_gen_")
	if !ok {
		return 0, false
	}
	g, err := strconv.ParseUint(n, 10, 64)
	return g, err == nil && g > 0
}

// ShardState is a shard's newest manifest and what its directories hold.
type ShardState struct {
	ID string
	// Manifest is the newest shard manifest; Version its version.
	Manifest *pb.ShardManifest
	// ManifestVersions lists every manifest version present, ascending.
	ManifestVersions []uint64
}

// ListShards returns the shard ids that have a directory under _mem_wal/.
func ListShards(ctx context.Context, b storage.Bucket) ([]string, error) {
	seen := map[string]bool{}
	err := b.List(ctx, meta.MemWalDir, func(a storage.Attrs) error {
		rest := strings.TrimPrefix(a.Key, meta.MemWalDir)
		if id, _, ok := strings.Cut(rest, "/"); ok && id != "" {
			seen[id] = true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list MemWAL shards: %w", err)
	}
	out := make([]string, 0, len(seen))
	for id := range seen {
		out = append(out, id)
	}
	sort.Strings(out)
	return out, nil
}

// DecodeShardManifest decodes a raw ShardManifest.
func DecodeShardManifest(data []byte) (*pb.ShardManifest, error) {
	m := &pb.ShardManifest{}
	if err := proto.Unmarshal(data, m); err != nil {
		return nil, err
	}
	return m, nil
}

// EncodeShardManifest is a shard manifest's bytes.
func EncodeShardManifest(m *pb.ShardManifest) ([]byte, error) { return marshal.Marshal(m) }

// ReadShard lists a shard's manifests and reads the newest. A shard
// directory without any manifest returns a nil Manifest: a writer crashed
// before its first claim, and nothing in it is referenced.
func ReadShard(ctx context.Context, b storage.Bucket, shard string) (*ShardState, error) {
	st := &ShardState{ID: shard}
	dir := ShardManifestDir(shard)
	err := b.List(ctx, dir, func(a storage.Attrs) error {
		name, ok := strings.CutSuffix(strings.TrimPrefix(a.Key, dir), ".binpb")
		if !ok {
			return nil
		}
		if v, ok := ParseBitName(name); ok {
			st.ManifestVersions = append(st.ManifestVersions, v)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list manifests of shard %s: %w", shard, err)
	}
	if len(st.ManifestVersions) == 0 {
		return st, nil
	}
	sort.Slice(st.ManifestVersions, func(i, j int) bool { return st.ManifestVersions[i] < st.ManifestVersions[j] })
	m, err := ReadShardManifest(ctx, b, shard, st.ManifestVersions[len(st.ManifestVersions)-1])
	if err != nil {
		return nil, err
	}
	st.Manifest = m
	return st, nil
}

// ReadShardManifest reads version v of a shard's manifest. An absent one
// is an error that matches storage.IsNotFound; one that does not decode,
// or names another version, is corrupt (meta.ErrCorrupt).
func ReadShardManifest(ctx context.Context, b storage.Bucket, shard string, v uint64) (*pb.ShardManifest, error) {
	key := ShardManifestKey(shard, v)
	data, err := b.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read shard manifest %s: %w", key, err)
	}
	m, err := DecodeShardManifest(data)
	if err != nil {
		return nil, &meta.CorruptError{Key: key, Err: err}
	}
	if m.GetVersion() != v {
		return nil, &meta.CorruptError{Key: key, Err: fmt.Errorf("shard manifest says version %d", m.GetVersion())}
	}
	return m, nil
}

// ListWAL returns the WAL positions present for a shard, ascending.
func ListWAL(ctx context.Context, b storage.Bucket, shard string) ([]uint64, error) {
	dir := WALDir(shard)
	var out []uint64
	err := b.List(ctx, dir, func(a storage.Attrs) error {
		name, ok := strings.CutSuffix(strings.TrimPrefix(a.Key, dir), ".arrow")
		if !ok {
			return nil
		}
		if p, ok := ParseBitName(name); ok {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list WAL of shard %s: %w", shard, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}
