package faults

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/compactord/compactord/internal/storage"
)

// ErrInjected is the error a fault rule returns when none is given, and the
// root of every error this file makes: errors.Is(err, ErrInjected) tells an
// injected failure from a real one.
var ErrInjected = errors.New("injected fault")

// ErrInjectedTimeout looks like a network timeout on the response path (it is
// a net.Error with Timeout() true and matches os.ErrDeadlineExceeded) and matches ErrInjected. Use it with
// LandThenFail for the ambiguous case: the write happened, the caller cannot
// know. It deliberately is not context.DeadlineExceeded, which would claim
// the caller's own deadline expired.
var ErrInjectedTimeout error = injectedTimeout{}

type injectedTimeout struct{}

func (injectedTimeout) Error() string   { return "injected fault: i/o timeout awaiting response" }
func (injectedTimeout) Timeout() bool   { return true }
func (injectedTimeout) Temporary() bool { return true }
func (injectedTimeout) Is(target error) bool {
	// It stands for a network read that timed out: os.ErrDeadlineExceeded
	// is what the net package reports then.
	return target == ErrInjected || target == os.ErrDeadlineExceeded
}

// Action is what a firing fault rule does. Build one with Fail, LandThenFail,
// Delay or Block.
type Action struct {
	kind  actionKind
	err   error
	delay time.Duration
	until <-chan struct{}
}

type actionKind int

const (
	actFail actionKind = iota + 1
	actLandThenFail
	actDelay
	actBlock
)

// Fail makes the operation return err without being performed. A nil err
// means ErrInjected.
func Fail(err error) Action { return Action{kind: actFail, err: orInjected(err)} }

// LandThenFail performs the operation and then returns err, as when a write
// succeeds but its response is lost. A nil err means ErrInjectedTimeout.
func LandThenFail(err error) Action {
	if err == nil {
		err = ErrInjectedTimeout
	}
	return Action{kind: actLandThenFail, err: err}
}

// Delay holds the operation for d before performing it. If the operation's
// context ends first, it returns the context error and is not performed.
func Delay(d time.Duration) Action { return Action{kind: actDelay, delay: d} }

// Block holds the operation until ch is closed, then performs it. If the
// operation's context ends first, it returns the context error and is not
// performed. Tests use it to park an operation at a known point.
func Block(ch <-chan struct{}) Action { return Action{kind: actBlock, until: ch} }

func orInjected(err error) error {
	if err == nil {
		return ErrInjected
	}
	return err
}

// Fault describes a fault rule: which calls it matches and what it does.
type Fault struct {
	// Ops restricts the rule to these operation kinds; empty matches all.
	Ops []storage.Op
	// KeyPrefix and KeyContains restrict the rule by key (for List, by the
	// listing prefix). Empty matches all.
	KeyPrefix   string
	KeyContains string
	// Nth fires the rule on the Nth matching call only (1-based); 0 fires
	// it on every matching call.
	Nth int
	// Action is performed when the rule fires.
	Action Action
}

// FaultRule is a rule installed in a Faulty bucket.
type FaultRule struct {
	f       *Faulty
	spec    Fault
	matched int // guarded by f.mu
	fired   int // guarded by f.mu
}

// Matched returns how many calls matched the rule's filters so far.
func (r *FaultRule) Matched() int {
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	return r.matched
}

// Fired returns how many times the rule's action was taken.
func (r *FaultRule) Fired() int {
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	return r.fired
}

// Faulty wraps a storage.Bucket and injects faults into the calls that match its
// rules. Rules can be added and removed while the bucket is in use from many
// goroutines. It deliberately does not implement storage.LocalPather: direct file
// access would bypass the faults.
type Faulty struct {
	b     storage.Bucket
	mu    sync.Mutex
	rules []*FaultRule
}

var _ storage.Bucket = (*Faulty)(nil)

// NewFaulty wraps b. With no rules it behaves exactly like b.
func NewFaulty(b storage.Bucket) *Faulty { return &Faulty{b: b} }

// Add installs a rule and returns it, for counting and removal.
func (f *Faulty) Add(spec Fault) *FaultRule {
	r := &FaultRule{f: f, spec: spec}
	f.mu.Lock()
	f.rules = append(f.rules, r)
	f.mu.Unlock()
	return r
}

// Remove uninstalls r. Calls already past the rule are unaffected.
func (f *Faulty) Remove(r *FaultRule) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, x := range f.rules {
		if x == r {
			f.rules = append(f.rules[:i:i], f.rules[i+1:]...)
			return
		}
	}
}

// Clear uninstalls every rule.
func (f *Faulty) Clear() {
	f.mu.Lock()
	f.rules = nil
	f.mu.Unlock()
}

// Fired returns the total number of actions taken by the installed rules.
func (f *Faulty) Fired() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, r := range f.rules {
		n += r.fired
	}
	return n
}

// plan is what the rules decided for one call.
type plan struct {
	waits   []Action // delays and blocks, in rule order
	err     error    // from the first firing Fail or LandThenFail
	landErr bool     // err is returned after performing the operation
}

// match counts the call against every rule. All firing delays and blocks
// are applied, then the first firing Fail or LandThenFail.
func (f *Faulty) match(op storage.Op, key string) plan {
	f.mu.Lock()
	defer f.mu.Unlock()
	var p plan
	for _, r := range f.rules {
		s := &r.spec
		if len(s.Ops) > 0 && !containsOp(s.Ops, op) {
			continue
		}
		if !strings.HasPrefix(key, s.KeyPrefix) || !strings.Contains(key, s.KeyContains) {
			continue
		}
		r.matched++
		if s.Nth != 0 && r.matched != s.Nth {
			continue
		}
		r.fired++
		switch s.Action.kind {
		case actDelay, actBlock:
			p.waits = append(p.waits, s.Action)
		case actFail, actLandThenFail:
			if p.err == nil {
				p.err = s.Action.err
				p.landErr = s.Action.kind == actLandThenFail
			}
		}
	}
	return p
}

func containsOp(ops []storage.Op, op storage.Op) bool {
	for _, o := range ops {
		if o == op {
			return true
		}
	}
	return false
}

// before applies the waits and a Fail. It returns a non-nil error if the
// operation must not be performed.
func (p plan) before(ctx context.Context, op storage.Op, key string) error {
	for _, a := range p.waits {
		var timeout <-chan time.Time // nil (never ready) for Block
		if a.kind == actDelay {
			t := time.NewTimer(a.delay)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-a.until: // nil (never ready) for Delay
		case <-timeout:
		case <-ctx.Done():
			return fmt.Errorf("%s %s: %w", op, key, ctx.Err())
		}
	}
	if p.err != nil && !p.landErr {
		return fmt.Errorf("%s %s: %w", op, key, p.err)
	}
	return nil
}

// after returns the LandThenFail error, if any, in place of opErr when the
// operation itself succeeded.
func (p plan) after(op storage.Op, key string, opErr error) error {
	if opErr == nil && p.landErr {
		return fmt.Errorf("%s %s: %w", op, key, p.err)
	}
	return opErr
}

func (f *Faulty) Get(ctx context.Context, key string) ([]byte, error) {
	p := f.match(storage.OpGet, key)
	if err := p.before(ctx, storage.OpGet, key); err != nil {
		return nil, err
	}
	data, err := f.b.Get(ctx, key)
	if err = p.after(storage.OpGet, key, err); err != nil {
		return nil, err
	}
	return data, nil
}

func (f *Faulty) NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	p := f.match(storage.OpGetRange, key)
	if err := p.before(ctx, storage.OpGetRange, key); err != nil {
		return nil, err
	}
	r, err := f.b.NewRangeReader(ctx, key, offset, length)
	if err == nil && p.landErr {
		r.Close()
	}
	if err = p.after(storage.OpGetRange, key, err); err != nil {
		return nil, err
	}
	return r, nil
}

func (f *Faulty) Put(ctx context.Context, key string, data []byte) error {
	p := f.match(storage.OpPut, key)
	if err := p.before(ctx, storage.OpPut, key); err != nil {
		return err
	}
	return p.after(storage.OpPut, key, f.b.Put(ctx, key, data))
}

func (f *Faulty) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	p := f.match(storage.OpPutIfAbsent, key)
	if err := p.before(ctx, storage.OpPutIfAbsent, key); err != nil {
		return err
	}
	return p.after(storage.OpPutIfAbsent, key, f.b.PutIfAbsent(ctx, key, data))
}

// NewWriter matches the rules when the writer is created and applies the
// action at Close, where a streamed write is published: Fail abandons the
// write, LandThenFail publishes it and then fails, Delay and Block hold the
// publication.
func (f *Faulty) NewWriter(ctx context.Context, key string) (io.WriteCloser, error) {
	p := f.match(storage.OpUpload, key)
	wctx, cancel := context.WithCancel(ctx)
	w, err := f.b.NewWriter(wctx, key)
	if err != nil {
		cancel()
		return nil, err
	}
	return &faultyWriter{WriteCloser: w, ctx: ctx, cancel: cancel, p: p, key: key}, nil
}

type faultyWriter struct {
	io.WriteCloser
	ctx    context.Context
	cancel context.CancelFunc
	p      plan
	key    string
}

func (w *faultyWriter) Close() error {
	defer w.cancel()
	if err := w.p.before(w.ctx, storage.OpUpload, w.key); err != nil {
		w.cancel() // abandon: the inner writer sees a canceled context
		w.WriteCloser.Close()
		return err
	}
	return w.p.after(storage.OpUpload, w.key, w.WriteCloser.Close())
}

func (f *Faulty) Attributes(ctx context.Context, key string) (storage.Attrs, error) {
	p := f.match(storage.OpAttributes, key)
	if err := p.before(ctx, storage.OpAttributes, key); err != nil {
		return storage.Attrs{}, err
	}
	a, err := f.b.Attributes(ctx, key)
	if err = p.after(storage.OpAttributes, key, err); err != nil {
		return storage.Attrs{}, err
	}
	return a, nil
}

func (f *Faulty) List(ctx context.Context, prefix string, fn func(storage.Attrs) error) error {
	p := f.match(storage.OpList, prefix)
	if err := p.before(ctx, storage.OpList, prefix); err != nil {
		return err
	}
	return p.after(storage.OpList, prefix, f.b.List(ctx, prefix, fn))
}

func (f *Faulty) Delete(ctx context.Context, key string) error {
	p := f.match(storage.OpDelete, key)
	if err := p.before(ctx, storage.OpDelete, key); err != nil {
		return err
	}
	return p.after(storage.OpDelete, key, f.b.Delete(ctx, key))
}

func (f *Faulty) Close() error { return f.b.Close() }
