package fri

import (
	"fmt"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/RoaringBitmap/roaring/v2/roaring64"
)

// OldFragment is one fragment a compaction group rewrites, as it was at the
// compaction's read version.
type OldFragment struct {
	ID, PhysicalRows uint64
	// Deleted holds the deleted offsets (the deletion vector); nil: none.
	Deleted *roaring.Bitmap
}

// BuildGroup builds the FRI group of a compaction that copied the live
// rows of old into the new fragments. Lance maps survivors in ascending
// address order, so old must be in ascending id order and the rows copied
// in that order, offsets ascending; the new fragments' physical rows must
// add up to the survivors.
func BuildGroup(old []OldFragment, newFrags []Digest) (Group, error) {
	g := Group{Changed: roaring64.New()}
	if len(old) == 0 {
		return g, fmt.Errorf("fri group: no old fragments")
	}
	var survivors uint64
	for i, f := range old {
		if i > 0 && f.ID <= old[i-1].ID {
			return g, fmt.Errorf("fri group: old fragments must be in ascending id order (%d after %d): Lance maps survivors in address order", f.ID, old[i-1].ID)
		}
		if f.ID > 1<<32-1 || f.PhysicalRows > maxFragmentRows {
			return g, fmt.Errorf("fri group: fragment %d with %d physical rows does not fit in row addresses", f.ID, f.PhysicalRows)
		}
		del := f.Deleted
		if del == nil {
			del = roaring.New()
		}
		if !del.IsEmpty() && uint64(del.Maximum()) >= f.PhysicalRows {
			return g, fmt.Errorf("fri group: fragment %d deletes offset %d of %d rows", f.ID, del.Maximum(), f.PhysicalRows)
		}
		base := f.ID << 32
		// Deleted offsets are all below PhysicalRows, so the survivors are
		// the range minus them.
		g.Changed.AddRange(base, base+f.PhysicalRows)
		it := del.Iterator()
		for it.HasNext() {
			g.Changed.Remove(base | uint64(it.Next()))
		}
		survivors += f.PhysicalRows - del.GetCardinality()
		g.Old = append(g.Old, Digest{ID: f.ID, PhysicalRows: f.PhysicalRows, NumDeletedRows: del.GetCardinality()})
	}
	var total uint64
	for _, d := range newFrags {
		total += d.PhysicalRows
		g.New = append(g.New, d)
	}
	if total != survivors {
		return g, fmt.Errorf("fri group: %d surviving rows but the new fragments hold %d", survivors, total)
	}
	return g, nil
}
