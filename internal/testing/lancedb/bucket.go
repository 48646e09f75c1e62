package lancedb

import (
	"encoding/binary"

	"github.com/compactord/compactord/internal/memwal/bucketing"
)

// Bucket is the bucket LanceDB 0.39's bucket LSM spec routes an integer
// key to: Iceberg's bucket transform, MurmurHash3 x86_32 (seed 0) of the
// key as an 8-byte little-endian int64, (hash & 0x7fffffff) % n. Checked
// against LanceDB (it refuses a merge-insert whose rows span buckets, and
// the oracle splits by this function; TestBucketMatchesLanceDB).
func Bucket(key int64, n int) int {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(key))
	return int(bucketing.Hash(b[:]) & 0x7fffffff % uint32(n))
}
