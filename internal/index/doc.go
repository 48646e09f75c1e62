// Package index holds the secondary indices of a table.
//
// A logical index is every segment (IndexMetadata) sharing a name. Each
// segment covers the fragments in its fragment_bitmap and stores row
// addresses (fragment<<32 | offset) as they were at its dataset_version:
//
//   - btree: sorted (key, address) pairs in Parquet row groups; a lookup
//     skips row groups by their key statistics and binary-searches the rest.
//   - bitmap: value -> roaring64 of addresses, for low-cardinality columns,
//     in one framed file.
//
// Addresses go stale when a deferred compaction rewrites fragments. Readers
// never trust them as stored: Lookup remaps every segment's addresses
// through the fragment-reuse index (only the versions newer than the
// segment's data), then drops rows whose fragment is no longer live or whose
// offset is deleted. The physical remap job (internal/indexjob) rewrites
// segments so that the FRI can be trimmed.
//
// Building writes segment files under _indices/<uuid>/, which stay invisible
// until a CreateIndex (or an inline-remap Rewrite) commits them.
package index

import (
	"errors"
	"fmt"

	"github.com/compactord/compactord/internal/table"
)

// Index types.
const (
	TypeBTree  = "btree"
	TypeBitmap = "bitmap"
)

var (
	// ErrNoIndex: no index of that name exists.
	ErrNoIndex = errors.New("no such index")
	// ErrCorrupt marks a segment file that cannot be read back. It wraps
	// table.ErrCorrupt, so either sentinel matches with errors.Is.
	ErrCorrupt = fmt.Errorf("index segment: %w", table.ErrCorrupt)
	// ErrBadSpec: the index definition is invalid (unknown column or type,
	// reserved or duplicate name, too many distinct values for a bitmap).
	ErrBadSpec = errors.New("invalid index definition")
)

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}
