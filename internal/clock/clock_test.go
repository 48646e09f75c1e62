package clock_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/clock"
)

func TestFake(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := clock.NewFake(start)
	now := f.NewTimer(0)
	select {
	case <-now.C():
	default:
		t.Fatal("a zero timer did not fire at once")
	}
	a, b, c := f.NewTimer(2*time.Second), f.NewTimer(time.Second), f.NewTimer(3*time.Second)
	if f.Timers() != 3 {
		t.Fatalf("timers %d", f.Timers())
	}
	if next, ok := f.NextTimer(); !ok || !next.Equal(start.Add(time.Second)) {
		t.Fatalf("next %v", next)
	}
	if !c.Stop() || c.Stop() {
		t.Fatal("Stop reports wrongly")
	}
	f.Advance(1500 * time.Millisecond)
	select {
	case got := <-b.C():
		if !got.Equal(start.Add(1500 * time.Millisecond)) {
			t.Fatalf("fired with %v", got)
		}
	default:
		t.Fatal("a due timer did not fire")
	}
	select {
	case <-a.C():
		t.Fatal("a timer fired early")
	default:
	}
	f.Advance(time.Second)
	<-a.C()
	if f.Timers() != 0 || !f.Now().Equal(start.Add(2500*time.Millisecond)) {
		t.Fatalf("timers %d, now %v", f.Timers(), f.Now())
	}
	r := clock.Real().NewTimer(time.Millisecond)
	<-r.C()
}

// Sleep waits on the clock it is given (a fake one moves only by hand),
// and a done context ends it with the context's cause.
func TestSleep(t *testing.T) {
	f := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	done := make(chan error, 1)
	go func() { done <- clock.Sleep(context.Background(), f, time.Hour) }()
	for f.Timers() == 0 {
		runtime.Gosched()
	}
	select {
	case err := <-done:
		t.Fatalf("Sleep returned before the fake clock moved: %v", err)
	default:
	}
	f.Advance(time.Hour)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	cause := errors.New("stopped")
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() { done <- clock.Sleep(ctx, f, time.Hour) }()
	for f.Timers() == 0 {
		runtime.Gosched()
	}
	cancel(cause)
	if err := <-done; !errors.Is(err, cause) {
		t.Fatalf("Sleep on a canceled context: %v, want %v", err, cause)
	}
	if err := clock.Sleep(ctx, f, time.Hour); !errors.Is(err, cause) {
		t.Fatalf("Sleep on a done context: %v", err)
	}
	if err := clock.Sleep(context.Background(), f, 0); err != nil {
		t.Fatalf("Sleep(0): %v", err)
	}
}
