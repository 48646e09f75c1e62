package catchup

import (
	"fmt"

	"github.com/RoaringBitmap/roaring/v2"

	pb "github.com/compactord/compactord/gen/compactordv1"
)

// fragmentIDs returns the fragments' ids as a bitmap. Manifests list
// fragments in ascending id order, mostly in long consecutive runs, so runs
// are added whole; any other order falls back to adding ids one by one.
func fragmentIDs(frags []*pb.Fragment) *roaring.Bitmap {
	bm := roaring.New()
	if len(frags) == 0 {
		return bm
	}
	start, end := uint64(frags[0].GetId()), uint64(frags[0].GetId())+1 // run [start, end)
	for i, f := range frags[1:] {
		id := uint64(f.GetId())
		switch {
		case id == end:
			end++
		case id > end:
			bm.AddRange(start, end)
			start, end = id, id+1
		default: // out of order or duplicate
			for _, g := range frags[i+1:] {
				bm.Add(g.GetId())
			}
			bm.AddRange(start, end)
			return bm
		}
	}
	bm.AddRange(start, end)
	return bm
}

// covers reports whether every fragment id in readFrags is in the union of the
// segments' bitmaps. A segment without a bitmap makes the index unproven
// (coverage it cannot show proves nothing). Each bitmap is decoded at most once, and only when every
// segment has one.
func covers(readFrags *roaring.Bitmap, segs []*pb.IndexMetadata) (bool, error) {
	for _, seg := range segs {
		if seg.FragmentBitmap == nil {
			return false, nil
		}
	}
	remaining := readFrags.Clone()
	for _, seg := range segs {
		bm, err := decodeBitmap(seg.FragmentBitmap)
		if err != nil {
			return false, fmt.Errorf("segment %s: fragment_bitmap: %w", seg.GetUuid(), err)
		}
		remaining.AndNot(bm)
	}
	return remaining.IsEmpty(), nil
}

// decodeBitmap decodes a serialized roaring32 bitmap, rejecting malformed or
// trailing bytes instead of trusting them: a misread bitmap would credit
// coverage the index does not have. A present, zero-length field is the empty
// set (it can never prove coverage on its own).
func decodeBitmap(b []byte) (bm *roaring.Bitmap, err error) {
	bm = roaring.New()
	if len(b) == 0 {
		return bm, nil
	}
	defer func() {
		if r := recover(); r != nil {
			bm, err = nil, fmt.Errorf("malformed roaring bitmap: %v", r)
		}
	}()
	// FromBuffer reads without copying: the result is only ever the
	// argument of AndNot, never modified, and b outlives it.
	n, err := bm.FromBuffer(b)
	if err != nil {
		return nil, fmt.Errorf("malformed roaring bitmap: %w", err)
	}
	if n != int64(len(b)) {
		return nil, fmt.Errorf("malformed roaring bitmap: %d trailing bytes", int64(len(b))-n)
	}
	if err := bm.Validate(); err != nil {
		return nil, fmt.Errorf("malformed roaring bitmap: %w", err)
	}
	return bm, nil
}
