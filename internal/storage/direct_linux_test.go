//go:build linux

package storage

import (
	"bytes"
	"context"
	"io"
	"testing"

	"golang.org/x/sys/unix"
)

// TestDirectWritesBypassPageCache: on a file system that takes O_DIRECT,
// the temporary file of a write under DirectWrites has it while whole
// buffers are written, and its end (shorter than a block) is written
// after O_DIRECT is cleared.
func TestDirectWritesBypassPageCache(t *testing.T) {
	_, wc, fw := directTestWriter(t)
	flags := func() int {
		fl, err := unix.FcntlInt(fw.f.Fd(), unix.F_GETFL, 0)
		if err != nil {
			t.Fatal(err)
		}
		return fl
	}
	if _, err := wc.Write(directPayload(directBufBytes + 10)); err != nil {
		t.Fatal(err)
	}
	if flags()&unix.O_DIRECT == 0 || !fw.direct.direct.Load() {
		t.Fatal("O_DIRECT is off after a whole buffer was written")
	}
	if err := fw.direct.flush(); err != nil {
		t.Fatal(err)
	}
	if flags()&unix.O_DIRECT != 0 {
		t.Fatal("O_DIRECT still on after an unaligned end was written")
	}
	if fw.direct.pos != directBufBytes+10 {
		t.Fatalf("position %d after the flush, want %d", fw.direct.pos, directBufBytes+10)
	}
	if err := wc.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestDirectWriteRefusedFallsBack: a write the file system refuses with
// EINVAL under O_DIRECT (here a buffer that is not block-aligned in
// memory, as some file systems refuse every direct write after accepting
// the flag at open) is written through the page cache instead, and so is
// everything after it; the object holds every byte.
func TestDirectWriteRefusedFallsBack(t *testing.T) {
	b, wc, fw := directTestWriter(t)
	want := directPayload(directAlign + 3*directBufBytes + 100)
	// A slice one byte into an allocation is not aligned for O_DIRECT.
	head := append(make([]byte, 1, directAlign+1), want[:directAlign]...)[1:]
	if err := fw.direct.writeAt(head, 0); err != nil {
		t.Fatalf("the refused direct write was not retried through the page cache: %v", err)
	}
	if fw.direct.direct.Load() {
		t.Fatal("the writer still writes around the page cache after EINVAL")
	}
	if fl, err := unix.FcntlInt(fw.f.Fd(), unix.F_GETFL, 0); err != nil || fl&unix.O_DIRECT != 0 {
		t.Fatalf("O_DIRECT still set after the fallback (flags %#x, %v)", fl, err)
	}
	fw.direct.pos = directAlign
	if _, err := wc.Write(want[directAlign:]); err != nil {
		t.Fatal(err)
	}
	if err := wc.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := b.Get(context.Background(), "data/x")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read back %d bytes, want the %d written", len(got), len(want))
	}
}

// directTestWriter opens a writer of "data/x" under DirectWrites in a
// new file bucket; the test is skipped where the file system refuses
// O_DIRECT.
func directTestWriter(t *testing.T) (*fileBucket, io.WriteCloser, *fileWriter) {
	t.Helper()
	b, err := openFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	wc, err := b.NewWriter(DirectWrites(context.Background()), "data/x")
	if err != nil {
		t.Fatal(err)
	}
	fw := wc.(*fileWriter)
	if fw.direct == nil {
		fw.abort()
		t.Skip("this file system refuses O_DIRECT")
	}
	return b, wc, fw
}
