package storage

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
)

// ReaderAt reads one object at arbitrary offsets, as the Lance file reader needs.
// It also implements io.Closer: close it when done with a local object to
// release its file descriptor promptly (os.File's finalizer releases it
// otherwise).
type ReaderAt struct {
	ctx  context.Context
	b    Bucket
	key  string
	size int64

	local     string // path of a local file, "" if remote
	openOnce  sync.Once
	f         *os.File
	openErr   error
	closeOnce sync.Once
}

var (
	_ io.ReaderAt = (*ReaderAt)(nil)
	_ io.Closer   = (*ReaderAt)(nil)
)

// NewReaderAt returns an io.ReaderAt over the object key of known size. On a
// bucket with local files (LocalPather) it preads an os.File, saving a
// syscall-heavy open per read; elsewhere every ReadAt is one range request.
// ctx bounds every read, since ReadAt has no context of its own. The result is
// a *ReaderAt; see its Close.
func NewReaderAt(ctx context.Context, b Bucket, key string, size int64) io.ReaderAt {
	r := &ReaderAt{ctx: ctx, b: b, key: key, size: size}
	if lp, ok := b.(LocalPather); ok {
		if p, ok := lp.LocalPath(key); ok {
			r.local = p
		}
	}
	return r
}

// Size returns the object size given to NewReaderAt.
func (r *ReaderAt) Size() int64 { return r.size }

// LocalPath returns the local file that holds the object, and false on a
// remote bucket. The file must only be read (see LocalPather).
func (r *ReaderAt) LocalPath() (string, bool) { return r.local, r.local != "" }

// ReadAt implements io.ReaderAt. Reads past size return io.EOF, as the
// io.ReaderAt contract requires.
func (r *ReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("read %s: negative offset %d", r.key, off)
	}
	if off >= r.size {
		return 0, io.EOF
	}
	want := p
	if rem := r.size - off; int64(len(want)) > rem {
		want = want[:rem]
	}
	if err := r.ctx.Err(); err != nil {
		return 0, fmt.Errorf("read %s: %w", r.key, err)
	}
	var n int
	var err error
	if r.local != "" {
		n, err = r.readLocal(want, off)
	} else {
		n, err = r.readRemote(want, off)
	}
	if err == nil && len(want) < len(p) {
		err = io.EOF
	}
	return n, err
}

func (r *ReaderAt) readLocal(p []byte, off int64) (int, error) {
	r.openOnce.Do(func() {
		f, err := os.Open(r.local)
		if err != nil {
			r.openErr = fmt.Errorf("read %s: %w", r.key, classify(err))
			return
		}
		r.f = f
	})
	if r.openErr != nil {
		return 0, r.openErr
	}
	n, err := r.f.ReadAt(p, off)
	if err == io.EOF && n == len(p) {
		err = nil
	}
	if err == io.EOF {
		err = fmt.Errorf("read %s: object shorter than its size %d: %w", r.key, r.size, io.ErrUnexpectedEOF)
	}
	return n, err
}

func (r *ReaderAt) readRemote(p []byte, off int64) (int, error) {
	rc, err := r.b.NewRangeReader(r.ctx, r.key, off, int64(len(p)))
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	n, err := io.ReadFull(rc, p)
	if err != nil {
		return n, fmt.Errorf("read %s at %d: %w", r.key, off, err)
	}
	return n, nil
}

// Close releases the file of a local object. It is safe to call more than
// once and on a remote reader.
func (r *ReaderAt) Close() error {
	var err error
	r.closeOnce.Do(func() {
		r.openOnce.Do(func() { r.openErr = fmt.Errorf("read %s: reader closed", r.key) })
		if r.f != nil {
			err = r.f.Close()
		}
	})
	return err
}
