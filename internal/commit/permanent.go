package commit

import (
	"errors"
	"io/fs"
	"syscall"

	"gocloud.dev/gcerrors"
)

// isPermanent reports whether a failed put certainly did not land and will
// not succeed on retry (denied, read-only, full, malformed). Everything else
// (timeouts, resets, 5xx) is ambiguous and resolved by reading back.
func isPermanent(err error) bool {
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.ENOSPC) {
		return true
	}
	switch gcerrors.Code(err) {
	case gcerrors.PermissionDenied, gcerrors.InvalidArgument, gcerrors.Unimplemented:
		return true
	}
	return false
}

// IsPermanent is isPermanent for the Lance commit loop, which shares the rule.
func IsPermanent(err error) bool { return isPermanent(err) }
