package table

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Object keys, relative to the table root (docs/format.md).
const (
	VersionsDir     = "_versions/"
	TransactionsDir = "_transactions/"
	DataDir         = "data/"
	DeletionsDir    = "_deletions/"
	IndicesDir      = "_indices/"
	MemWalDir       = "_mem_wal/"
	LeasesDir       = "_leases/"
	TagsDir         = "_tags/"
)

// ManifestKey names version v. The number is inverted so that a lexical
// listing returns the newest version first, and latest-version discovery is
// one short list call however long the history.
func ManifestKey(v uint64) string {
	return fmt.Sprintf("%s%020d.manifest", VersionsDir, math.MaxUint64-v)
}

// ParseManifestKey is the inverse of ManifestKey.
func ParseManifestKey(key string) (uint64, bool) {
	name, ok := strings.CutPrefix(key, VersionsDir)
	if !ok {
		return 0, false
	}
	name, ok = strings.CutSuffix(name, ".manifest")
	if !ok || len(name) != 20 {
		return 0, false
	}
	inv, err := strconv.ParseUint(name, 10, 64)
	if err != nil {
		return 0, false
	}
	return math.MaxUint64 - inv, true
}

// TransactionKey names a transaction file.
func TransactionKey(readVersion uint64, uuid string) string {
	return fmt.Sprintf("%s%d-%s.txn", TransactionsDir, readVersion, uuid)
}

// DataKey names a fragment data file.
func DataKey(uuid string) string { return DataDir + uuid + ".parquet" }

// DeletionKey names a deletion bitmap.
func DeletionKey(fragment uint32, readVersion uint64, uuid string) string {
	return fmt.Sprintf("%s%d-%d-%s.bin", DeletionsDir, fragment, readVersion, uuid)
}

// IndexDir is the folder of one index segment.
func IndexDir(uuid string) string { return IndicesDir + uuid + "/" }

// RowAddr packs a fragment id and a physical offset.
func RowAddr(fragment uint32, offset uint32) uint64 { return uint64(fragment)<<32 | uint64(offset) }

// SplitRowAddr unpacks a row address.
func SplitRowAddr(addr uint64) (fragment uint32, offset uint32) {
	return uint32(addr >> 32), uint32(addr)
}
