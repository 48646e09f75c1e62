//go:build linux

package storage

import (
	"context"
	"testing"

	"golang.org/x/sys/unix"
)

// TestDirectWritesBypassPageCache: on a file system that takes O_DIRECT,
// the temporary file of a write under DirectWrites has it while whole
// buffers are written, and its end (shorter than a block) is written
// after O_DIRECT is cleared.
func TestDirectWritesBypassPageCache(t *testing.T) {
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
