// Package bucketing is the bucket transform of LanceDB's MemWAL sharding
// spec, shared by the Go MemWAL writer and the test oracle's key routing.
// It is a leaf (it imports nothing of compactord), so that the test oracle
// can use it without importing the MemWAL format package.
package bucketing

import (
	"encoding/binary"
	"math/bits"
)

// Hash is MurmurHash3 x86_32 with seed 0, the hash of LanceDB's bucket
// transform (as Iceberg's: integers as 8-byte little-endian int64, strings
// as their UTF-8 bytes; bucket = (hash & 0x7fffffff) % N).
func Hash(data []byte) uint32 {
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
