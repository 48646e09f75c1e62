package faults

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/compactord/compactord/internal/storage"
)

// OutageBucket injects a lost response followed by an outage: the Nth call
// of one operation kind under a key prefix is performed and then reports
// a timeout (it landed; the caller cannot know), and the next K calls of
// any kind fail with a timeout without being performed. It is what a
// dropped connection looks like from the client: Faulty's rules
// count calls per rule, so they cannot express "the K calls after that
// one". Every error matches ErrInjected.
type OutageBucket struct {
	b  storage.Bucket
	mu sync.Mutex
	// trigger
	armed  bool
	op     storage.Op
	prefix string
	nth    int
	// state
	seen  int
	left  int // calls still to fail after the trigger
	fired int
}

var _ storage.Bucket = (*OutageBucket)(nil)

// NewOutageBucket wraps b, disarmed.
func NewOutageBucket(b storage.Bucket) *OutageBucket { return &OutageBucket{b: b} }

// Arm sets the trigger: the nth call of op under prefix lands and fails,
// then k calls fail.
func (o *OutageBucket) Arm(op storage.Op, prefix string, nth, k int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.armed, o.op, o.prefix, o.nth, o.seen, o.left, o.fired = true, op, prefix, nth, 0, k, 0
}

// Disarm ends the outage and returns how many calls it failed.
func (o *OutageBucket) Disarm() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.armed = false
	return o.fired
}

// Fired returns how many calls the outage failed so far.
func (o *OutageBucket) Fired() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.fired
}

// decide returns what to do with one call: perform it, perform it then
// fail (the trigger), or fail it.
func (o *OutageBucket) decide(op storage.Op, key string) (perform bool, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.armed {
		return true, nil
	}
	if o.seen >= o.nth { // past the trigger: in the outage
		if o.left > 0 {
			o.left--
			o.fired++
			return false, fmt.Errorf("%s %s: %w", op, key, ErrInjectedTimeout)
		}
		return true, nil
	}
	if op == o.op && strings.HasPrefix(key, o.prefix) {
		o.seen++
		if o.seen == o.nth {
			o.fired++
			return true, fmt.Errorf("%s %s: %w", op, key, ErrInjectedTimeout)
		}
	}
	return true, nil
}

func (o *OutageBucket) Get(ctx context.Context, key string) ([]byte, error) {
	perform, ferr := o.decide(storage.OpGet, key)
	if !perform {
		return nil, ferr
	}
	data, err := o.b.Get(ctx, key)
	if err == nil && ferr != nil {
		return nil, ferr
	}
	return data, err
}

func (o *OutageBucket) NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	perform, ferr := o.decide(storage.OpGetRange, key)
	if !perform {
		return nil, ferr
	}
	r, err := o.b.NewRangeReader(ctx, key, offset, length)
	if err == nil && ferr != nil {
		r.Close()
		return nil, ferr
	}
	return r, err
}

func (o *OutageBucket) Put(ctx context.Context, key string, data []byte) error {
	perform, ferr := o.decide(storage.OpPut, key)
	if !perform {
		return ferr
	}
	if err := o.b.Put(ctx, key, data); err != nil {
		return err
	}
	return ferr
}

func (o *OutageBucket) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	perform, ferr := o.decide(storage.OpPutIfAbsent, key)
	if !perform {
		return ferr
	}
	if err := o.b.PutIfAbsent(ctx, key, data); err != nil {
		return err
	}
	return ferr
}

// NewWriter decides at creation; a failed upload is abandoned at Close,
// a triggering one is published and then fails.
func (o *OutageBucket) NewWriter(ctx context.Context, key string) (io.WriteCloser, error) {
	perform, ferr := o.decide(storage.OpUpload, key)
	if !perform {
		return nil, ferr
	}
	w, err := o.b.NewWriter(ctx, key)
	if err != nil || ferr == nil {
		return w, err
	}
	return &failAfterClose{WriteCloser: w, err: ferr}, nil
}

type failAfterClose struct {
	io.WriteCloser
	err error
}

func (w *failAfterClose) Close() error {
	if err := w.WriteCloser.Close(); err != nil {
		return err
	}
	return w.err
}

func (o *OutageBucket) Attributes(ctx context.Context, key string) (storage.Attrs, error) {
	perform, ferr := o.decide(storage.OpAttributes, key)
	if !perform {
		return storage.Attrs{}, ferr
	}
	a, err := o.b.Attributes(ctx, key)
	if err == nil && ferr != nil {
		return storage.Attrs{}, ferr
	}
	return a, err
}

func (o *OutageBucket) List(ctx context.Context, prefix string, fn func(storage.Attrs) error) error {
	perform, ferr := o.decide(storage.OpList, prefix)
	if !perform {
		return ferr
	}
	if err := o.b.List(ctx, prefix, fn); err != nil {
		return err
	}
	return ferr
}

func (o *OutageBucket) Delete(ctx context.Context, key string) error {
	perform, ferr := o.decide(storage.OpDelete, key)
	if !perform {
		return ferr
	}
	if err := o.b.Delete(ctx, key); err != nil {
		return err
	}
	return ferr
}

func (o *OutageBucket) Close() error { return o.b.Close() }
