package storage

import (
	"fmt"
	"strings"
)

// tmpPrefix starts the name of every in-flight temporary file of the file
// backend. Keys may not contain a segment with this prefix, so a listing can
// skip temporaries without ever hiding a real object.
const tmpPrefix = ".tmp-"

// ValidateKey reports whether key is usable on every backend. Keys are
// slash-separated relative paths: no leading or trailing slash, no empty,
// "." or ".." segments (they would alias or escape the root on the file
// backend), no NUL bytes, and no segment starting with ".tmp-" (reserved for
// the file backend's temporary files). Every Bucket returned by this package
// applies the same rule so that code tested on one backend behaves the same on
// the others.
func ValidateKey(key string) error {
	if key == "" {
		return fmt.Errorf("invalid key %q: empty", key)
	}
	return validatePath(key, "key")
}

// validatePrefix checks a listing prefix or a Sub prefix. Unlike a key it may
// be empty and may end in a slash, and its last segment may be partial.
func validatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	return validatePath(strings.TrimSuffix(prefix, "/"), "prefix")
}

func validatePath(p, what string) error {
	if strings.HasPrefix(p, "/") {
		return fmt.Errorf("invalid %s %q: must be relative (no leading '/')", what, p)
	}
	if strings.ContainsRune(p, 0) {
		return fmt.Errorf("invalid %s %q: contains NUL", what, p)
	}
	for seg := range strings.SplitSeq(p, "/") {
		switch {
		case seg == "":
			return fmt.Errorf("invalid %s %q: empty path segment", what, p)
		case seg == "." || seg == "..":
			return fmt.Errorf("invalid %s %q: %q segments are not allowed", what, p, seg)
		case strings.HasPrefix(seg, tmpPrefix):
			return fmt.Errorf("invalid %s %q: segments starting with %q are reserved", what, p, tmpPrefix)
		}
	}
	return nil
}
