package commit

import (
	"context"
	"fmt"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
)

// committed is one version published after our read version.
type committed struct {
	manifest *pb.Manifest
	txn      *pb.Transaction
}

// rebaser rewrites a transaction to apply on top of head. It always starts
// from the original transaction and the read version, so rebasing twice
// (after a later conflict) never compounds.
type rebaser struct {
	b       storage.Bucket
	read    *pb.Manifest
	head    *pb.Manifest
	since   []committed
	written []string
}

func (r *rebaser) deletions(ctx context.Context, f *pb.Fragment) (*roaring.Bitmap, error) {
	if f == nil {
		return roaring.New(), nil
	}
	return table.ReadDeletionFile(ctx, r.b, f.DeletionFile)
}

func allRows(n uint64) *roaring.Bitmap {
	bm := roaring.New()
	bm.AddRange(0, n)
	return bm
}

// rebaseDeletions rebases a Delete or MergeSSTables. Our deleted offsets
// are carried through every compaction committed since our read (their row
// maps translate old offsets to new fragments), then unioned with head's
// deletion bitmap of the fragment they land in (Delete vs Delete). A
// fragment head no longer has was fully deleted by someone else, which
// subsumes our deletions in it. A union covering every row removes the
// fragment.
func (r *rebaser) rebaseDeletions(ctx context.Context, orig *pb.Transaction) (*pb.Transaction, error) {
	out := proto.Clone(orig).(*pb.Transaction)
	var updated *[]*pb.Fragment
	var removed *[]uint32
	switch op := out.GetOperation().(type) {
	case *pb.Transaction_Delete:
		updated, removed = &op.Delete.UpdatedFragments, &op.Delete.RemovedFragmentIds
	case *pb.Transaction_MergeSstables:
		updated, removed = &op.MergeSstables.UpdatedFragments, &op.MergeSstables.RemovedFragmentIds
	default:
		return nil, fmt.Errorf("rebase: %s has no fragment deletions", OpName(orig))
	}
	// pending: fragment id -> our deleted offsets; untouched: fragments whose
	// deletion state nobody changed since our read, whose files we keep.
	pending := map[uint32]*roaring.Bitmap{}
	ours := map[uint32]*pb.Fragment{}
	for _, f := range *updated {
		bm, err := table.ReadDeletionFile(ctx, r.b, f.DeletionFile)
		if err != nil {
			return nil, err
		}
		pending[f.Id], ours[f.Id] = bm, f
	}
	for _, id := range *removed {
		rf := table.FragmentByID(r.read, id)
		if rf == nil {
			return nil, fmt.Errorf("rebase: fragment %d was not live at read version %d", id, r.read.Version)
		}
		pending[id] = allRows(rf.PhysicalRows)
	}
	for _, c := range r.since {
		rw := c.txn.GetRewrite()
		if rw == nil {
			continue
		}
		if err := translateThroughRewrite(pending, rw, c.manifest); err != nil {
			return nil, err
		}
	}
	var keep []*pb.Fragment
	var rem []uint32
	for _, id := range sortedKeys(pending) {
		bm := pending[id]
		hf := table.FragmentByID(r.head, id)
		if hf == nil {
			continue // fully deleted since our read
		}
		if of, ok := ours[id]; ok && sameDeletion(hf, table.FragmentByID(r.read, id)) {
			if bm.GetCardinality() >= hf.PhysicalRows {
				rem = append(rem, id)
			} else {
				keep = append(keep, of)
			}
			continue
		}
		theirs, err := r.deletions(ctx, hf)
		if err != nil {
			return nil, err
		}
		bm.Or(theirs)
		if bm.GetCardinality() >= hf.PhysicalRows {
			rem = append(rem, id)
			continue
		}
		if bm.GetCardinality() == theirs.GetCardinality() {
			continue // nothing of ours left to add
		}
		df, err := table.WriteDeletionFile(ctx, r.b, id, r.head.Version, bm)
		if err != nil {
			return nil, err
		}
		r.written = append(r.written, df.Path)
		nf := proto.Clone(hf).(*pb.Fragment)
		nf.DeletionFile = df
		keep = append(keep, nf)
	}
	*updated, *removed = keep, rem
	return out, nil
}

// translateThroughRewrite moves pending deletions of fragments a committed
// compaction consumed onto its new fragments. m is the version the
// compaction committed as; its new fragments are found by data-file path
// because ids are assigned at build time.
func translateThroughRewrite(pending map[uint32]*roaring.Bitmap, rw *pb.Rewrite, m *pb.Manifest) error {
	byPath := map[string]uint32{}
	for _, f := range m.Fragments {
		byPath[f.GetDataFile().GetPath()] = f.Id
	}
	for _, g := range rw.Groups {
		rm, err := newRowMap(g)
		if err != nil {
			return err
		}
		for _, of := range g.OldFragments {
			bm, ok := pending[of.Id]
			if !ok {
				continue
			}
			delete(pending, of.Id)
			it := bm.Iterator()
			for it.HasNext() {
				ni, off, ok := rm.mapAddr(table.RowAddr(of.Id, it.Next()))
				if !ok {
					continue // already deleted when the compaction read it
				}
				id, ok := byPath[g.NewFragments[ni].GetDataFile().GetPath()]
				if !ok {
					continue // that new fragment was itself fully deleted
				}
				nb := pending[id]
				if nb == nil {
					nb = roaring.New()
					pending[id] = nb
				}
				nb.Add(off)
			}
		}
	}
	return nil
}

// rowMap is a compaction group's row map: survivors of the old fragments,
// concatenated in address order, split across new fragments by row count.
type rowMap struct {
	survivors *roaring64.Bitmap
	bounds    []uint64 // cumulative rows of new fragments
}

func newRowMap(g *pb.RewriteGroup) (*rowMap, error) {
	s := roaring64.New()
	if len(g.SurvivingAddresses) > 0 {
		if err := s.UnmarshalBinary(g.SurvivingAddresses); err != nil {
			return nil, fmt.Errorf("rewrite row map: %w: %v", table.ErrCorrupt, err)
		}
	}
	rm := &rowMap{survivors: s}
	var n uint64
	for _, f := range g.NewFragments {
		n += f.PhysicalRows
		rm.bounds = append(rm.bounds, n)
	}
	if n != s.GetCardinality() {
		return nil, fmt.Errorf("rewrite row map: %w: %d survivors for %d new rows", table.ErrCorrupt, s.GetCardinality(), n)
	}
	return rm, nil
}

// mapAddr returns (new fragment index, offset) of a surviving old address.
func (rm *rowMap) mapAddr(addr uint64) (int, uint32, bool) {
	if !rm.survivors.Contains(addr) {
		return 0, 0, false
	}
	rank := rm.survivors.Rank(addr) - 1
	for i, b := range rm.bounds {
		if rank < b {
			start := uint64(0)
			if i > 0 {
				start = rm.bounds[i-1]
			}
			return i, uint32(rank - start), true
		}
	}
	return 0, 0, false
}

// rebaseRewrite applies deletions committed since our read to our
// compaction's new fragments, through our own row map. The compaction is
// not redone: only new deletion files are written (Lance retries here;
// issues #6150 and #4604 ask for exactly this).
func (r *rebaser) rebaseRewrite(ctx context.Context, orig *pb.Transaction) (*pb.Transaction, error) {
	out := proto.Clone(orig).(*pb.Transaction)
	for _, g := range out.GetRewrite().Groups {
		rm, err := newRowMap(g)
		if err != nil {
			return nil, err
		}
		newDel := make([]*roaring.Bitmap, len(g.NewFragments))
		for _, of := range g.OldFragments {
			rf := table.FragmentByID(r.read, of.Id)
			if rf == nil {
				return nil, fmt.Errorf("rebase: fragment %d was not live at read version %d", of.Id, r.read.Version)
			}
			hf := table.FragmentByID(r.head, of.Id)
			if hf != nil && sameDeletion(hf, rf) {
				continue
			}
			before, err := r.deletions(ctx, rf)
			if err != nil {
				return nil, err
			}
			var after *roaring.Bitmap
			if hf == nil {
				after = allRows(rf.PhysicalRows) // fully deleted since our read
			} else if after, err = r.deletions(ctx, hf); err != nil {
				return nil, err
			}
			after.AndNot(before)
			it := after.Iterator()
			for it.HasNext() {
				ni, off, ok := rm.mapAddr(table.RowAddr(of.Id, it.Next()))
				if !ok {
					continue
				}
				if newDel[ni] == nil {
					newDel[ni] = roaring.New()
				}
				newDel[ni].Add(off)
			}
		}
		for i, bm := range newDel {
			if bm == nil {
				continue
			}
			nf := g.NewFragments[i]
			// New fragments have no id until the manifest is built; the
			// deletion file is named after fragment 0 of the read version.
			df, err := table.WriteDeletionFile(ctx, r.b, 0, r.head.Version, bm)
			if err != nil {
				return nil, err
			}
			r.written = append(r.written, df.Path)
			nf.DeletionFile = df
		}
	}
	return out, nil
}

func sameDeletion(a, b *pb.Fragment) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.GetDeletionFile().GetPath() == b.GetDeletionFile().GetPath()
}

func sortedKeys(m map[uint32]*roaring.Bitmap) []uint32 {
	bm := roaring.New()
	for k := range m {
		bm.Add(k)
	}
	return bm.ToArray()
}
