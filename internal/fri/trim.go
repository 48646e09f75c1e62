package fri

import (
	"context"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
)

// needed reports, per version, whether the data of index m may hold an
// address the version remaps. It is the one rule behind NeedsRemap and
// Trimmable.
//
// A stored fragment bitmap names every fragment the index's data holds
// addresses in: Lance leaves bitmaps alone in a deferred Rewrite, and
// every writer that rewrites an index writes the bitmap of its data. So,
// walking the versions oldest to newest (every one, as LanceDB applies
// them all), a version is needed when the set meets its removed fragments
// or a group's old fragments; a group met adds its new fragments, where
// those rows now live, so a later version compacting them is needed too.
//
// The dataset_version alone never proves a version absorbed: Lance stamps
// a version with the compaction's read version R, and an index built at R
// (or later, while a rebased compaction was in flight) holds its old
// addresses. It only matters the other way: a bitmap may have been moved
// onto new fragments without the data being remapped (a writer storing
// the load-time remapped bitmap; LanceDB's index optimize keeps the old
// dataset_version). So first, walking the versions with dataset_version
// >= the index's newest to oldest, any group whose new fragments the set
// meets adds its old fragments. An index compactord remapped has
// dataset_version = its read head, above every version, and skips this.
//
// An index without a bitmap needs every version. What no bitmap reveals:
// a fragment the bitmap no longer names although the data still holds its
// rows (compactord's load-time remap drops removed fragments, but
// compactord stores such a bitmap only with the data remapped; a straddled
// group's covered fragments, which LanceDB drops too; a group whose every
// row was deleted, which a moved bitmap loses). Fragment ids are
// never reused, so such rows stay masked by liveness: the worst case is
// dead entries in an index, never a wrong row.
func needed(m *pb.IndexMetadata, c *Chain) []bool {
	out := make([]bool, len(c.versions))
	bm, known, err := meta.FragmentBitmap(m)
	if err != nil || !known {
		for i := range out {
			out[i] = true
		}
		return out
	}
	data := bm.Clone()
	for i := len(c.versions) - 1; i >= 0; i-- {
		if c.versions[i].datasetVersion < m.GetDatasetVersion() {
			continue
		}
		for _, g := range c.versions[i].groups {
			if data.Intersects(g.newSet) {
				data.Or(g.oldSet)
			}
		}
	}
	for i := range c.versions {
		v := &c.versions[i]
		if data.Intersects(v.removed) {
			out[i] = true
		}
		for _, g := range v.groups {
			if data.Intersects(g.oldSet) {
				out[i] = true
				data.Or(g.newSet)
			}
		}
	}
	return out
}

// NeedsRemap reports whether a non-system index must be physically
// remapped: some version may remap an address its data holds (see needed).
//
// INVARIANT: an index that keeps a version from being trimmed needs a
// remap, and the remap (bitmap remapped, dataset_version = head) releases
// it, so the FRI always drains.
func (ix *Index) NeedsRemap(m *pb.IndexMetadata) bool {
	if ix == nil || ix.chain == nil || meta.IsSystemIndex(m) {
		return false
	}
	for _, n := range needed(m, ix.chain) {
		if n {
			return true
		}
	}
	return false
}

// keep marks the versions some non-system index of indices needs.
func (ix *Index) keep(indices []*pb.IndexMetadata) []bool {
	keep := make([]bool, len(ix.Versions))
	for _, m := range indices {
		if meta.IsSystemIndex(m) {
			continue
		}
		for i, n := range needed(m, ix.chain) {
			keep[i] = keep[i] || n
		}
	}
	return keep
}

// Trimmable returns the dataset versions of the versions no non-system
// index of indices needs any more (in chain order).
//
// A middle version may go, not only the oldest: needed follows each
// index's possible addresses through the whole chain, so a version no index
// needs is the identity on every address any index can present, and the
// remap through the others is unchanged. (Lance's own cleanup keeps a
// version while any index has an older dataset_version, so one index
// LanceDB optimized pins it: its optimize keeps dataset_version.)
func (ix *Index) Trimmable(indices []*pb.IndexMetadata) []uint64 {
	if ix == nil {
		return nil
	}
	var out []uint64
	for i, k := range ix.keep(indices) {
		if !k {
			out = append(out, ix.Versions[i].DatasetVersion)
		}
	}
	return out
}

// Trim is the FRI change that drops the versions no index of read needs:
// nil, nil when none can go; otherwise the CreateIndex operation replacing
// the FRI with the kept versions, or removing it when none is kept, and
// the objects written. As Lance's cleanup writes it, the new FRI has a new
// uuid, dataset_version = the read version and fragment_bitmap = the new
// fragments of the kept versions.
//
// REQUIRES: the commit re-plans the trim when a non-system segment landed
// since its read, and re-plans a CreateIndex of a non-system segment when
// the FRI changed since its read (lance/commit friRace and the loop): the
// versions kept are decided from the read's segments only, and needed's
// dataset_version cut holds only for a segment that absorbed every version
// older than its dataset_version, which LanceDB's bitmap rewrite hides.
func (ix *Index) Trim(ctx context.Context, b storage.Bucket, read *meta.ManifestFile, now time.Time) (*pb.Transaction_CreateIndex, []string, error) {
	if ix == nil || ix.Meta == nil {
		return nil, nil, nil
	}
	keep := ix.keep(read.Indices)
	var kept []Version
	bitmap := roaring.New()
	for i, k := range keep {
		if k {
			kept = append(kept, ix.Versions[i])
			bitmap.Or(NewFragments(ix.Versions[i]))
		}
	}
	if len(kept) == len(ix.Versions) {
		return nil, nil, nil
	}
	op := &pb.Transaction_CreateIndex{RemovedIndices: []*pb.IndexMetadata{ix.Meta}}
	if len(kept) == 0 {
		return op, nil, nil
	}
	nm, keys, err := buildMeta(ctx, b, ix.Meta, kept, read.Manifest.GetVersion(), bitmap, now)
	if err != nil {
		return nil, keys, err
	}
	op.NewIndices = []*pb.IndexMetadata{nm}
	return op, keys, nil
}
