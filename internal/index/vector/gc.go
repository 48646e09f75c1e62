package vector

import (
	"runtime/debug"
	"sync"
)

// buildGCPercent is the garbage collector's target (GOGC) while a segment
// is built. A build holds one large live set (a new segment's codes, then
// its graphs: 130 MiB for 100 000 768-d SQ rows) while its scan and its
// writers churn through short-lived buffers (600 MB for that scan); at
// the default 100 the heap grows to twice the live set between
// collections, which was half of the catch-up's peak RSS. The collections
// this adds mark little: the codes and the graphs' lists are pointer-free
// slabs.
const buildGCPercent = 10

// gcHold counts the builds running, so that concurrent ones lower the
// target once and the last one out restores it.
var gcHold struct {
	sync.Mutex
	n    int
	prev int
}

// holdGC lowers the collector's target to percent until release is
// called, unless the process runs with a lower one already (or with the
// collector off, GOGC=off, relying on a memory limit). The setting is the
// process's: other work running meanwhile collects as often.
func holdGC(percent int) (release func()) {
	gcHold.Lock()
	defer gcHold.Unlock()
	if gcHold.n == 0 {
		gcHold.prev = debug.SetGCPercent(percent)
		if gcHold.prev >= 0 && gcHold.prev < percent || gcHold.prev < 0 {
			debug.SetGCPercent(gcHold.prev)
		}
	}
	gcHold.n++
	var once sync.Once
	return func() {
		once.Do(func() {
			gcHold.Lock()
			defer gcHold.Unlock()
			if gcHold.n--; gcHold.n == 0 {
				debug.SetGCPercent(gcHold.prev)
			}
		})
	}
}
