package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"gocloud.dev/blob"
)

// contentType is set on every upload: gocloud's Upload requires one, and
// sniffing the content would be wasted work.
const contentType = "application/octet-stream"

// Retry policy for S3's 409 ConditionalRequestConflict on PutIfAbsent. The
// conflicting request did not land, so retrying is safe; a handful of short
// retries rides out the overlap with the other in-flight conditional write.
const (
	conflictAttempts = 5
	conflictBackoff  = 20 * time.Millisecond
)

// errBucketClosed is returned by every operation on a closed bucket. gocloud
// reports this case as FailedPrecondition, which classify would read as a lost
// put-if-absent race, so the bucket checks it first.
var errBucketClosed = errors.New("bucket is closed")

// cloudBucket implements Bucket on a gocloud.dev/blob bucket.
//
// PutIfAbsent relies on the driver's IfNotExist: If-None-Match: * on S3 and
// Azure, a DoesNotExist precondition on GCS, and on memblob a check-and-set
// done under the bucket's mutex when the writer closes (atomic; the race
// tests confirm it), so no extra locking is needed here.
//
// Known gap: only the S3 path disables SDK-level retries for conditional
// writes (see cond). The GCS and Azure SDKs may retry a conditional write
// whose response was lost, and then report the caller's own landed write as
// ErrAlreadyExists.
type cloudBucket struct {
	b *blob.Bucket
	// cond performs PutIfAbsent. It is b itself except on S3, where it is
	// the same bucket reached through a client with SDK retries turned off:
	// if a conditional PUT landed but its response was lost, an automatic
	// retry would come back 412 and report the winner as a loser, leaving
	// zero winners. Without retries that case surfaces as an ambiguous
	// (unclassified) error instead.
	cond *blob.Bucket
	// shared is set for named mem:// buckets: they live in the process-wide
	// registry and Close must not destroy them.
	shared bool
	closed atomic.Bool
}

// check rejects calls on a closed bucket, with an invalid key, or with a done
// context. The context check makes all backends agree: memblob ignores
// contexts on reads.
var _ Bucket = (*cloudBucket)(nil)

func (c *cloudBucket) check(ctx context.Context, key string) error {
	if c.closed.Load() {
		return errBucketClosed
	}
	if err := ValidateKey(key); err != nil {
		return err
	}
	return ctx.Err()
}

func (c *cloudBucket) Get(ctx context.Context, key string) ([]byte, error) {
	if err := c.check(ctx, key); err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	data, err := c.b.ReadAll(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, classify(err))
	}
	return data, nil
}

func (c *cloudBucket) NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := c.check(ctx, key); err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	r, err := c.b.NewRangeReader(ctx, key, offset, length, nil)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, classify(err))
	}
	return r, nil
}

func (c *cloudBucket) Put(ctx context.Context, key string, data []byte) error {
	if err := c.check(ctx, key); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	// Upload rather than NewWriter+Write: on Azure, gocloud v0.47's
	// streaming writer panics when a failed upload is closed.
	err := c.b.Upload(ctx, key, bytes.NewReader(data), &blob.WriterOptions{ContentType: contentType})
	if err != nil {
		return fmt.Errorf("put %s: %w", key, classify(err))
	}
	return nil
}

func (c *cloudBucket) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := c.check(ctx, key); err != nil {
		return fmt.Errorf("put-if-absent %s: %w", key, err)
	}
	backoff := conflictBackoff
	for attempt := 1; ; attempt++ {
		err := c.cond.Upload(ctx, key, bytes.NewReader(data), &blob.WriterOptions{
			ContentType: contentType,
			IfNotExist:  true,
		})
		err = classify(err)
		if err == nil {
			return nil
		}
		if !IsConflict(err) || attempt == conflictAttempts {
			return fmt.Errorf("put-if-absent %s (attempt %d): %w", key, attempt, err)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("put-if-absent %s (attempt %d): %w (after %w)", key, attempt, ctx.Err(), err)
		case <-t.C:
		}
		backoff *= 2
	}
}

// NewWriter streams through an io.Pipe into Bucket.Upload running in a
// goroutine, for the same Azure reason as Put. The upload runs under its own
// cancelable context so that an abandoned write is aborted rather than
// committed: gocloud commits whatever an Upload read unless the context is
// canceled.
func (c *cloudBucket) NewWriter(ctx context.Context, key string) (io.WriteCloser, error) {
	if err := c.check(ctx, key); err != nil {
		return nil, fmt.Errorf("write %s: %w", key, err)
	}
	uctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	w := &cloudWriter{ctx: ctx, key: key, cancel: cancel, pw: pw, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		w.err = c.b.Upload(uctx, key, pr, &blob.WriterOptions{ContentType: contentType})
		// Unblock a writer still sending after the upload gave up.
		pr.CloseWithError(errors.Join(errUploadEnded, w.err))
	}()
	return w, nil
}

var errUploadEnded = errors.New("upload ended")

type cloudWriter struct {
	ctx    context.Context
	key    string
	cancel context.CancelFunc
	pw     *io.PipeWriter
	done   chan struct{}
	err    error // set before done closes
	closed bool
}

func (w *cloudWriter) Write(p []byte) (int, error) {
	if w.closed {
		return 0, fmt.Errorf("write %s: write after close", w.key)
	}
	return w.pw.Write(p)
}

func (w *cloudWriter) Close() error {
	if w.closed {
		return fmt.Errorf("write %s: already closed", w.key)
	}
	w.closed = true
	defer w.cancel()
	if err := w.ctx.Err(); err != nil {
		w.cancel()
		w.pw.CloseWithError(err)
		<-w.done
		return fmt.Errorf("write %s: %w", w.key, err)
	}
	w.pw.Close()
	<-w.done
	if w.err != nil {
		return fmt.Errorf("write %s: %w", w.key, classify(w.err))
	}
	return nil
}

func (c *cloudBucket) Attributes(ctx context.Context, key string) (Attrs, error) {
	if err := c.check(ctx, key); err != nil {
		return Attrs{}, fmt.Errorf("attributes %s: %w", key, err)
	}
	a, err := c.b.Attributes(ctx, key)
	if err != nil {
		return Attrs{}, fmt.Errorf("attributes %s: %w", key, classify(err))
	}
	return Attrs{Key: key, Size: a.Size, ModTime: a.ModTime}, nil
}

func (c *cloudBucket) List(ctx context.Context, prefix string, fn func(Attrs) error) error {
	if c.closed.Load() {
		return fmt.Errorf("list %s: %w", prefix, errBucketClosed)
	}
	if err := validatePrefix(prefix); err != nil {
		return fmt.Errorf("list %s: %w", prefix, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("list %s: %w", prefix, err)
	}
	it := c.b.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("list %s: %w", prefix, classify(err))
		}
		if obj.IsDir {
			continue
		}
		if err := fn(Attrs{Key: obj.Key, Size: obj.Size, ModTime: obj.ModTime}); err != nil {
			return err
		}
	}
}

func (c *cloudBucket) Delete(ctx context.Context, key string) error {
	if err := c.check(ctx, key); err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	if err := c.b.Delete(ctx, key); err != nil {
		return fmt.Errorf("delete %s: %w", key, classify(err))
	}
	return nil
}

func (c *cloudBucket) Close() error {
	if c.closed.Swap(true) {
		return errBucketClosed
	}
	if c.shared {
		return nil
	}
	err := c.b.Close()
	if c.cond != c.b {
		err = errors.Join(err, c.cond.Close())
	}
	if err != nil {
		return fmt.Errorf("close bucket: %w", err)
	}
	return nil
}
