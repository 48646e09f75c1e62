package vector

import (
	"runtime/debug"
	"sync"
)

// segmentGCPercent is the garbage collector's target (GOGC) while a
// segment is built or an HNSW segment remapped. Both hold one large live
// set (a new segment's codes, then its graphs: 130 MiB for 100 000 768-d
// SQ rows; a remap's partition of storage and graphs: 1 GiB for a
// partition of 1 M rows) while scans and writers churn through
// short-lived buffers (600 MB for the build's scan); at the default 100
// the heap grows to twice the live set between collections, which was
// half of the catch-up's peak RSS, and at 25 a 1 M-row HNSW remap inline
// in a compaction peaked at 1 708 MiB against 1 518 at 10 for the same
// CPU. The collections this adds mark little: the codes and the graphs'
// lists are pointer-free slabs.
const segmentGCPercent = 10

// gcHold holds the targets of the builds and remaps running (holdGC):
// the collector runs at the lowest of them, or at the process's own
// target when that is lower, and gets its own back when the last ends.
// One registry for every caller, so that a remap and a build that
// overlap never restore each other's setting.
var gcHold struct {
	sync.Mutex
	held map[int]int // target -> holds
	prev int         // the process's own target, before the first hold
}

// holdGC lowers the collector's target to percent until release is
// called, unless the process runs with a lower one already (or with the
// collector off, GOGC=off, relying on a memory limit). The setting is the
// process's: other work running meanwhile collects as often.
func holdGC(percent int) (release func()) {
	gcHold.Lock()
	defer gcHold.Unlock()
	if len(gcHold.held) == 0 {
		gcHold.prev = debug.SetGCPercent(-1)
		gcHold.held = map[int]int{}
	}
	gcHold.held[percent]++
	applyGCHold()
	var once sync.Once
	return func() {
		once.Do(func() {
			gcHold.Lock()
			defer gcHold.Unlock()
			if gcHold.held[percent]--; gcHold.held[percent] == 0 {
				delete(gcHold.held, percent)
			}
			if len(gcHold.held) == 0 {
				debug.SetGCPercent(gcHold.prev)
				return
			}
			applyGCHold()
		})
	}
}

// applyGCHold sets the collector's target to the lowest held, or the
// process's own when that is lower or off. REQUIRES: gcHold held, some
// target held.
func applyGCHold() {
	low := -1
	for p := range gcHold.held {
		if low < 0 || p < low {
			low = p
		}
	}
	if gcHold.prev < 0 || gcHold.prev < low {
		low = gcHold.prev
	}
	debug.SetGCPercent(low)
}
