package lancedb

import (
	"encoding/binary"
	"math/bits"
)

// Bucket is the bucket LanceDB 0.39's bucket LSM spec routes an integer
// key to: Iceberg's bucket transform, MurmurHash3 x86_32 (seed 0) of the
// key as an 8-byte little-endian int64, (hash & 0x7fffffff) % n. Checked
// against LanceDB (it refuses a merge-insert whose rows span buckets, and
// the oracle splits by this function; TestBucketMatchesLanceDB).
func Bucket(key int64, n int) int {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(key))
	return int(murmur3x86_32(b[:]) & 0x7fffffff % uint32(n))
}

// BucketString is Bucket for a utf8 key (its UTF-8 bytes).
func BucketString(key string, n int) int {
	return int(murmur3x86_32([]byte(key)) & 0x7fffffff % uint32(n))
}

func murmur3x86_32(data []byte) uint32 {
	const c1, c2 = 0xcc9e2d51, 0x1b873593
	var h uint32
	n := len(data)
	i := 0
	for ; i+4 <= n; i += 4 {
		k := binary.LittleEndian.Uint32(data[i:])
		k *= c1
		k = bits.RotateLeft32(k, 15)
		k *= c2
		h ^= k
		h = bits.RotateLeft32(h, 13)
		h = h*5 + 0xe6546b64
	}
	var k uint32
	switch n & 3 {
	case 3:
		k ^= uint32(data[i+2]) << 16
		fallthrough
	case 2:
		k ^= uint32(data[i+1]) << 8
		fallthrough
	case 1:
		k ^= uint32(data[i])
		k *= c1
		k = bits.RotateLeft32(k, 15)
		k *= c2
		h ^= k
	}
	h ^= uint32(n)
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}
