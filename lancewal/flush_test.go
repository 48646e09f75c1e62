package lancewal

import (
	"testing"
	"time"
)

// waitUntil polls cond until it holds, failing the test after a minute
// (a generation's vector copy takes seconds on a loaded machine).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// flushIdle reports whether no frozen MemTable waits and no background
// flush runs.
func (w *Writer) flushIdle() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.frozen) == 0 && !w.bgRunning
}
