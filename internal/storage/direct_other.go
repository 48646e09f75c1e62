//go:build !linux

package storage

import (
	"errors"
	"os"
	"syscall"
)

var errInvalid error = syscall.EINVAL

// setDirect: no O_DIRECT here; DirectWrites falls back to the page cache.
func setDirect(f *os.File, on bool) error {
	if on {
		return errors.ErrUnsupported
	}
	return nil
}

func syncData(f *os.File) error { return f.Sync() }

// allocAligned: never called without O_DIRECT, which setDirect refuses
// here.
func allocAligned(n int) ([]byte, error) { return make([]byte, n), nil }

func freeAligned([]byte) {}
