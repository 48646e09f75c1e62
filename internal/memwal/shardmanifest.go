package memwal

import (
	"context"
	"errors"
	"fmt"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

var errStop = errors.New("stop")

// ReadShardManifest returns the newest version of a shard's manifest, or
// (nil, nil) when the shard was never claimed.
func ReadShardManifest(ctx context.Context, b storage.Bucket, shard string) (*pb.ShardManifest, error) {
	latest, found, err := LatestShardVersion(ctx, b, shard)
	if err != nil || !found {
		return nil, err
	}
	return ReadShardManifestVersion(ctx, b, shard, latest)
}

// LatestShardVersion returns the newest shard-manifest version. Inverted
// version numbers make the newest the first key of the listing, so this
// reads one entry.
func LatestShardVersion(ctx context.Context, b storage.Bucket, shard string) (uint64, bool, error) {
	if err := ValidateShardName(shard); err != nil {
		return 0, false, err
	}
	var latest uint64
	found := false
	err := b.List(ctx, ShardManifestDir(shard), func(a storage.Attrs) error {
		v, ok := ParseShardManifestKey(shard, a.Key)
		if !ok {
			return nil // a stray object: not a version
		}
		latest, found = v, true
		return errStop
	})
	if err != nil && !errors.Is(err, errStop) {
		return 0, false, fmt.Errorf("list manifests of shard %q: %w", shard, err)
	}
	return latest, found, nil
}

// ReadShardManifestVersion loads version v of a shard manifest.
func ReadShardManifestVersion(ctx context.Context, b storage.Bucket, shard string, v uint64) (*pb.ShardManifest, error) {
	key := ShardManifestKey(shard, v)
	data, err := b.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read shard manifest %s: %w", key, err)
	}
	return decodeShardManifest(shard, key, v, data)
}

func decodeShardManifest(shard, key string, v uint64, data []byte) (*pb.ShardManifest, error) {
	m := &pb.ShardManifest{}
	if err := table.DecodeProto("shard manifest "+key, data, m); err != nil {
		return nil, err
	}
	if m.Version != v || m.ShardId != shard {
		return nil, fmt.Errorf("shard manifest %s: %w: records shard %q version %d", key, table.ErrCorrupt, m.ShardId, m.Version)
	}
	return m, nil
}

// ReadWALEntry loads and checks the WAL entry at position.
func ReadWALEntry(ctx context.Context, b storage.Bucket, shard string, position uint64) (*pb.WalEntry, error) {
	key := WALKey(shard, position)
	data, err := b.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read WAL entry %s: %w", key, err)
	}
	return decodeWALAt(shard, position, key, data)
}

func decodeWALAt(shard string, position uint64, key string, data []byte) (*pb.WalEntry, error) {
	e, err := DecodeWALEntry(key, data)
	if err != nil {
		return nil, err
	}
	if e.ShardId != shard || e.Position != position {
		return nil, fmt.Errorf("WAL entry %s: %w: records shard %q position %d", key, ErrCorruptWAL, e.ShardId, e.Position)
	}
	return e, nil
}

// ListWALPositions returns the positions present in a shard's WAL, in
// ascending order.
func ListWALPositions(ctx context.Context, b storage.Bucket, shard string) ([]uint64, error) {
	var out []uint64
	err := b.List(ctx, WALDir(shard), func(a storage.Attrs) error {
		if p, ok := ParseWALKey(shard, a.Key); ok {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list WAL of shard %q: %w", shard, err)
	}
	return out, nil
}

// CheckUnflushed reads, end to end, the WAL entries of a shard above its
// replay cursor: they must be dense up to the last one present (and to the
// position the shard manifest saw), each must pass its frame and checksum
// checks and name its shard and position, and its records must decode
// against schema. These entries hold acknowledged data no SSTable holds
// yet; every problem found is one error.
func CheckUnflushed(ctx context.Context, b storage.Bucket, schema *pb.Schema, sm *pb.ShardManifest) ([]error, error) {
	shard := sm.ShardId
	positions, err := ListWALPositions(ctx, b, shard)
	if err != nil {
		return nil, err
	}
	var problems []error
	cursor := sm.ReplayAfterWalPosition
	last := cursor
	var present []uint64
	for _, p := range positions {
		if p <= cursor {
			continue
		}
		if p != last+1 {
			problems = append(problems, fmt.Errorf("WAL entries %d..%d above the replay cursor %d are missing (next present is %d): replay stops there", last+1, p-1, cursor, p))
		}
		last = p
		present = append(present, p)
	}
	if seen := sm.WalPositionLastSeen; seen > last {
		problems = append(problems, fmt.Errorf("WAL entries %d..%d are missing (the shard manifest saw position %d)", last+1, seen, seen))
	}
	for _, p := range present {
		e, err := ReadWALEntry(ctx, b, shard, p)
		if err != nil {
			problems = append(problems, err)
			continue
		}
		for i, wr := range e.Records {
			if _, err := decodeRecord(schema, wr); err != nil {
				problems = append(problems, fmt.Errorf("WAL entry %s: %w: record %d: %v", WALKey(shard, p), ErrCorruptWAL, i+1, err))
				break
			}
		}
	}
	return problems, nil
}
