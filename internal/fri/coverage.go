package fri

import (
	"fmt"

	"github.com/RoaringBitmap/roaring/v2"

	pb "github.com/compactord/compactord/gen/compactordv1"
)

// RemapBitmap is the load-time remap of an index segment's fragment bitmap
// (its coverage). It returns a new bitmap and leaves bm untouched. Versions
// with dataset_version > segmentDatasetVersion apply, oldest to newest:
//   - a group whose old fragments are all in the bitmap swaps them for its
//     new fragments (none, when every row of the group was deleted);
//   - a group only partly covered drops the covered old fragments and adds
//     no new ones: the index holds only some of the rows now in the new
//     fragments, so claiming them would hide the rest from queries. Those
//     rows fall back to a scan; the planner must never build
//     such a group (see StraddlesGroup);
//   - removed_fragments leave the bitmap.
//
// Coverage is only ever narrowed when in doubt, because narrower coverage
// costs a scan while wider coverage loses rows. So if a version's
// removed_fragments cannot be decoded, the result is the empty bitmap (the
// index serves nothing and every query scans). Compile reports such
// corruption as an error; call it to find out why.
func RemapBitmap(bm *roaring.Bitmap, segmentDatasetVersion uint64, versions []*pb.FragReuseVersion) *roaring.Bitmap {
	out, err := remapBitmap(bm, segmentDatasetVersion, versions)
	if err != nil {
		return roaring.New()
	}
	return out
}

func remapBitmap(bm *roaring.Bitmap, segmentDatasetVersion uint64, versions []*pb.FragReuseVersion) (*roaring.Bitmap, error) {
	out := roaring.New()
	if bm != nil {
		out.Or(bm)
	}
	for _, v := range versions {
		if v.GetDatasetVersion() <= segmentDatasetVersion {
			continue
		}
		removed, err := DecodeBitmap32(v.GetRemovedFragments())
		if err != nil {
			return nil, fmt.Errorf("fri version %d removed_fragments: %w", v.GetDatasetVersion(), err)
		}
		for _, g := range v.GetGroups() {
			remapGroupCoverage(out, digestIDs(g.GetOldFragments()), digestIDs(g.GetNewFragments()))
		}
		out.AndNot(removed)
	}
	return out, nil
}

// LoadCoverage returns the coverage of every non-system segment after the
// load-time remap through versions, in segment order with system segments
// left out: the input RemovedFragments and Skip require. An entry is nil when
// the segment's bitmap is absent (unknown coverage). A segment bitmap or a
// removed_fragments that cannot be decoded is an ErrCorrupt error (where
// RemapBitmap, which cannot fail, narrows the coverage to nothing).
func LoadCoverage(segments []*pb.IndexMetadata, versions []*pb.FragReuseVersion) ([]*roaring.Bitmap, error) {
	var out []*roaring.Bitmap
	for _, seg := range segments {
		if seg == nil || isSystem(seg) {
			continue
		}
		if seg.FragmentBitmap == nil {
			out = append(out, nil)
			continue
		}
		bm, err := DecodeBitmap32(seg.FragmentBitmap)
		if err != nil {
			return nil, fmt.Errorf("index %s (%s) fragment_bitmap: %w", seg.GetName(), seg.GetUuid(), err)
		}
		cov, err := remapBitmap(bm, seg.GetDatasetVersion(), versions)
		if err != nil {
			return nil, err
		}
		out = append(out, cov)
	}
	return out, nil
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

func digestIDs(ds []*pb.FragDigest) *roaring.Bitmap {
	bm := roaring.New()
	for _, d := range ds {
		if d != nil {
			bm.Add(d.GetId())
		}
	}
	return bm
}

// RemovedFragments is the removed_fragments of a new FRI version: fragments
// some index covers that are no longer live, i.e. every row was deleted and
// the fragment left the manifest, so it will never enter a group (Lance
// #7374).
//
// REQUIRES: the bitmaps are those of NON-SYSTEM segments only
// (system indices cover no rows), each AFTER the load-time remap
// (RemapBitmap) through the versions already committed. On raw bitmaps a
// segment covering {1,2} that an earlier version compacted into 10 would
// report 1 and 2 (harmless: no address reaches this version in 1 or 2) and,
// if 10 was later fully deleted, miss 10, whose addresses would then pass
// through as ghost rows.
//
// live is the set of fragments in the manifest the compaction commits on;
// the fragments being compacted are still in it, so only fragments removed
// earlier remain. Nil bitmaps (unknown coverage) contribute nothing: their
// rows stay masked by liveness at query time. The result is never nil.
func RemovedFragments(nonSystemBitmapsAfterLoadRemap []*roaring.Bitmap, live *roaring.Bitmap) *roaring.Bitmap {
	union := roaring.New()
	for _, bm := range nonSystemBitmapsAfterLoadRemap {
		if bm != nil {
			union.Or(bm)
		}
	}
	if live != nil {
		union.AndNot(live)
	}
	return union
}

// StraddlesGroup reports whether an index covers some but not all of a
// group's old fragments. The compaction planner must never build such a
// group: the load-time remap would drop the covered fragments from the index
// and leave their rows to a scan until the index is rebuilt.
// A nil bitmap (unknown coverage) is reported as not straddling: the
// load-time remap has no coverage to lose there.
func StraddlesGroup(indexBitmap *roaring.Bitmap, groupOld []uint32) bool {
	if indexBitmap == nil || len(groupOld) == 0 {
		return false
	}
	old := roaring.BitmapOf(groupOld...)
	covered := indexBitmap.AndCardinality(old)
	return covered > 0 && covered < old.GetCardinality()
}

// Skip reports whether a deferred compaction may commit without an FRI
// version (Lance #7774): no index covers any group's old fragments and no
// fragment was orphaned, so no index holds an address the version would
// remap, and an unneeded version would only pin trimming and slow loads.
//
// REQUIRES: the bitmaps of non-system segments after the load-time remap
// (as for RemovedFragments): a segment lagging behind an earlier version
// reaches this version's old fragments through that version's new
// fragments, which the remap puts in its bitmap. A nil bitmap means unknown
// coverage and forbids skipping.
func Skip(groups []*pb.FragReuseGroup, nonSystemBitmaps []*roaring.Bitmap, removed *roaring.Bitmap) bool {
	if removed != nil && !removed.IsEmpty() {
		return false
	}
	old := roaring.New()
	for _, g := range groups {
		old.Or(digestIDs(g.GetOldFragments()))
	}
	for _, bm := range nonSystemBitmaps {
		if bm == nil || bm.Intersects(old) {
			return false
		}
	}
	return true
}
