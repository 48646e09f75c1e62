package commit

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"
	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/meta"
)

// applyRewrite replaces each group's old fragments by its new ones, as
// Lance's Rewrite does: in place when the old fragments are contiguous in
// the fragment list, otherwise removed with the new ones appended. New
// fragments keep the ids they carry (reserved by a ReserveFragments
// first); an id of 0 gets the next free id, as in Lance.
//
// Rewritten indices get a new uuid and a bitmap with each fully covered
// group's old fragments swapped for its new ones; a group an index covers
// only partly is an error (its rows could not be remapped). fri, when
// set, replaces the fragment-reuse index entry.
func applyRewrite(m *pb.Manifest, ixs []*pb.IndexMetadata, rw *pb.Transaction_Rewrite, fri *pb.IndexMetadata) ([]*pb.IndexMetadata, error) {
	if m.GetWriterFeatureFlags()&meta.FlagStableRowIDs != 0 {
		return nil, fmt.Errorf("rewrite of a table with stable row ids: compactord does not carry row-id sequences")
	}
	if len(rw.GetGroups()) == 0 {
		if len(rw.GetOldFragments()) > 0 || len(rw.GetNewFragments()) > 0 {
			return nil, fmt.Errorf("rewrite without groups (the deprecated old_fragments/new_fragments form) is not committed by compactord")
		}
		return nil, fmt.Errorf("rewrite with no groups")
	}
	next := nextFragmentID(m)
	ids := make(map[uint64]bool, len(m.Fragments))
	for _, f := range m.Fragments {
		ids[f.GetId()] = true
	}
	frags := slicesClone(m.Fragments)
	groups := make([]*pb.Transaction_Rewrite_RewriteGroup, 0, len(rw.GetGroups()))
	for gi, g := range rw.GetGroups() {
		if len(g.GetOldFragments()) == 0 && len(g.GetNewFragments()) == 0 {
			return nil, fmt.Errorf("rewrite group %d is empty", gi)
		}
		ng := &pb.Transaction_Rewrite_RewriteGroup{OldFragments: g.GetOldFragments()}
		for _, nf := range g.GetNewFragments() {
			c := nf
			if nf.GetId() == 0 {
				c = proto.Clone(nf).(*pb.DataFragment)
				c.Id = next
				next++
			} else if ids[nf.GetId()] {
				return nil, fmt.Errorf("rewrite group %d: new fragment id %d is already in version %d", gi, nf.GetId(), m.GetVersion()-1)
			}
			ids[c.GetId()] = true
			ng.NewFragments = append(ng.NewFragments, c)
		}
		pos := make([]int, len(g.GetOldFragments()))
		for k, of := range g.GetOldFragments() {
			pos[k] = -1
			for i, f := range frags {
				if f.GetId() == of.GetId() {
					pos[k] = i
					break
				}
			}
			if pos[k] < 0 {
				return nil, fmt.Errorf("rewrite group %d: fragment %d to replace is not in version %d", gi, of.GetId(), m.GetVersion()-1)
			}
		}
		// A group whose old fragments were all deleted meanwhile (a
		// rebased Delete) appends its new ones, whose rows are deleted.
		contiguous := len(pos) > 0
		for k := 1; k < len(pos); k++ {
			if pos[k] != pos[0]+k {
				contiguous = false
			}
		}
		if contiguous {
			out := make([]*pb.DataFragment, 0, len(frags)-len(pos)+len(ng.NewFragments))
			out = append(out, frags[:pos[0]]...)
			out = append(out, ng.NewFragments...)
			out = append(out, frags[pos[0]+len(pos):]...)
			frags = out
		} else {
			gone := map[uint64]bool{}
			for _, of := range g.GetOldFragments() {
				gone[of.GetId()] = true
			}
			out := frags[:0:0]
			for _, f := range frags {
				if !gone[f.GetId()] {
					out = append(out, f)
				}
			}
			frags = append(out, ng.NewFragments...)
		}
		for _, of := range g.GetOldFragments() {
			delete(ids, of.GetId())
		}
		groups = append(groups, ng)
	}
	// Lance keeps the fragment list sorted by id after every operation
	// (a rewrite's reserved ids are higher than the neighbours it
	// replaces), and its compaction planner relies on that order.
	slices.SortStableFunc(frags, func(a, b *pb.DataFragment) int { return cmp.Compare(a.GetId(), b.GetId()) })
	m.Fragments = frags
	if next-1 > uint64(m.GetMaxFragmentId()) || m.MaxFragmentId == nil {
		m.MaxFragmentId = maxFragmentID(m)
	}

	out := cloneIndices(ixs)
	if out == nil && (len(rw.GetRewrittenIndices()) > 0 || fri != nil) {
		out = []*pb.IndexMetadata{}
	}
	seen := map[string]bool{}
	for _, ri := range rw.GetRewrittenIndices() {
		old := meta.UUIDString(ri.GetOldId())
		if seen[old] {
			return nil, fmt.Errorf("rewrite remaps index segment %s twice", old)
		}
		seen[old] = true
		i := -1
		for k, ix := range out {
			if meta.UUIDString(ix.GetUuid()) == old {
				i = k
			}
		}
		if i < 0 {
			return nil, fmt.Errorf("rewrite remaps index segment %s, which is not in the head", old)
		}
		ix := proto.Clone(out[i]).(*pb.IndexMetadata)
		bm, known, err := meta.FragmentBitmap(ix)
		if err != nil {
			return nil, err
		}
		if !known {
			return nil, fmt.Errorf("index %s (%s) has no fragment bitmap; it cannot be remapped", ix.GetName(), old)
		}
		if bm, err = RewriteBitmap(bm, groups); err != nil {
			return nil, fmt.Errorf("index %s (%s): %w", ix.GetName(), old, err)
		}
		ix.FragmentBitmap = meta.EncodeBitmap(bm)
		ix.Uuid = ri.GetNewId()
		if ri.GetNewIndexDetails() != nil {
			// A remap that names its details names the whole segment.
			ix.IndexDetails = ri.GetNewIndexDetails()
			ix.IndexVersion = proto.Int32(int32(ri.GetNewIndexVersion()))
		}
		if len(ri.GetNewIndexFiles()) > 0 {
			ix.Files = ri.GetNewIndexFiles()
		}
		out[i] = ix
	}
	if fri != nil {
		if fri.GetName() != meta.FragReuseIndexName {
			return nil, fmt.Errorf("the fragment-reuse entry is named %q, not %s", fri.GetName(), meta.FragReuseIndexName)
		}
		kept := out[:0:0]
		for _, ix := range out {
			if ix.GetName() != meta.FragReuseIndexName {
				kept = append(kept, ix)
			}
		}
		out = append(kept, fri)
	}
	return out, nil
}

// RewriteBitmap swaps, for each group whose old fragments bm holds, the
// old fragments for the new ones. A group bm holds only partly is an
// error, as in Lance: its rows would be split between the index and a
// scan.
func RewriteBitmap(bm *roaring.Bitmap, groups []*pb.Transaction_Rewrite_RewriteGroup) (*roaring.Bitmap, error) {
	out := bm.Clone()
	for _, g := range groups {
		in := 0
		for _, of := range g.GetOldFragments() {
			if bm.Contains(uint32(of.GetId())) {
				in++
			}
		}
		if in == 0 {
			continue
		}
		if in != len(g.GetOldFragments()) {
			return nil, fmt.Errorf("a rewrite group splits indexed and unindexed fragments (%d of %d covered)", in, len(g.GetOldFragments()))
		}
		for _, of := range g.GetOldFragments() {
			out.Remove(uint32(of.GetId()))
		}
		for _, nf := range g.GetNewFragments() {
			out.Add(uint32(nf.GetId()))
		}
	}
	return out, nil
}

func slicesClone(fs []*pb.DataFragment) []*pb.DataFragment {
	out := make([]*pb.DataFragment, len(fs))
	copy(out, fs)
	return out
}
