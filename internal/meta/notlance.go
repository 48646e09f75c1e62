package meta

import (
	"context"
	"errors"
	"fmt"

	"github.com/compactord/compactord/internal/storage"
)

// ErrNotLance: the location holds manifests, but not Lance's (a table of
// compactord's retired private format, or something else). compactord
// maintains Lance tables only, and never touches such a location.
var ErrNotLance = errors.New("not a Lance dataset")

// CheckLance reports whether the location holds a Lance dataset (true), no
// table at all (false, nil: one may be created there), or a table of
// another format (an error wrapping ErrNotLance).
func CheckLance(ctx context.Context, b storage.Bucket) (bool, error) {
	ok, err := Detect(ctx, b)
	if err != nil || ok {
		return ok, err
	}
	key, size, err := newestManifest(ctx, b)
	if errors.Is(err, ErrNoTable) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if kind, err := manifestKind(ctx, b, key, size); err == nil && kind == kindPrivate {
		return false, fmt.Errorf("%w: it holds a table of compactord's retired private format, which this version no longer reads (compactord maintains Lance tables only)", ErrNotLance)
	}
	return false, fmt.Errorf("%w: its newest manifest %s is not a Lance manifest", ErrNotLance, key)
}
