package fri

import (
	"context"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
)

func addr(frag, off uint32) uint64 { return uint64(frag)<<32 | uint64(off) }

func bm32(ids ...uint32) *roaring.Bitmap { return roaring.BitmapOf(ids...) }

// old describes an old fragment: id, physical rows, deleted offsets.
func old(id uint64, rows uint64, deleted ...uint32) OldFragment {
	return OldFragment{ID: id, PhysicalRows: rows, Deleted: roaring.BitmapOf(deleted...)}
}

// nf is a new fragment: id and physical rows.
func nf(id, rows uint64) Digest { return Digest{ID: id, PhysicalRows: rows} }

func grp(t testing.TB, olds []OldFragment, news ...Digest) Group {
	t.Helper()
	g, err := BuildGroup(olds, news)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func ver(dv uint64, removed []uint32, groups ...Group) Version {
	v := Version{DatasetVersion: dv, Groups: groups}
	if len(removed) > 0 {
		v.Removed = bm32(removed...)
	}
	return v
}

func newIndex(t testing.TB, vs ...Version) *Index {
	t.Helper()
	ix, err := New(vs)
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

// seg is a non-system index segment over frags built at dv.
func seg(name string, dv uint64, frags ...uint32) *pb.IndexMetadata {
	return &pb.IndexMetadata{Name: name, DatasetVersion: dv, FragmentBitmap: meta.EncodeBitmap(bm32(frags...)), IndexDetails: nil}
}

// unknownSeg is a segment whose fragment bitmap is absent.
func unknownSeg(dv uint64) *pb.IndexMetadata {
	return &pb.IndexMetadata{Name: "id_idx", DatasetVersion: dv}
}

// manifestFile is a read version with the given live fragments and indices.
func manifestFile(version uint64, live []uint64, ixs ...*pb.IndexMetadata) *meta.ManifestFile {
	m := &pb.Manifest{Version: version}
	for _, id := range live {
		m.Fragments = append(m.Fragments, &pb.DataFragment{Id: id, PhysicalRows: 100})
	}
	return &meta.ManifestFile{Manifest: m, Indices: ixs}
}

// referenceRemap is the remap rule written as plainly as possible, the way
// Lance builds its row id maps (transpose_row_ids_from_digest): per version
// a map from every old address below physical_rows to its new address or
// to deleted; removed fragments map to deleted; unmapped addresses pass
// through.
func referenceRemap(vs []Version, a uint64, since uint64) (uint64, bool) {
	for _, v := range vs {
		if v.DatasetVersion < since {
			continue
		}
		if v.Removed != nil && v.Removed.Contains(uint32(a>>32)) {
			return 0, false
		}
		for _, g := range v.Groups {
			isOld := false
			for _, d := range g.Old {
				if d.ID == a>>32 && uint64(uint32(a)) < d.PhysicalRows {
					isOld = true
				}
			}
			if !isOld {
				continue
			}
			if !g.Changed.Contains(a) {
				return 0, false
			}
			rank := g.Changed.Rank(a) - 1
			for _, d := range g.New {
				if rank < d.PhysicalRows {
					a = d.ID<<32 | rank
					break
				}
				rank -= d.PhysicalRows
			}
		}
	}
	return a, true
}

func mem(t testing.TB) storage.Bucket {
	t.Helper()
	b, err := storage.Open(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}
