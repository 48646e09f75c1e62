package fri

// What only tests use: kept out of the product binary, still checked by the
// tests that exercise it.

import "github.com/RoaringBitmap/roaring/v2/roaring64"

// batchChunk keeps a chunk's addresses and flags in L1 across the versions.
const batchChunk = 512

// Len returns the number of versions in the chain.
func (c *Chain) Len() int { return len(c.versions) }

// Remap maps addr through every version, oldest to newest. ok is false when
// the row was deleted: its fragment was removed, or it did not survive its
// group's compaction. An address no version touches passes through
// unchanged.
func (c *Chain) Remap(addr uint64) (newAddr uint64, ok bool) {
	return c.remapOne(addr, 0)
}

// RemapFrom is Remap through the versions with dataset_version >= since
// only (see Index.Remapper for when skipping versions is safe).
func (c *Chain) RemapFrom(addr, since uint64) (newAddr uint64, ok bool) {
	return c.remapOne(addr, c.start(since))
}

// RemapBatch remaps addrs through the versions with dataset_version >=
// since (0: every version) into out and records in ok whether each row
// survived; out[i] is 0 and meaningless when ok[i] is false. out may be
// addrs itself. It returns the number of survivors.
// REQUIRES: len(out) >= len(addrs) and len(ok) >= len(addrs).
//
// It is faster than a loop over RemapFrom: it applies one version to a
// chunk of addresses at a time, so a run of addresses in one fragment looks
// the fragment up once and the version's structures stay hot.
func (c *Chain) RemapBatch(addrs, out []uint64, ok []bool, since uint64) int {
	start := c.start(since)
	out, ok = out[:len(addrs)], ok[:len(addrs)]
	copy(out, addrs)
	for i := range ok {
		ok[i] = true
	}
	for lo := 0; lo < len(out); lo += batchChunk {
		hi := min(lo+batchChunk, len(out))
		for vi := start; vi < len(c.versions); vi++ {
			c.versions[vi].remapChunk(out[lo:hi], ok[lo:hi])
		}
	}
	n := 0
	for _, k := range ok {
		if k {
			n++
		}
	}
	return n
}

// AppendRemapped appends the remapped addresses of the rows of addrs that
// survive to dst, dropping deleted rows, and returns the extended slice.
func (c *Chain) AppendRemapped(dst, addrs []uint64, since uint64) []uint64 {
	var buf [batchChunk]uint64
	var ok [batchChunk]bool
	for lo := 0; lo < len(addrs); lo += batchChunk {
		in := addrs[lo:min(lo+batchChunk, len(addrs))]
		c.RemapBatch(in, buf[:len(in)], ok[:len(in)], since)
		for i := range in {
			if ok[i] {
				dst = append(dst, buf[i])
			}
		}
	}
	return dst
}

// RemapAddresses remaps a roaring64 set of row addresses (a bitmap index
// posting list, say) into a new bitmap without the deleted rows. The input is
// not modified.
func (c *Chain) RemapAddresses(bm *roaring64.Bitmap, since uint64) *roaring64.Bitmap {
	out := roaring64.New()
	if bm == nil {
		return out
	}
	in := make([]uint64, 4096)
	var buf []uint64
	it := bm.ManyIterator()
	for {
		n := it.NextMany(in)
		if n == 0 {
			break
		}
		buf = c.AppendRemapped(buf[:0], in[:n], since)
		out.AddMany(buf)
	}
	return out
}
