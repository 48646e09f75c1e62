package storage

import (
	"context"
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"
)

type directWritesKey struct{}

// DirectWrites returns a context under which a file bucket's streamed
// writes (NewWriter) go around the page cache (O_DIRECT) where the file
// system allows it: the writer copies what it is given into a few
// aligned buffers and a goroutine of its own writes each one as it
// fills, so the device writes while the caller produces the next bytes,
// and the fsync before the object is published has little left to wait
// for. Such a writer buffers for its caller (BuffersWrites). Meant for
// large objects written once and not read back soon (a compaction's data
// files); other buckets ignore it. Close still fsyncs before publishing:
// the durability is the same.
func DirectWrites(ctx context.Context) context.Context {
	return context.WithValue(ctx, directWritesKey{}, true)
}

// BuffersWrites reports whether w, a writer from a Bucket's NewWriter,
// buffers its writes itself, so a caller writing small pieces needs no
// buffer of its own in front of it.
func BuffersWrites(w io.Writer) bool {
	b, ok := w.(interface{ BuffersWrites() bool })
	return ok && b.BuffersWrites()
}

// directBufBytes is the size of each aligned buffer, directBufs how many
// a writer holds at most: one being filled while the other is written
// (allocated as needed: a small file takes one). On the 2-core VM of
// docs/benchmarks.md a 553 MB file took 0.26-0.57 s to write this way,
// fdatasync included, with one write in flight or up to eight alike (the
// device is the bound), against 0.34-3.3 s written through the page cache
// and then fsynced (the kernel's copy into fresh page-cache pages took
// 0.1-1.3 s of CPU, from run to run); three buffers or 8 MiB ones were
// no faster than two of 2 MiB.
const (
	directBufBytes = 2 << 20
	directBufs     = 2
	// directAlign is the alignment of an O_DIRECT write's memory, offset
	// and length: a page, which covers a device's logical block size.
	directAlign = 4 << 10
	// directPoolMax is the most idle buffers kept for the next file.
	directPoolMax = 4
)

// directPool holds idle buffers between files. They live outside the
// Go heap (mapped, page-aligned), so they do not raise the garbage
// collector's heap goal, which would double them in the peak RSS.
var directPool struct {
	sync.Mutex
	bufs [][]byte
}

func getDirectBuf() ([]byte, error) {
	directPool.Lock()
	if n := len(directPool.bufs); n > 0 {
		b := directPool.bufs[n-1]
		directPool.bufs = directPool.bufs[:n-1]
		directPool.Unlock()
		return b[:0], nil
	}
	directPool.Unlock()
	b, err := allocAligned(directBufBytes)
	if err != nil {
		return nil, err
	}
	return b[:0], nil
}

func putDirectBuf(b []byte) {
	directPool.Lock()
	defer directPool.Unlock()
	if len(directPool.bufs) < directPoolMax {
		directPool.bufs = append(directPool.bufs, b[:0])
		return
	}
	freeAligned(b)
}

type directJob struct {
	b   []byte
	off int64
}

// directWriter is the buffered, asynchronous write path of a fileWriter
// opened under DirectWrites. Its Write and flush are called by the
// fileWriter's one user; the goroutine it starts does the writes, in
// order, at their offsets (pwrite), so the file's own offset is not used
// until the fileWriter sets it (ReadFrom, after flush). While O_DIRECT is
// on, every write starts at an aligned offset: only whole buffers and
// the aligned part of the last one are written so.
type directWriter struct {
	f       *os.File
	cur     []byte      // the buffer being filled
	pos     int64       // the file offset of cur[0]
	free    chan []byte // buffers written, to fill again
	bufs    int         // buffers taken from the pool
	jobs    chan directJob
	done    chan struct{}
	mu      sync.Mutex
	err     error       // the first failed write's
	direct  atomic.Bool // the writes still go around the page cache
	started bool
}

func newDirectWriter(f *os.File) *directWriter {
	d := &directWriter{f: f, free: make(chan []byte, directBufs), jobs: make(chan directJob, directBufs), done: make(chan struct{})}
	d.direct.Store(true)
	go d.run()
	d.started = true
	return d
}

func (d *directWriter) run() {
	defer close(d.done)
	for j := range d.jobs {
		if d.failed() == nil {
			d.setErr(d.writeAt(j.b, j.off))
		}
		d.free <- j.b[:0]
	}
}

// writeAt writes b at off. A file system that takes O_DIRECT at open but
// refuses a write with it (EINVAL) gets this one and the rest through the
// page cache.
func (d *directWriter) writeAt(b []byte, off int64) error {
	_, err := d.f.WriteAt(b, off)
	if err != nil && d.direct.Load() && errors.Is(err, errInvalid) && setDirect(d.f, false) == nil {
		d.direct.Store(false)
		_, err = d.f.WriteAt(b, off)
	}
	return err
}

func (d *directWriter) failed() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

func (d *directWriter) setErr(err error) {
	if err == nil {
		return
	}
	d.mu.Lock()
	if d.err == nil {
		d.err = err
	}
	d.mu.Unlock()
}

func (d *directWriter) Write(p []byte) (int, error) {
	if err := d.failed(); err != nil {
		return 0, err
	}
	n := 0
	for len(p) > 0 {
		if d.cur == nil {
			if err := d.take(); err != nil {
				d.setErr(err)
				return n, err
			}
		}
		k := copy(d.cur[len(d.cur):cap(d.cur)], p)
		d.cur = d.cur[:len(d.cur)+k]
		p, n = p[k:], n+k
		if len(d.cur) == cap(d.cur) {
			d.submit(d.cur)
		}
	}
	return n, nil
}

// take makes cur a buffer to fill: a new one while fewer than
// directBufs are out, else the next one written.
func (d *directWriter) take() error {
	if d.bufs < directBufs {
		b, err := getDirectBuf()
		if err != nil {
			return err
		}
		d.bufs++
		d.cur = b
		return nil
	}
	d.cur = <-d.free
	return nil
}

// submit hands a full buffer (or the last, aligned part of one) to the
// goroutine.
func (d *directWriter) submit(b []byte) {
	d.jobs <- directJob{b: b, off: d.pos}
	d.pos += int64(len(b))
	d.cur = nil
}

// flush writes what is buffered and waits until no write is in flight.
// A tail shorter than an aligned block goes through the page cache
// (O_DIRECT cleared for good: a direct write's length must be aligned
// too). It returns the writes' first error.
func (d *directWriter) flush() error {
	held := false
	var tail []byte
	if d.cur != nil {
		n := len(d.cur)
		if d.direct.Load() {
			n &^= directAlign - 1
		}
		tail = d.cur[n:]
		if n > 0 {
			d.submit(d.cur[:n]) // the goroutine returns the buffer; tail is left as it is
		} else {
			held = true
		}
		d.cur = nil
	}
	bufs := make([][]byte, 0, directBufs)
	if held {
		bufs = append(bufs, tail[:0])
	}
	for len(bufs) < d.bufs {
		bufs = append(bufs, <-d.free)
	}
	// Every buffer is here: no write is in flight.
	err := d.failed()
	if err == nil && len(tail) > 0 {
		if err = d.leaveDirect(); err == nil {
			_, err = d.f.WriteAt(tail, d.pos)
			d.pos += int64(len(tail))
		}
	}
	d.setErr(err)
	for _, b := range bufs {
		d.free <- b[:0]
	}
	return d.failed()
}

// leaveDirect sends the later writes through the page cache. Only with
// no write in flight.
func (d *directWriter) leaveDirect() error {
	if !d.direct.Load() {
		return nil
	}
	if err := setDirect(d.f, false); err != nil {
		return err
	}
	d.direct.Store(false)
	return nil
}

// stop ends the goroutine, having written what is buffered (write) or
// dropped it (the file is being removed), and returns the buffers to the
// pool. It is idempotent.
func (d *directWriter) stop(write bool) error {
	if !d.started {
		return d.failed()
	}
	if write {
		_ = d.flush()
	} else if d.cur != nil {
		d.free <- d.cur[:0]
		d.cur = nil
	}
	d.started = false
	close(d.jobs)
	<-d.done
	for range d.bufs {
		putDirectBuf(<-d.free)
	}
	return d.failed()
}
