package storage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
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

// TestFileDeletePrunesEmptyDirs: deleting a bucket's last object under a
// folder removes the folders it leaves empty, up to (not including) the
// bucket's root, and no folder that still holds something.
func TestFileDeletePrunesEmptyDirs(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	b, err := openFile(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"_mem_wal/s/gen_1/data/a.lance", "_mem_wal/s/gen_1/_indices/u/page.idx", "_mem_wal/s/manifest/1.binpb"} {
		if err := b.Put(ctx, k, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"_mem_wal/s/gen_1/data/a.lance", "_mem_wal/s/gen_1/_indices/u/page.idx"} {
		if err := b.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "_mem_wal/s/gen_1")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("emptied generation folder still there (stat: %v)", err)
	}
	if _, err := os.Stat(filepath.Join(root, "_mem_wal/s/manifest/1.binpb")); err != nil {
		t.Errorf("a sibling's object went with the pruning: %v", err)
	}
	if err := b.Delete(ctx, "_mem_wal/s/manifest/1.binpb"); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatalf("the bucket's root must stay: %v", err)
	}
	if len(entries) != 0 {
		t.Errorf("root holds %d entries after the last delete, want 0", len(entries))
	}
}

// TestFileWriteRacesPruning: writers putting objects into folders that
// deleters keep emptying (and so pruning) all succeed, and every object
// written and not deleted is there afterwards.
func TestFileWriteRacesPruning(t *testing.T) {
	ctx := context.Background()
	b, err := openFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const writers, rounds = 4, 200
	var wg sync.WaitGroup
	errs := make(chan error, writers*rounds)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				k := fmt.Sprintf("d/%d/e/w%d-%d", i%3, w, i)
				if err := b.Put(ctx, k, []byte("v")); err != nil {
					errs <- err
					return
				}
				if i%2 == 0 { // keep the odd ones
					if err := b.Delete(ctx, k); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	n := 0
	if err := b.List(ctx, "", func(a Attrs) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if want := writers * rounds / 2; n != want {
		t.Errorf("%d objects left, want %d", n, want)
	}
}
