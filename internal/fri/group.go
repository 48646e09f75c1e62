package fri

import (
	"fmt"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"

	pb "github.com/compactord/compactord/gen/compactordv1"
)

// OldFragment is one fragment a compaction group rewrites, as it was at the
// compaction's read version.
type OldFragment struct {
	ID           uint32
	PhysicalRows uint64
	// Deleted holds the deleted offsets (the deletion file); nil means none.
	Deleted *roaring.Bitmap
}

// BuildGroup builds the FRI group of a compaction that rewrote old, in that
// order, into new fragments of newRows physical rows each. Every offset below
// PhysicalRows that is not deleted survives; survivors are written to the new
// fragments in old order.
//
// The new digests carry id 0: fragment ids are assigned when the manifest is
// built, which must fill them in before the group is compiled. Deleted rows
// of the new fragments are 0 (rows deleted after the read version reach the
// new fragments through the commit's rebase, not through the FRI).
func BuildGroup(old []OldFragment, newRows []uint64) (*pb.FragReuseGroup, error) {
	if len(old) == 0 {
		return nil, fmt.Errorf("fri group: no old fragments")
	}
	g := &pb.FragReuseGroup{}
	buckets := make([]keyedBitmap, 0, len(old))
	seen := roaring.New()
	var survivors uint64
	for _, f := range old {
		if !seen.CheckedAdd(f.ID) {
			return nil, fmt.Errorf("fri group: old fragment %d listed twice", f.ID)
		}
		if f.PhysicalRows > maxFragmentRows {
			return nil, fmt.Errorf("fri group: fragment %d has %d physical rows", f.ID, f.PhysicalRows)
		}
		del := f.Deleted
		if del == nil {
			del = roaring.New()
		}
		if !del.IsEmpty() && uint64(del.Maximum()) >= f.PhysicalRows {
			return nil, fmt.Errorf("fri group: fragment %d deletes offset %d of %d rows", f.ID, del.Maximum(), f.PhysicalRows)
		}
		// Deleted offsets are all below PhysicalRows, so flipping the
		// range yields exactly the survivors.
		surv := roaring.Flip(del, 0, f.PhysicalRows)
		surv.RunOptimize()
		if !surv.IsEmpty() {
			buckets = append(buckets, keyedBitmap{key: f.ID, bm: surv})
			survivors += surv.GetCardinality()
		}
		g.OldFragments = append(g.OldFragments, &pb.FragDigest{
			Id:           f.ID,
			PhysicalRows: f.PhysicalRows,
			DeletedRows:  del.GetCardinality(),
		})
	}
	var total uint64
	for _, n := range newRows {
		if n > maxFragmentRows {
			return nil, fmt.Errorf("fri group: new fragment of %d rows", n)
		}
		total += n
		g.NewFragments = append(g.NewFragments, &pb.FragDigest{PhysicalRows: n})
	}
	if total != survivors {
		return nil, fmt.Errorf("fri group: %d surviving rows but new fragments hold %d", survivors, total)
	}
	// The roaring64 format wants ascending keys; the rank order is the
	// old_fragments order, which Compile recovers from the digests.
	slices.SortFunc(buckets, func(a, b keyedBitmap) int {
		switch {
		case a.key < b.key:
			return -1
		case a.key > b.key:
			return 1
		}
		return 0
	})
	b, err := encodeBitmap64(buckets)
	if err != nil {
		return nil, err
	}
	g.SurvivingAddresses = b
	return g, nil
}
