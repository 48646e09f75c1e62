package faults

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/compactord/compactord/internal/storage"
)

// ErrCrashed is returned by every operation of a CrashBucket after its
// crash point: the process it stands for is dead.
var ErrCrashed = errors.New("simulated crash: the process is gone")

// CrashBucket simulates a process crash in-process. Once armed with n, the
// first n operations run normally and every later one fails with
// ErrCrashed without being performed, so the operation in progress stops
// at that point exactly as a killed process would: what it wrote stays,
// nothing after (its deferred clean-ups included) happens. A streamed
// upload is published at Close, so an upload closed after the crash point
// is abandoned.
type CrashBucket struct {
	b       storage.Bucket
	mu      sync.Mutex
	armed   bool
	left    int
	crashed bool
}

var _ storage.Bucket = (*CrashBucket)(nil)

// NewCrashBucket wraps b, disarmed.
func NewCrashBucket(b storage.Bucket) *CrashBucket { return &CrashBucket{b: b} }

// Arm makes the bucket crash after n more operations.
func (c *CrashBucket) Arm(n int) {
	c.mu.Lock()
	c.armed, c.left, c.crashed = true, n, false
	c.mu.Unlock()
}

// Disarm ends the crash (the process restarted) and reports whether the
// crash point was reached.
func (c *CrashBucket) Disarm() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	crashed := c.crashed
	c.armed, c.crashed = false, false
	return crashed
}

// Crashed reports whether the crash point has been reached.
func (c *CrashBucket) Crashed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.crashed
}

// enter counts one operation and reports whether it may run.
func (c *CrashBucket) enter(op storage.Op, key string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.armed {
		return nil
	}
	if c.crashed || c.left <= 0 {
		c.crashed = true
		return fmt.Errorf("%s %s: %w", op, key, ErrCrashed)
	}
	c.left--
	return nil
}

func (c *CrashBucket) alive() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.crashed
}

func (c *CrashBucket) Get(ctx context.Context, key string) ([]byte, error) {
	if err := c.enter(storage.OpGet, key); err != nil {
		return nil, err
	}
	return c.b.Get(ctx, key)
}

func (c *CrashBucket) NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := c.enter(storage.OpGetRange, key); err != nil {
		return nil, err
	}
	return c.b.NewRangeReader(ctx, key, offset, length)
}

func (c *CrashBucket) Put(ctx context.Context, key string, data []byte) error {
	if err := c.enter(storage.OpPut, key); err != nil {
		return err
	}
	return c.b.Put(ctx, key, data)
}

func (c *CrashBucket) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := c.enter(storage.OpPutIfAbsent, key); err != nil {
		return err
	}
	return c.b.PutIfAbsent(ctx, key, data)
}

func (c *CrashBucket) NewWriter(ctx context.Context, key string) (io.WriteCloser, error) {
	if err := c.enter(storage.OpUpload, key); err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(ctx)
	w, err := c.b.NewWriter(wctx, key)
	if err != nil {
		cancel()
		return nil, err
	}
	return &crashWriter{WriteCloser: w, c: c, cancel: cancel, key: key}, nil
}

type crashWriter struct {
	io.WriteCloser
	c      *CrashBucket
	cancel context.CancelFunc
	key    string
}

func (w *crashWriter) Close() error {
	defer w.cancel()
	if !w.c.alive() {
		w.cancel() // abandon: the upload is never published
		w.WriteCloser.Close()
		return fmt.Errorf("%s %s: %w", storage.OpUpload, w.key, ErrCrashed)
	}
	return w.WriteCloser.Close()
}

func (c *CrashBucket) Attributes(ctx context.Context, key string) (storage.Attrs, error) {
	if err := c.enter(storage.OpAttributes, key); err != nil {
		return storage.Attrs{}, err
	}
	return c.b.Attributes(ctx, key)
}

func (c *CrashBucket) List(ctx context.Context, prefix string, fn func(storage.Attrs) error) error {
	if err := c.enter(storage.OpList, prefix); err != nil {
		return err
	}
	return c.b.List(ctx, prefix, fn)
}

func (c *CrashBucket) Delete(ctx context.Context, key string) error {
	if err := c.enter(storage.OpDelete, key); err != nil {
		return err
	}
	return c.b.Delete(ctx, key)
}

func (c *CrashBucket) Close() error { return c.b.Close() }
