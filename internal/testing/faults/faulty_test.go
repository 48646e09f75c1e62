package faults_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/faults"
	"github.com/compactord/compactord/internal/testing/stores"
)

// waitUntil polls cond, for at most 10s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

func TestFaultyNthCall(t *testing.T) {
	ctx := t.Context()
	f := faults.NewFaulty(stores.Open(t, "mem://"))
	r := f.Add(faults.Fault{Ops: []storage.Op{storage.OpPut}, KeyPrefix: "data/", Nth: 2, Action: faults.Fail(nil)})

	for i, c := range []struct {
		key     string
		wantErr bool
	}{{"data/1", false}, {"other/x", false}, {"data/2", true}, {"data/3", false}} {
		err := f.Put(ctx, c.key, []byte("v"))
		if got := errors.Is(err, faults.ErrInjected); got != c.wantErr {
			t.Errorf("call %d (%s): %v", i, c.key, err)
		}
	}
	if _, err := f.Get(ctx, "data/2"); !storage.IsNotFound(err) {
		t.Errorf("failed put landed: %v", err)
	}
	if r.Matched() != 3 || r.Fired() != 1 || f.Fired() != 1 {
		t.Errorf("matched %d fired %d total %d, want 3 1 1", r.Matched(), r.Fired(), f.Fired())
	}

	// Every call, by substring, with a custom error; then removal.
	boom := errors.New("boom")
	r2 := f.Add(faults.Fault{KeyContains: "x", Action: faults.Fail(boom)})
	if _, err := f.Get(ctx, "other/x"); !errors.Is(err, boom) {
		t.Errorf("Get: %v, want boom", err)
	}
	if err := f.Delete(ctx, "other/x"); !errors.Is(err, boom) {
		t.Errorf("Delete: %v, want boom", err)
	}
	f.Remove(r2)
	if _, err := f.Get(ctx, "other/x"); err != nil {
		t.Errorf("Get after Remove: %v", err)
	}
	f.Clear()
	if f.Fired() != 0 {
		t.Errorf("Fired after Clear = %d", f.Fired())
	}
}

func TestFaultyLandThenFail(t *testing.T) {
	ctx := t.Context()
	f := faults.NewFaulty(stores.Open(t, "mem://"))
	f.Add(faults.Fault{Ops: []storage.Op{storage.OpPutIfAbsent}, Nth: 1, Action: faults.LandThenFail(nil)})

	err := f.PutIfAbsent(ctx, "_log/1.json", []byte("mine"))
	var netErr net.Error
	if !errors.Is(err, faults.ErrInjected) || !errors.As(err, &netErr) || !netErr.Timeout() {
		t.Fatalf("PutIfAbsent: %v, want an injected timeout", err)
	}
	if storage.IsAlreadyExists(err) || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("ambiguous error classified as %v", err)
	}
	if got, err := f.Get(ctx, "_log/1.json"); err != nil || string(got) != "mine" {
		t.Errorf("object after LandThenFail: %q, %v", got, err)
	}
	// The writer's retry now sees its own object: the ambiguity the commit
	// protocol must resolve by reading back.
	if err := f.PutIfAbsent(ctx, "_log/1.json", []byte("mine")); !storage.IsAlreadyExists(err) {
		t.Errorf("retry: %v", err)
	}

	// Streamed writes: Fail abandons, LandThenFail publishes.
	f.Add(faults.Fault{Ops: []storage.Op{storage.OpUpload}, KeyPrefix: "fail", Action: faults.Fail(nil)})
	f.Add(faults.Fault{Ops: []storage.Op{storage.OpUpload}, KeyPrefix: "land", Action: faults.LandThenFail(nil)})
	for key, wantExists := range map[string]bool{"fail.parquet": false, "land.parquet": true} {
		w, err := f.NewWriter(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte("data"))
		if err := w.Close(); !errors.Is(err, faults.ErrInjected) {
			t.Errorf("%s: Close = %v", key, err)
		}
		_, err = f.Get(ctx, key)
		if exists := err == nil; exists != wantExists {
			t.Errorf("%s: exists=%v (%v), want %v", key, exists, err, wantExists)
		}
	}
}

func TestFaultyBlockAndDelay(t *testing.T) {
	ctx := t.Context()
	f := faults.NewFaulty(stores.Open(t, "mem://"))

	release := make(chan struct{})
	r := f.Add(faults.Fault{Ops: []storage.Op{storage.OpPut}, Action: faults.Block(release)})
	res := make(chan error, 1)
	go func() { res <- f.Put(ctx, "k", []byte("v")) }()
	waitUntil(t, "the put to block", func() bool { return r.Fired() == 1 })
	select {
	case err := <-res:
		t.Fatalf("blocked put returned: %v", err)
	default:
	}
	if _, err := f.Get(ctx, "k"); !storage.IsNotFound(err) {
		t.Errorf("blocked put landed early: %v", err)
	}
	close(release)
	if err := <-res; err != nil {
		t.Fatal(err)
	}
	if _, err := f.Get(ctx, "k"); err != nil {
		t.Errorf("released put: %v", err)
	}
	f.Remove(r)

	// A delay ends early, without performing the op, when ctx is canceled.
	r = f.Add(faults.Fault{Ops: []storage.Op{storage.OpPut}, Action: faults.Delay(time.Hour)})
	cctx, cancel := context.WithCancel(ctx)
	go func() { res <- f.Put(cctx, "delayed", []byte("v")) }()
	waitUntil(t, "the put to be delayed", func() bool { return r.Fired() == 1 })
	cancel()
	if err := <-res; !errors.Is(err, context.Canceled) {
		t.Errorf("canceled delayed put: %v", err)
	}
	if _, err := f.Get(ctx, "delayed"); !storage.IsNotFound(err) {
		t.Errorf("canceled delayed put landed: %v", err)
	}
	f.Remove(r)

	// A short delay, then the op happens.
	f.Add(faults.Fault{Ops: []storage.Op{storage.OpPut}, Action: faults.Delay(time.Millisecond)})
	if err := f.Put(ctx, "delayed", []byte("v")); err != nil {
		t.Errorf("delayed put: %v", err)
	}
}

func TestFaultyConcurrent(t *testing.T) {
	ctx := t.Context()
	f := faults.NewFaulty(stores.Open(t, "mem://"))
	r := f.Add(faults.Fault{Ops: []storage.Op{storage.OpGet}, Nth: 50, Action: faults.Fail(nil)})
	f.Put(ctx, "k", []byte("v"))
	var failed atomic.Int32
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			if _, err := f.Get(ctx, "k"); errors.Is(err, faults.ErrInjected) {
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	if failed.Load() != 1 || r.Matched() != 100 || r.Fired() != 1 {
		t.Errorf("failed %d matched %d fired %d, want 1 100 1", failed.Load(), r.Matched(), r.Fired())
	}
}
