package storage

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
)

// countDirSyncs counts syncDir's calls per directory while the test runs.
func countDirSyncs(t *testing.T) func() map[string]int {
	t.Helper()
	var mu sync.Mutex
	n := map[string]int{}
	orig := syncDir
	syncDir = func(dir string) error {
		mu.Lock()
		n[dir]++
		mu.Unlock()
		return orig(dir)
	}
	t.Cleanup(func() { syncDir = orig })
	return func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]int{}
		for k, v := range n {
			out[k] = v
		}
		return out
	}
}

// TestDeferDirSyncs: writes under DeferDirSyncs publish their objects at
// once but fsync each directory only in Sync, once; PutIfAbsent and
// writes outside the context fsync theirs as always.
func TestDeferDirSyncs(t *testing.T) {
	root := t.TempDir()
	b, err := openFile(root)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := b.Put(ctx, "data/first", []byte("x")); err != nil { // creates data/
		t.Fatal(err)
	}
	counts := countDirSyncs(t)
	dctx, ds := DeferDirSyncs(ctx)
	for i := range 5 {
		w, err := b.NewWriter(dctx, fmt.Sprintf("data/f%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte("payload")); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Put(dctx, "other/p", []byte("p")); err != nil {
		t.Fatal(err)
	}
	data, other, vers := filepath.Join(root, "data"), filepath.Join(root, "other"), filepath.Join(root, "v")
	if got := counts()[data]; got != 0 {
		t.Fatalf("data/ fsynced %d times before Sync, want 0", got)
	}
	for i := range 5 {
		if got, err := b.Get(ctx, fmt.Sprintf("data/f%d", i)); err != nil || string(got) != "payload" {
			t.Fatalf("data/f%d before Sync: %q, %v", i, got, err)
		}
	}
	if err := b.PutIfAbsent(dctx, "v/1", []byte("m")); err != nil {
		t.Fatal(err)
	}
	if got := counts()[vers]; got != 1 {
		t.Fatalf("v/ fsynced %d times after a PutIfAbsent, want 1 (never deferred)", got)
	}
	if err := ds.Sync(); err != nil {
		t.Fatal(err)
	}
	if c := counts(); c[data] != 1 || c[other] != 1 {
		t.Fatalf("after Sync: data/ fsynced %d times, other/ %d, want once each", c[data], c[other])
	}
	if err := ds.Sync(); err != nil {
		t.Fatal(err)
	}
	if c := counts(); c[data] != 1 {
		t.Fatalf("a second Sync fsynced data/ again (%d)", c[data])
	}
	if err := b.Put(ctx, "data/late", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if c := counts(); c[data] != 2 {
		t.Fatalf("a write outside the context fsynced data/ %d times in all, want 2", c[data])
	}
}
