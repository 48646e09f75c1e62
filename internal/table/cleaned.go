package table

import (
	"context"
	"errors"
	"fmt"

	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
)

// ErrReadCleanedUp marks a job whose read version a concurrent cleanup
// removed while the job read its files: a deletion or data file that
// version named is gone because no retained version names it any more.
// The job lost a race, not data; it must plan again on the latest
// version. Errors carrying it are also retryable conflicts
// (commit.ErrRetryable).
var ErrReadCleanedUp = errors.New("the version read was cleaned up")

// ReadCleanedUp returns err marked with ErrReadCleanedUp (and as a
// retryable conflict of op) when it is a missing object and the manifest
// of read's version is gone too; otherwise err as it is. A missing object
// of a version that is still there is damage, which this must not hide.
// The result no longer matches storage.ErrNotFound, so nothing that
// treats a missing object as damage (a quarantine) acts on it.
func ReadCleanedUp(ctx context.Context, b storage.Bucket, naming meta.Naming, read *meta.ManifestFile, op string, err error) error {
	if err == nil || !errors.Is(err, storage.ErrNotFound) || errors.Is(err, ErrReadCleanedUp) || read == nil {
		return err
	}
	v := read.Manifest.GetVersion()
	if _, aerr := b.Attributes(ctx, meta.ManifestKey(naming, v)); !errors.Is(aerr, storage.ErrNotFound) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrReadCleanedUp, &commit.ConflictError{Class: commit.ErrRetryable, Ours: op,
		Reason: fmt.Sprintf("version %d, which it read, was removed by a cleanup meanwhile: %v", v, err)})
}
