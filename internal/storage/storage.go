// Package storage is the object-store layer every other package writes
// through. It opens any gocloud.dev/blob URL and adds the one primitive the
// commit protocol rests on: an atomic put-if-absent, with a single
// classification of a lost race across backends.
//
// INVARIANT: PutIfAbsent is atomic on every backend. Exactly one of any number
// of concurrent callers for one key succeeds; every other caller gets an error
// for which IsAlreadyExists is true.
package storage

import (
	"context"
	"errors"
	"io"
	"time"
)

// Sentinel classes. Backend errors are wrapped so that errors.Is works.
var (
	// ErrNotFound: the key does not exist.
	ErrNotFound = errors.New("object not found")
	// ErrAlreadyExists: a conditional write lost its race (the key exists).
	ErrAlreadyExists = errors.New("object already exists")
)

// IsNotFound reports whether err means the key does not exist.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// IsAlreadyExists reports whether err is a lost put-if-absent race.
func IsAlreadyExists(err error) bool { return errors.Is(err, ErrAlreadyExists) }

// Attrs describes a stored object.
type Attrs struct {
	Key     string
	Size    int64
	ModTime time.Time
}

// Bucket is one table root (or a parent prefix of table roots). Keys are
// slash-separated and relative to the root.
type Bucket interface {
	// Get reads a whole object.
	Get(ctx context.Context, key string) ([]byte, error)
	// NewRangeReader reads length bytes at offset; length < 0 reads to the end.
	NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error)
	// Put writes (or overwrites) an object.
	Put(ctx context.Context, key string, data []byte) error
	// NewWriter streams an object; it becomes visible on a successful Close.
	// Closing after ctx is canceled abandons the write.
	NewWriter(ctx context.Context, key string) (io.WriteCloser, error)
	// PutIfAbsent writes data only if key does not exist. See the package
	// INVARIANT.
	PutIfAbsent(ctx context.Context, key string, data []byte) error
	// Attributes returns size and modification time.
	Attributes(ctx context.Context, key string) (Attrs, error)
	// List calls fn for every object under prefix, in lexical key order.
	// Returning a non-nil error from fn stops the listing and returns it.
	List(ctx context.Context, prefix string, fn func(Attrs) error) error
	// Delete removes an object. Deleting a missing key returns ErrNotFound.
	Delete(ctx context.Context, key string) error
	// Close releases the bucket.
	Close() error
}
