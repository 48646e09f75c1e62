package fri

import (
	"math/bits"

	"github.com/RoaringBitmap/roaring/v2"
)

// The remap hot path must answer "does offset o of old fragment f survive,
// and what is its rank among the group's survivors?" in a few nanoseconds
// and in as few cache misses as possible: roaring's own Rank walks a bitmap
// container word by word (up to 1024 popcounts). So at Compile time each old
// fragment gets the cheapest of five representations, chosen by size, and
// its data goes into per-version arenas (lookups stay one slice index away).
// remap.go reads them.

type survivorKind uint8

const (
	kindRemoved      survivorKind = iota // in removed_fragments: every row deleted
	kindNone                             // old fragment with no survivors
	kindAll                              // every row survived
	kindDeletedList                      // few rows deleted: sorted deleted offsets
	kindSurvivorList                     // few rows survived: sorted surviving offsets
	kindDense                            // bitset in rank blocks
)

// rankBlock is one cache line of the dense representation: 384 rows of
// survivor bits, the number of survivors of the fragment before them, and
// the survivors before each word within the block (9 bits per word), so a
// rank is one cache miss, one popcount and no loop.
type rankBlock struct {
	before uint64
	inner  uint64 // bits 9w..9w+8: survivors in words[:w]
	words  [blockWords]uint64
}

const (
	blockWords = 6
	blockBits  = blockWords * 64
)

// smallList is the length up to which a sorted list always wins: its binary
// search stays within a cache line or two.
const smallList = 32

// chooseKind picks the representation of a fragment of rows physical rows
// with card survivors.
func chooseKind(rows, card uint64) survivorKind {
	deleted := rows - card
	denseBytes := (rows + blockBits - 1) / blockBits * 64
	// A list needs a binary search (several probes) where the bitset needs
	// one, so it must be much smaller to be chosen (factor 4).
	switch {
	case card == 0:
		return kindNone
	case deleted == 0:
		return kindAll
	case deleted <= card && (deleted <= smallList || deleted*4*4 <= denseBytes):
		return kindDeletedList
	case card <= smallList || card*4*4 <= denseBytes:
		return kindSurvivorList
	default:
		return kindDense
	}
}

// appendBlocks appends the rank blocks of a fragment of rows rows whose
// survivors are surv.
// REQUIRES: every offset in surv is < rows.
func appendBlocks(dst []rankBlock, rows uint64, surv *roaring.Bitmap) []rankBlock {
	words := make([]uint64, (rows+63)/64)
	surv.WriteDenseTo(words)
	var before uint64
	for i := 0; i < len(words); i += blockWords {
		b := rankBlock{before: before}
		n := copy(b.words[:], words[i:])
		var in uint64
		for w, x := range b.words[:n] {
			b.inner |= in << (9 * w)
			in += uint64(bits.OnesCount64(x))
		}
		before += in
		dst = append(dst, b)
	}
	return dst
}

// Lists are searched through a directory of buckets of 1<<bucketBits
// offsets: dirs[at+k] is the index in lists of the first entry >= k<<
// bucketBits, so a lookup binary-searches one bucket (a handful of entries)
// instead of the whole list. The directory costs 4 bytes per 4096 rows.
const bucketBits = 12

// appendList appends a fragment's sorted offsets to lists and its bucket
// directory (buckets covering [0, rows), plus one end entry) to dirs.
// REQUIRES: offs ascending, every offset < rows, rows > 0.
func appendList(lists, dirs []uint32, rows uint64, offs []uint32) ([]uint32, []uint32) {
	base := uint32(len(lists))
	lists = append(lists, offs...)
	nb := int((rows-1)>>bucketBits) + 1
	k := 0
	for b := 0; b < nb; b++ {
		for k < len(offs) && uint64(offs[k]) < uint64(b)<<bucketBits {
			k++
		}
		dirs = append(dirs, base+uint32(k))
	}
	return lists, append(dirs, base+uint32(len(offs)))
}

// lowerBound returns the first index i with a[i] >= x. The loop body has no
// data-dependent branch (the compiler emits a conditional move), which keeps
// mispredictions out of the remap of deletion-heavy fragments.
func lowerBound(a []uint32, x uint32) int {
	base, n := 0, len(a)
	for n > 1 {
		half := n / 2
		if a[base+half-1] < x {
			base += half
		}
		n -= half
	}
	if n == 1 && a[base] < x {
		base++
	}
	return base
}
