package memwal

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/compactord/compactord/internal/table"
)

// ShardDir is the folder of one shard.
func ShardDir(shard string) string { return table.MemWalDir + shard + "/" }

// ShardManifestDir holds the shard-manifest versions.
func ShardManifestDir(shard string) string { return ShardDir(shard) + "manifest/" }

// WALDir holds the WAL entries.
func WALDir(shard string) string { return ShardDir(shard) + "wal/" }

// SSTableDir holds the flushed SSTables.
func SSTableDir(shard string) string { return ShardDir(shard) + "sst/" }

// ShardManifestKey names version v of a shard manifest. The number is
// inverted, as in table.ManifestKey, so that a listing returns the newest
// version first.
func ShardManifestKey(shard string, v uint64) string {
	return fmt.Sprintf("%s%020d.binpb", ShardManifestDir(shard), math.MaxUint64-v)
}

// ParseShardManifestKey returns the version a shard-manifest key names.
func ParseShardManifestKey(shard, key string) (uint64, bool) {
	n, ok := parseNumbered(key, ShardManifestDir(shard), ".binpb")
	if !ok {
		return 0, false
	}
	return math.MaxUint64 - n, true
}

// WALKey names the WAL entry at position.
func WALKey(shard string, position uint64) string {
	return fmt.Sprintf("%s%020d.wal", WALDir(shard), position)
}

// ParseWALKey returns the position a WAL key names.
func ParseWALKey(shard, key string) (uint64, bool) {
	return parseNumbered(key, WALDir(shard), ".wal")
}

// SSTableKey names an SSTable file. The uuid keeps a retried flush of the
// same generation from overwriting the file of an attempt whose outcome is
// unknown.
func SSTableKey(shard string, generation uint64, uuid string) string {
	return fmt.Sprintf("%s%020d-%s.parquet", SSTableDir(shard), generation, uuid)
}

func parseNumbered(key, dir, suffix string) (uint64, bool) {
	name, ok := strings.CutPrefix(key, dir)
	if !ok {
		return 0, false
	}
	name, ok = strings.CutSuffix(name, suffix)
	if !ok || len(name) != 20 {
		return 0, false
	}
	n, err := strconv.ParseUint(name, 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}

// ValidateShardName checks that a shard id is usable as one key segment on
// every backend.
func ValidateShardName(s string) error {
	if s == "" {
		return fmt.Errorf("empty shard name")
	}
	if len(s) > 128 {
		return fmt.Errorf("shard name %.20q...: longer than 128 bytes", s)
	}
	if s[0] == '.' {
		return fmt.Errorf("shard name %q: must not start with '.'", s)
	}
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
		default:
			return fmt.Errorf("shard name %q: only letters, digits, '-', '_' and '.' are allowed", s)
		}
	}
	return nil
}
