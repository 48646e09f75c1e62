package lancewal

import (
	"time"

	"github.com/compactord/compactord/internal/storage"
)

// What only tests use: kept out of the product binary, still checked by the
// tests that exercise it.

// openBucket wraps a bucket the caller keeps (tests, fault injection).
func openBucket(b storage.Bucket, now func() time.Time) *Table {
	if now == nil {
		now = time.Now
	}
	return &Table{b: b, now: now}
}

func (b *bloom) contains(h uint64) bool {
	nb := uint64(len(b.blocks) / 8)
	blk := ((h >> 32) * nb) >> 32
	for i, s := range sbbfSalt {
		if b.blocks[blk*8+uint64(i)]&(1<<((uint32(h)*s)>>27)) == 0 {
			return false
		}
	}
	return true
}
