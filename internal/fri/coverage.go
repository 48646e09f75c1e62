package fri

import (
	"fmt"

	"github.com/RoaringBitmap/roaring/v2"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/meta"
)

// RemapBitmap is the load-time remap of an index's fragment bitmap (its
// coverage); nil when the index has no bitmap (unknown coverage). Like
// LanceDB, it applies every version, oldest to newest (a version the
// index absorbed meets none of its fragments):
//   - a group whose old fragments are all in the bitmap swaps them for its
//     new fragments (none, when every row of the group was deleted);
//   - a group only partly covered drops the covered old fragments and adds
//     no new ones: the index holds only some of the rows now in the new
//     fragments, so claiming them would hide the rest from queries. Those
//     rows fall back to a scan; LanceDB 0.39 computes the same coverage
//     (Lance's older source refused such an FRI). A planner should never
//     build such a group (see Straddles);
//   - Removed leaves the bitmap (LanceDB, which does not know the field,
//     keeps them and masks them by liveness at query time).
//
// An undecodable bitmap remaps to the empty bitmap: narrower coverage
// costs a scan, wider coverage loses rows.
func (ix *Index) RemapBitmap(m *pb.IndexMetadata) *roaring.Bitmap {
	bm, known, err := meta.FragmentBitmap(m)
	if err != nil {
		return roaring.New()
	}
	if !known {
		return nil
	}
	if ix == nil || ix.chain == nil {
		return bm
	}
	return ix.chain.RemapBitmap(bm)
}

// RemapBitmap applies the load-time coverage rules to bm (see
// Index.RemapBitmap) and returns a new bitmap.
func (c *Chain) RemapBitmap(bm *roaring.Bitmap) *roaring.Bitmap {
	out := roaring.New()
	if bm != nil {
		out.Or(bm)
	}
	for i := range c.versions {
		v := &c.versions[i]
		for _, g := range v.groups {
			remapGroupCoverage(out, g.oldSet, g.newSet)
		}
		out.AndNot(v.removed)
	}
	return out
}

// remapGroupCoverage applies one group to a coverage bitmap in place.
func remapGroupCoverage(cov, oldSet, newSet *roaring.Bitmap) {
	if oldSet.IsEmpty() {
		return
	}
	covered := cov.AndCardinality(oldSet)
	if covered == 0 {
		return
	}
	cov.AndNot(oldSet)
	if covered == oldSet.GetCardinality() {
		cov.Or(newSet)
	}
}

// RemovedFragments is the Removed set of a new version committed on read:
// the union of the non-system index bitmaps after the load-time remap
// through idx (nil: no FRI yet), minus the fragments live at read. The
// fragments being compacted are still live at read, so only fragments that
// left the manifest earlier (every row deleted) remain (lance#7374).
//
// On raw bitmaps this would be wrong both ways: a bitmap naming {1,2} that
// an earlier version compacted into 10 would report 1 and 2 (harmless)
// and, once 10 was fully deleted, miss 10, whose addresses would then pass
// through as ghost rows. Indexes without a bitmap contribute nothing: their
// rows stay masked by liveness at query time.
func RemovedFragments(read *meta.ManifestFile, idx *Index) *roaring.Bitmap {
	union := roaring.New()
	for _, m := range read.Indices {
		if meta.IsSystemIndex(m) {
			continue
		}
		if bm := idx.RemapBitmap(m); bm != nil {
			union.Or(bm)
		}
	}
	for _, f := range read.Manifest.GetFragments() {
		union.Remove(uint32(f.GetId()))
	}
	return union
}

// Straddles returns an error naming the first non-system index of indices
// that covers, after the load-time remap through idx, some but not all of
// old (a group's old fragments). A compaction must never commit such a
// group: the load-time remap (LanceDB's and compactord's) leaves the
// group's rows unindexed until the index is rebuilt. An index without a
// bitmap never straddles (there is no coverage to lose).
func Straddles(indices []*pb.IndexMetadata, idx *Index, old []uint64) error {
	set := roaring.New()
	for _, id := range old {
		set.Add(uint32(id))
	}
	n := set.GetCardinality()
	for _, m := range indices {
		if meta.IsSystemIndex(m) {
			continue
		}
		bm := idx.RemapBitmap(m)
		if bm == nil {
			continue
		}
		if c := bm.AndCardinality(set); c > 0 && c < n {
			return fmt.Errorf("index %s (%s) covers %d of the %d fragments %v", m.GetName(), meta.UUIDString(m.GetUuid()), c, n, old)
		}
	}
	return nil
}
