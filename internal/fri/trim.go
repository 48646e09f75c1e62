package fri

import (
	"strings"

	"github.com/RoaringBitmap/roaring/v2"

	pb "github.com/compactord/compactord/gen/compactordv1"
)

// isSystem reports whether a segment belongs to a system index ("__mem_wal",
// "__frag_reuse"): they hold no row addresses.
func isSystem(seg *pb.IndexMetadata) bool {
	return strings.HasPrefix(seg.GetType(), "__")
}

// segmentBitmap decodes a segment's fragment bitmap; ok is false when it is
// absent (unknown) or cannot be decoded, which callers treat alike: the
// segment may cover anything.
func segmentBitmap(seg *pb.IndexMetadata) (*roaring.Bitmap, bool) {
	if seg.FragmentBitmap == nil {
		return nil, false
	}
	bm, err := DecodeBitmap32(seg.FragmentBitmap)
	if err != nil {
		return nil, false
	}
	return bm, true
}

// versionSets is what the trim and remap decisions need of a version: its
// fragment sets, without the survivor bitmaps.
type versionSets struct {
	datasetVersion uint64
	groups         []groupSets
	touched        *roaring.Bitmap // every old and new fragment, and removed
	removed        *roaring.Bitmap
	// corrupt: removed_fragments did not decode, so the version may touch
	// any fragment.
	corrupt bool
}

type groupSets struct{ old, new *roaring.Bitmap }

func buildSets(versions []*pb.FragReuseVersion) []versionSets {
	out := make([]versionSets, len(versions))
	for i, v := range versions {
		s := versionSets{datasetVersion: v.GetDatasetVersion(), touched: roaring.New()}
		removed, err := DecodeBitmap32(v.GetRemovedFragments())
		if err != nil {
			s.corrupt = true
			removed = roaring.New()
		}
		s.removed = removed
		s.touched.Or(removed)
		for _, g := range v.GetGroups() {
			gs := groupSets{old: digestIDs(g.GetOldFragments()), new: digestIDs(g.GetNewFragments())}
			s.groups = append(s.groups, gs)
			s.touched.Or(gs.old)
			s.touched.Or(gs.new)
		}
		out[i] = s
	}
	return out
}

// needed reports, per version, whether seg's data may hold an address that
// the version remaps. This is the one rule behind NeedsRemap and Trim.
//
// It decides from the segment's DATA, not from its bitmap as it stands
// (Lance #7286: a bitmap already moved onto the new fragments made the data
// remap skip, the index kept old addresses and the FRI could never be
// trimmed). Only versions with dataset_version > seg.dataset_version can
// apply (the data predates them). Among those, the fragments the data may
// hold addresses in are computed in two passes:
//
//  1. Preimage: the stored bitmap may already have been moved onto new
//     fragments (a commit that advanced coverage, a caller passing a
//     load-time-remapped bitmap). Walking the applicable versions newest to
//     oldest, any group whose new fragments the set meets adds its old
//     fragments. For a bitmap as built this adds nothing: a segment built
//     before a version cannot cover fragments that version created.
//  2. Forward: walking oldest to newest, a version is needed when the set
//     meets its removed fragments or a group's old (or new) fragments; a
//     group met adds its new fragments, where those rows now live, so a
//     later version compacting them is needed too.
//
// A segment whose bitmap is absent or undecodable needs every applicable
// version. What no bitmap can reveal: a fragment a remapped bitmap already
// dropped (a removed fragment, or a straddled group's covered part). Such
// rows are masked by liveness at query time (fragment ids are never reused),
// so the worst case is dead entries in the index, not wrong results.
func needed(seg *pb.IndexMetadata, sets []versionSets) []bool {
	out := make([]bool, len(sets))
	start := len(sets)
	for i := range sets {
		if sets[i].datasetVersion > seg.GetDatasetVersion() {
			start = i
			break
		}
	}
	bm, known := segmentBitmap(seg)
	if !known {
		for i := start; i < len(sets); i++ {
			out[i] = true
		}
		return out
	}
	data := bm.Clone()
	for i := len(sets) - 1; i >= start; i-- {
		for _, g := range sets[i].groups {
			if data.Intersects(g.new) {
				data.Or(g.old)
			}
		}
	}
	for i := start; i < len(sets); i++ {
		s := &sets[i]
		if s.corrupt || data.Intersects(s.removed) {
			out[i] = true
		}
		for _, g := range s.groups {
			if data.Intersects(g.old) || data.Intersects(g.new) {
				out[i] = true
				data.Or(g.new)
			}
		}
	}
	return out
}

// NeedsRemap reports whether a segment must be physically remapped: it is a
// non-system segment, and some version with dataset_version greater than the
// segment's touches a fragment the segment's data may hold addresses in (see
// needed for how those are derived). A segment with an unknown bitmap needs
// a remap as soon as any version postdates its data. Being decided from the
// data's age, not from the current coverage, a remap is never skipped for a
// segment whose coverage was already moved onto the new fragments (Lance
// #7286).
//
// INVARIANT: a segment that blocks trimming a version (Trim) needs a remap,
// and the remap (dataset_version = head) unblocks it, so the FRI always
// drains.
func NeedsRemap(seg *pb.IndexMetadata, versions []*pb.FragReuseVersion) bool {
	if seg == nil || isSystem(seg) {
		return false
	}
	for _, n := range needed(seg, buildSets(versions)) {
		if n {
			return true
		}
	}
	return false
}

// Trimmable is the trim rule for one version considered alone: every
// non-system segment either has dataset_version >= v's, or has a known
// fragment bitmap disjoint from v's old fragments, new fragments (a covering
// segment's bitmap may already have been moved onto them) and
// removed_fragments (Lance #7870: without the disjoint case, one index that
// never covered the compacted fragments pins the FRI forever). An absent or
// undecodable bitmap on a segment older than v blocks trimming, as does an
// undecodable removed_fragments.
//
// Judged alone it is sound for the oldest version and bitmaps as built. Trim
// applies the chain-aware form (needed), which also follows a segment's
// rows through earlier versions and through bitmaps advanced onto new
// fragments; it is never less conservative than this rule.
func Trimmable(v *pb.FragReuseVersion, segments []*pb.IndexMetadata) bool {
	sets := buildSets([]*pb.FragReuseVersion{v})[0]
	for _, seg := range segments {
		if seg == nil || isSystem(seg) || seg.GetDatasetVersion() >= sets.datasetVersion {
			continue
		}
		bm, known := segmentBitmap(seg)
		if !known || sets.corrupt || bm.Intersects(sets.touched) {
			return false
		}
	}
	return true
}

// Trim drops every version that no non-system segment needs and keeps the
// rest in order. kept shares the retained version messages with details.
//
// A middle version may go, not only the oldest: needed follows each
// segment's possible rows through the whole chain, so a version no segment
// needs is the identity on every address any segment can present, and the
// remap through the remaining versions is unchanged. Trimming only from the
// oldest end would let one lagging index pin every later version (the FRI
// grows until that index is remapped), for no gain in safety.
//
// Segments built at or after a version's dataset_version never need it;
// segments committed later are built at a later version still, except an
// index build that read before a trimmed version and commits after the
// trim: the commit loop must treat that CreateIndex as conflicting with the
// trim.
func Trim(details *pb.FragReuseIndexDetails, segments []*pb.IndexMetadata) (kept *pb.FragReuseIndexDetails, dropped int) {
	versions := details.GetVersions()
	sets := buildSets(versions)
	keep := make([]bool, len(versions))
	for _, seg := range segments {
		if seg == nil || isSystem(seg) {
			continue
		}
		for i, n := range needed(seg, sets) {
			keep[i] = keep[i] || n
		}
	}
	kept = &pb.FragReuseIndexDetails{}
	for i, v := range versions {
		if keep[i] {
			kept.Versions = append(kept.Versions, v)
		} else {
			dropped++
		}
	}
	return kept, dropped
}
