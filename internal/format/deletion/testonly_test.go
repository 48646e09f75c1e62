package deletion

// What only tests use: kept out of the product binary, still checked by the
// tests that exercise it.

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/compactord/compactord/gen/lancepb"
)

// ParseKey is the inverse of Key. It accepts a key with or without the
// _deletions/ prefix (or any longer prefix ending in it). The returned
// DeletionFile has no NumDeletedRows: only the manifest knows it.
func ParseKey(key string) (fragID uint64, df *lancepb.DeletionFile, err error) {
	name := key
	if i := strings.LastIndexByte(key, '/'); i >= 0 {
		if dir := key[:i]; dir != Dir && !strings.HasSuffix(dir, "/"+Dir) {
			return 0, nil, fmt.Errorf("deletion: key %q is not under %s/", key, Dir)
		}
		name = key[i+1:]
	}
	stem, ext, ok := strings.Cut(name, ".")
	if !ok {
		return 0, nil, fmt.Errorf("deletion: key %q has no extension", key)
	}
	df = &lancepb.DeletionFile{}
	switch ext {
	case "arrow":
		df.FileType = lancepb.DeletionFile_ARROW_ARRAY
	case "bin":
		df.FileType = lancepb.DeletionFile_BITMAP
	default:
		return 0, nil, fmt.Errorf("deletion: key %q: unknown extension %q", key, ext)
	}
	parts := strings.Split(stem, "-")
	if len(parts) != 3 {
		return 0, nil, fmt.Errorf("deletion: key %q is not {fragment}-{read_version}-{id}", key)
	}
	var nums [3]uint64
	for i, p := range parts {
		// ParseUint accepts "+1" and leading zeros; Lance never writes
		// those, and a key that does not round-trip would be a second
		// name for the same file.
		if p == "" || (len(p) > 1 && p[0] == '0') || p[0] < '0' || p[0] > '9' {
			return 0, nil, fmt.Errorf("deletion: key %q: %q is not a decimal u64", key, p)
		}
		if nums[i], err = strconv.ParseUint(p, 10, 64); err != nil {
			return 0, nil, fmt.Errorf("deletion: key %q: %q is not a decimal u64", key, p)
		}
	}
	df.ReadVersion, df.Id = nums[1], nums[2]
	return nums[0], df, nil
}
