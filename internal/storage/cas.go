package storage

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"syscall"
	"time"

	"gocloud.dev/gcerrors"
)

// PutOutcome is what a put-if-absent of a versioned object's next version
// came to. Every writer of versioned objects (table versions in the commit
// loop, MemWAL shard manifests and WAL entries, leases) publishes through
// PutNext, so that an ambiguous put is resolved, and a lost race told
// apart, the same way everywhere.
type PutOutcome int

const (
	// PutLanded: the object at the key is ours.
	PutLanded PutOutcome = iota + 1
	// PutLost: another writer's object is at the key; the race is lost.
	PutLost
	// PutAbsent: the put failed ambiguously and nothing is at the key: it
	// did not land, and trying again is safe.
	PutAbsent
	// PutUnknown: the put failed ambiguously and the read-back could not
	// tell whether it landed.
	PutUnknown
	// PutFailed: the put failed permanently (IsPermanent): nothing landed.
	PutFailed
)

func (o PutOutcome) String() string {
	switch o {
	case PutLanded:
		return "landed"
	case PutLost:
		return "lost"
	case PutAbsent:
		return "absent"
	case PutUnknown:
		return "unknown"
	case PutFailed:
		return "failed"
	}
	return "invalid"
}

// DefaultReadBackTimeout bounds a read-back whose ReadBack.Timeout is zero.
const DefaultReadBackTimeout = 30 * time.Second

// ReadBack says how PutNext resolves a put whose outcome it does not know.
type ReadBack struct {
	// Ours reports whether the object found at the key is the one this
	// writer put; nil compares it with the bytes put. An error counts as a
	// failed read (see Wait).
	Ours func(ctx context.Context, got []byte) (bool, error)
	// Timeout bounds the read-back (DefaultReadBackTimeout when zero). It
	// runs detached from the caller's cancellation: a put that may have
	// landed is resolved even when the caller is giving up.
	Timeout time.Duration
	// Wait, when set, runs between read attempts that failed for another
	// reason than the key's absence (attempt 0, 1, ...); an error from it
	// ends the read-back with PutUnknown. Nil: one attempt.
	Wait func(ctx context.Context, attempt int) error
	// Taken also reads back a key the put found taken, for a writer that
	// has no other way to recognise its own earlier put (a client retry
	// of a put whose first try landed finds the key taken by itself).
	Taken bool
}

// PutNext writes data at key only if the key is absent, and classifies the
// outcome: PutLanded (err nil), PutLost, PutAbsent, PutUnknown or PutFailed,
// with the put's error. A put that failed ambiguously (a timeout, a reset,
// a 5xx) is resolved by reading the key back as rb says.
func PutNext(ctx context.Context, b Bucket, key string, data []byte, rb ReadBack) (PutOutcome, error) {
	err := b.PutIfAbsent(ctx, key, data)
	switch {
	case err == nil:
		return PutLanded, nil
	case IsAlreadyExists(err) && !rb.Taken:
		return PutLost, err
	case IsPermanent(err):
		return PutFailed, err
	}
	out := readBack(ctx, b, key, data, rb)
	if out == PutLanded {
		return PutLanded, nil
	}
	if out == PutAbsent && IsAlreadyExists(err) {
		// Taken, then gone: a cleaner removed the rival's object. Still
		// a lost race.
		out = PutLost
	}
	return out, err
}

func readBack(ctx context.Context, b Bucket, key string, data []byte, rb ReadBack) PutOutcome {
	timeout := rb.Timeout
	if timeout <= 0 {
		timeout = DefaultReadBackTimeout
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	ours := rb.Ours
	if ours == nil {
		ours = func(_ context.Context, got []byte) (bool, error) { return bytes.Equal(got, data), nil }
	}
	for i := 0; ; i++ {
		got, err := b.Get(rctx, key)
		if err == nil {
			var mine bool
			if mine, err = ours(rctx, got); err == nil {
				if mine {
					return PutLanded
				}
				return PutLost
			}
		} else if IsNotFound(err) {
			return PutAbsent
		}
		if rctx.Err() != nil || rb.Wait == nil || rb.Wait(rctx, i) != nil {
			return PutUnknown
		}
	}
}

// IsPermanent reports whether a failed put certainly did not land and will
// not succeed on retry (denied, read-only, full, malformed). Everything else
// (timeouts, resets, 5xx) is ambiguous and resolved by reading back.
func IsPermanent(err error) bool {
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.ENOSPC) {
		return true
	}
	switch gcerrors.Code(err) {
	case gcerrors.PermissionDenied, gcerrors.InvalidArgument, gcerrors.Unimplemented:
		return true
	}
	return false
}
