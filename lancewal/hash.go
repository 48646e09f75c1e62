package lancewal

import (
	"encoding/binary"
	"math"
	"math/bits"

	"github.com/google/uuid"

	"github.com/compactord/compactord/internal/memwal/bucketing"
)

// shardNamespace is the UUIDv5 namespace LanceDB derives shard ids in: the
// 16 bytes "LSMWRITE_SHARD01". A shard's id is UUIDv5(namespace, name) with
// name "unsharded" or "bucket-<b>"; checked against the shard directories
// LanceDB 0.39 created (corpus memwal_1, memwal_4). Writers that derive the
// same id write the same shard, which is what makes fencing interoperate.
var shardNamespace = uuid.UUID([16]byte([]byte("LSMWRITE_SHARD01")))

func shardUUID(name string) string { return uuid.NewSHA1(shardNamespace, []byte(name)).String() }

// sipHash13 is SipHash-1-3 with the zero key: Rust's
// std::collections::hash_map::DefaultHasher::new(), which LanceDB's
// memtable hashes primary keys with before they enter the bloom filter.
// (Not xxh64: the bloom_filter.bin files LanceDB 0.39 flushed only match
// this hash; see TestBloomMatchesLanceDB.)
func sipHash13(msg []byte) uint64 {
	v0 := uint64(0x736f6d6570736575)
	v1 := uint64(0x646f72616e646f6d)
	v2 := uint64(0x6c7967656e657261)
	v3 := uint64(0x7465646279746573)
	round := func() {
		v0 += v1
		v1 = bits.RotateLeft64(v1, 13)
		v1 ^= v0
		v0 = bits.RotateLeft64(v0, 32)
		v2 += v3
		v3 = bits.RotateLeft64(v3, 16)
		v3 ^= v2
		v0 += v3
		v3 = bits.RotateLeft64(v3, 21)
		v3 ^= v0
		v2 += v1
		v1 = bits.RotateLeft64(v1, 17)
		v1 ^= v2
		v2 = bits.RotateLeft64(v2, 32)
	}
	n := len(msg)
	i := 0
	for ; i+8 <= n; i += 8 {
		m := binary.LittleEndian.Uint64(msg[i:])
		v3 ^= m
		round()
		v0 ^= m
	}
	last := uint64(n&0xff) << 56
	for j := 0; i+j < n; j++ {
		last |= uint64(msg[i+j]) << (8 * j)
	}
	v3 ^= last
	round()
	v0 ^= last
	v2 ^= 0xff
	round()
	round()
	round()
	return v0 ^ v1 ^ v2 ^ v3
}

// Bloom filter parameters of LanceDB's memtable: 8192 expected keys at a
// false-positive rate of 0.00057, sized as Parquet's split-block bloom
// filter sizes itself (bits = -8·n / ln(1 - p^(1/8)), rounded up to a power
// of two bytes): 32 KiB, the size of every bloom_filter.bin LanceDB wrote.
const (
	bloomExpectedKeys = 8192
	bloomFPP          = 0.00057
	bloomMaxBytes     = 128 << 20
)

// sbbfSalt are the split-block bloom filter's salts (Parquet's spec).
var sbbfSalt = [8]uint32{0x47b6137b, 0x44974d91, 0x8824ad5b, 0xa2b7289d, 0x705495c7, 0x2df1424b, 0x9efc4947, 0x5c6bfb31}

// bloom is a split-block bloom filter: 32-byte blocks of eight 32-bit
// words, stored raw (no header) as Lance writes bloom_filter.bin.
type bloom struct{ blocks []uint32 }

func bloomBytes(ndv uint64, fpp float64) int {
	nbits := -8 * float64(ndv) / math.Log(1-math.Pow(fpp, 1.0/8))
	n := int(math.Ceil(nbits / 8))
	size := 32
	for size < n && size < bloomMaxBytes {
		size <<= 1
	}
	return size
}

func newBloom() *bloom {
	return &bloom{blocks: make([]uint32, bloomBytes(bloomExpectedKeys, bloomFPP)/4)}
}

func (b *bloom) insert(h uint64) {
	nb := uint64(len(b.blocks) / 8)
	blk := ((h >> 32) * nb) >> 32
	for i, s := range sbbfSalt {
		b.blocks[blk*8+uint64(i)] |= 1 << ((uint32(h) * s) >> 27)
	}
}

func (b *bloom) bytes() []byte {
	out := make([]byte, 0, 4*len(b.blocks))
	for _, w := range b.blocks {
		out = binary.LittleEndian.AppendUint32(out, w)
	}
	return out
}

// murmur3 is the bucket transform's hash (bucket.Hash).
func murmur3(data []byte) uint32 { return bucketing.Hash(data) }
