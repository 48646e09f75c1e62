package storage

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// directPayload is n bytes that differ at every offset, so a misplaced
// block shows.
func directPayload(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(uint64(n), 7))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// writeDirect writes parts through a NewWriter under DirectWrites: a
// []byte is written in pieces of the given sizes (cycled), an *os.File
// section is handed to ReadFrom.
func writeDirect(t *testing.T, b Bucket, key string, sizes []int, parts ...any) *fileWriter {
	t.Helper()
	wc, err := b.NewWriter(DirectWrites(context.Background()), key)
	if err != nil {
		t.Fatal(err)
	}
	fw := wc.(*fileWriter)
	for _, p := range parts {
		switch p := p.(type) {
		case []byte:
			for i := 0; len(p) > 0; i++ {
				n := min(sizes[i%len(sizes)], len(p))
				if k, err := wc.Write(p[:n]); err != nil || k != n {
					t.Fatalf("write %d: %d, %v", n, k, err)
				}
				p = p[n:]
			}
		case *io.LimitedReader:
			want := p.N
			if n, err := wc.(io.ReaderFrom).ReadFrom(p); err != nil || n != want {
				t.Fatalf("ReadFrom: %d of %d, %v", n, want, err)
			}
		}
	}
	if err := wc.Close(); err != nil {
		t.Fatal(err)
	}
	return fw
}

// TestDirectWrites: under DirectWrites a file bucket's streamed write
// lands byte for byte whatever the sizes of the writes (smaller and
// larger than its buffers, an unaligned end), before and after a
// ReadFrom in the middle, and reports that it buffers for its caller.
func TestDirectWrites(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent()) // each writer's goroutine ends with it
	b, err := openFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	head := directPayload(3*directBufBytes + 12345)
	src := directPayload(directBufBytes + 777)
	srcPath := filepath.Join(t.TempDir(), "src")
	if err := os.WriteFile(srcPath, src, 0o644); err != nil {
		t.Fatal(err)
	}
	sf, err := os.Open(srcPath)
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	tail := directPayload(2*directBufBytes + 4096*3 + 5)
	for _, tc := range []struct {
		name  string
		sizes []int
	}{
		{"small writes", []int{1, 63, 64, 4095, 4097, 100000}},
		{"page-sized writes", []int{2 << 20, 64, 2<<20 + 1}},
		{"one write", []int{1 << 30}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := sf.Seek(0, io.SeekStart); err != nil {
				t.Fatal(err)
			}
			key := "data/" + strings.ReplaceAll(tc.name, " ", "-")
			fw := writeDirect(t, b, key, tc.sizes, head, &io.LimitedReader{R: sf, N: int64(len(src))}, tail)
			if !fw.BuffersWrites() {
				t.Log("O_DIRECT refused by this file system: the writes took the page cache")
			}
			got, err := b.Get(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			want := append(append(append([]byte{}, head...), src...), tail...)
			if !bytes.Equal(got, want) {
				i := 0
				for i < min(len(got), len(want)) && got[i] == want[i] {
					i++
				}
				t.Fatalf("read back %d bytes, want %d; first difference at %d", len(got), len(want), i)
			}
		})
	}
	// Without the context, and for a Put under it, nothing changes.
	wc, err := b.NewWriter(ctx, "data/plain")
	if err != nil {
		t.Fatal(err)
	}
	if BuffersWrites(wc) {
		t.Fatal("a writer outside DirectWrites says it buffers")
	}
	if _, err := wc.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := wc.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(DirectWrites(ctx), "data/put", []byte("abc")); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Get(ctx, "data/put"); err != nil || string(got) != "abc" {
		t.Fatalf("Put under DirectWrites: %q, %v", got, err)
	}
}

// TestDirectWritesAbandoned: a direct write whose context is canceled
// publishes nothing, leaves no temporary file and no goroutine, whatever
// it had buffered or in flight.
func TestDirectWritesAbandoned(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	root := t.TempDir()
	b, err := openFile(root)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	wc, err := b.NewWriter(DirectWrites(ctx), "data/x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wc.Write(directPayload(2*directBufBytes + 100)); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := wc.Write([]byte("more")); err == nil {
		t.Fatal("a write after the cancel succeeded")
	}
	if err := wc.Close(); err == nil {
		t.Fatal("Close after the cancel succeeded")
	}
	ents, err := os.ReadDir(filepath.Join(root, "data"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 0 {
		t.Fatalf("left %d entries in data/ (first %s)", len(ents), ents[0].Name())
	}
}
