package fri

import (
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/RoaringBitmap/roaring/v2/roaring64"

	pb "github.com/compactord/compactord/gen/compactordv1"
)

func addr(frag, off uint32) uint64 { return uint64(frag)<<32 | uint64(off) }

func bm32(ids ...uint32) *roaring.Bitmap { return roaring.BitmapOf(ids...) }

func enc32(t testing.TB, ids ...uint32) []byte {
	t.Helper()
	b, err := EncodeBitmap32(bm32(ids...))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// old describes an old fragment: id, physical rows, deleted offsets.
func old(id uint32, rows uint64, deleted ...uint32) OldFragment {
	return OldFragment{ID: id, PhysicalRows: rows, Deleted: roaring.BitmapOf(deleted...)}
}

// nf is a new fragment: id and physical rows.
type nf struct {
	id   uint32
	rows uint64
}

// grp builds a group the way a compaction would: BuildGroup, then the
// manifest assigns the new fragment ids.
func grp(t testing.TB, olds []OldFragment, news ...nf) *pb.FragReuseGroup {
	t.Helper()
	rows := make([]uint64, len(news))
	for i, n := range news {
		rows[i] = n.rows
	}
	g, err := BuildGroup(olds, rows)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range news {
		g.NewFragments[i].Id = n.id
	}
	return g
}

func ver(t testing.TB, dv uint64, removed []uint32, groups ...*pb.FragReuseGroup) *pb.FragReuseVersion {
	t.Helper()
	return &pb.FragReuseVersion{DatasetVersion: dv, Groups: groups, RemovedFragments: enc32(t, removed...)}
}

func compile(t testing.TB, versions ...*pb.FragReuseVersion) *Chain {
	t.Helper()
	c, err := Compile(versions)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func seg(typ string, dv uint64, frags ...uint32) *pb.IndexMetadata {
	b, err := EncodeBitmap32(bm32(frags...))
	if err != nil {
		panic(err)
	}
	return &pb.IndexMetadata{Name: typ + "_idx", Type: typ, DatasetVersion: dv, FragmentBitmap: b}
}

// unknownSeg is a segment whose fragment bitmap is absent.
func unknownSeg(dv uint64) *pb.IndexMetadata {
	return &pb.IndexMetadata{Name: "btree_idx", Type: "btree", DatasetVersion: dv}
}

// reference is the FRI remap rule (an old address maps through each
// version's groups in order, by rank among survivors) written as plainly as possible,
// straight from the protos, with roaring64 Rank: the oracle for Compile's
// lookup structures. Only the bitmap decoding is done up front.
type reference struct {
	versions []*pb.FragReuseVersion
	removed  []*roaring.Bitmap
	surv     [][]*roaring64.Bitmap // per version, per group
}

func newReference(t testing.TB, versions []*pb.FragReuseVersion) *reference {
	t.Helper()
	ref := &reference{versions: versions}
	for _, v := range versions {
		removed, err := DecodeBitmap32(v.RemovedFragments)
		if err != nil {
			t.Fatal(err)
		}
		ref.removed = append(ref.removed, removed)
		var gs []*roaring64.Bitmap
		for _, g := range v.Groups {
			surv := roaring64.New()
			if len(g.SurvivingAddresses) > 0 {
				if err := surv.UnmarshalBinary(g.SurvivingAddresses); err != nil {
					t.Fatal(err)
				}
			}
			gs = append(gs, surv)
		}
		ref.surv = append(ref.surv, gs)
	}
	return ref
}

func (ref *reference) remap(t testing.TB, a, segDV uint64) (uint64, bool) {
	t.Helper()
	for vi, v := range ref.versions {
		if v.DatasetVersion <= segDV {
			continue
		}
		frag := uint32(a >> 32)
		if ref.removed[vi].Contains(frag) {
			return 0, false
		}
		for gi, g := range v.Groups {
			surv := ref.surv[vi][gi]
			var before uint64
			found := false
			for _, o := range g.OldFragments {
				if o.Id == frag {
					found = true
					break
				}
				lo := uint64(o.Id) << 32
				before += rankBelow(surv, lo+1<<32) - rankBelow(surv, lo)
			}
			if !found {
				continue
			}
			if !surv.Contains(a) {
				return 0, false
			}
			r := before + rankBelow(surv, a) - rankBelow(surv, a&^0xFFFFFFFF)
			for _, n := range g.NewFragments {
				if r < n.PhysicalRows {
					a = uint64(n.Id)<<32 | r
					goto next
				}
				r -= n.PhysicalRows
			}
			t.Fatalf("reference: rank past the new fragments")
		}
	next:
	}
	return a, true
}

// referenceRemap is reference.remap for a one-off address.
func referenceRemap(t testing.TB, versions []*pb.FragReuseVersion, a, segDV uint64) (uint64, bool) {
	t.Helper()
	return newReference(t, versions).remap(t, a, segDV)
}

// rankBelow counts the elements < x.
func rankBelow(bm *roaring64.Bitmap, x uint64) uint64 {
	if x == 0 {
		return 0
	}
	return bm.Rank(x - 1)
}
