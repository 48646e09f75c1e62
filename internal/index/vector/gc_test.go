package vector

import (
	"runtime/debug"
	"testing"
)

// gcPercent reads the collector's target without changing it.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

func TestHoldGC(t *testing.T) {
	orig := debug.SetGCPercent(100)
	defer debug.SetGCPercent(orig)

	// Nested holds lower the target once; the last release restores it.
	r1 := holdGC(10)
	if got := gcPercent(); got != 10 {
		t.Fatalf("held: GOGC %d, want 10", got)
	}
	r2 := holdGC(10)
	r1()
	r1() // a second release of the same hold does nothing
	if got := gcPercent(); got != 10 {
		t.Fatalf("one of two holds released: GOGC %d, want 10", got)
	}
	r2()
	if got := gcPercent(); got != 100 {
		t.Fatalf("released: GOGC %d, want 100", got)
	}

	// A lower target, or the collector off, is left alone.
	for _, p := range []int{5, -1} {
		debug.SetGCPercent(p)
		r := holdGC(10)
		if got := gcPercent(); got != p {
			t.Fatalf("GOGC %d held: %d, want it unchanged", p, got)
		}
		r()
		if got := gcPercent(); got != p {
			t.Fatalf("GOGC %d released: %d", p, got)
		}
	}

	debug.SetGCPercent(100)

	// A remap's and a build's holds overlapping: the lower target while
	// both run, the other's while one does, the process's own after both,
	// whichever ends first.
	for _, buildFirst := range []bool{false, true} {
		remap := holdGC(25)
		build := holdGC(10)
		if got := gcPercent(); got != 10 {
			t.Fatalf("both held: GOGC %d, want 10", got)
		}
		first, second, left := remap, build, 10
		if buildFirst {
			first, second, left = build, remap, 25
		}
		first()
		if got := gcPercent(); got != left {
			t.Fatalf("one released (build first %v): GOGC %d, want %d", buildFirst, got, left)
		}
		second()
		if got := gcPercent(); got != 100 {
			t.Fatalf("both released (build first %v): GOGC %d, want 100", buildFirst, got)
		}
	}
}
