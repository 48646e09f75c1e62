package fri

import (
	"fmt"
	"math/bits"
)

func wrapf(err error, format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, err)...)
}

func (c *Chain) remapOne(addr uint64, start int) (uint64, bool) {
	a, ok := [1]uint64{addr}, [1]bool{true}
	for i := start; i < len(c.versions) && ok[0]; i++ {
		c.versions[i].remapChunk(a[:], ok[:])
	}
	return a[0], ok[0]
}

// remapChunk applies the version to the addresses flagged ok, in place. It
// is the one implementation of the remap rule (see doc.go); Remap calls it with a
// single address. Everything is inline: at 20 M addresses/s through three
// versions a call per step is a visible share of the budget.
func (v *version) remapChunk(addrs []uint64, ok []bool) {
	if len(v.frags) == 0 || len(addrs) == 0 {
		return
	}
	lastID := uint32(addrs[0] >> 32)
	t := v.find(lastID)
	for i, a := range addrs {
		if !ok[i] {
			continue
		}
		if id := uint32(a >> 32); id != lastID {
			lastID = id
			if idx := id - v.minID; v.dense != nil && idx < uint32(len(v.dense)) {
				// find's dense case, inline.
				t = nil
				if j := v.dense[idx]; j >= 0 {
					t = &v.frags[j]
				}
			} else {
				t = v.find(id)
			}
		}
		if t == nil {
			continue // not touched by this version: pass through
		}
		off := uint32(a)
		var r uint64 // rank among the fragment's survivors
		if off > t.lastOff {
			goto deleted // not a row of the fragment
		}
		switch t.kind {
		case kindAll:
			r = uint64(off)
		case kindDense:
			b := &v.blocks[t.at+off/blockBits]
			w := off % blockBits / 64
			mask := uint64(1) << (off % 64)
			word := b.words[w]
			if word&mask == 0 {
				goto deleted
			}
			r = b.before + b.inner>>(9*w)&511 + uint64(bits.OnesCount64(word&(mask-1)))
		case kindDeletedList, kindSurvivorList:
			d := t.at + off>>bucketBits
			lo, hi := v.dirs[d], v.dirs[d+1]
			k := lo + uint32(lowerBound(v.lists[lo:hi], off))
			found := k < hi && v.lists[k] == off
			first := v.dirs[t.at] // the fragment's first list entry
			if t.kind == kindDeletedList {
				if found {
					goto deleted
				}
				r = uint64(off) - uint64(k-first)
			} else {
				if !found {
					goto deleted
				}
				r = uint64(k - first)
			}
		default:
			// kindRemoved: a fully deleted fragment an index still
			// covers (lance#7374 ghost rows). kindNone: a group whose
			// rows were all deleted; a writer mapping those to
			// address 0 hits a real row. Both are deleted, nothing else.
			goto deleted
		}
		r += t.base
		if t.newHi-t.newLo == 1 {
			addrs[i] = uint64(t.newID)<<32 | (r - t.newStart)
		} else {
			// INVARIANT (Compile): the survivor's group rank lies in
			// splits[newLo:newHi], usually two new fragments.
			j := t.newLo
			if t.newHi-t.newLo <= 8 {
				for j+1 < t.newHi && v.splits[j+1].start <= r {
					j++
				}
			} else {
				j += uint32(lastStartAtOrBefore(v.splits[t.newLo:t.newHi], r))
			}
			addrs[i] = uint64(v.splits[j].id)<<32 | (r - v.splits[j].start)
		}
		continue
	deleted:
		addrs[i], ok[i] = 0, false
	}
}
