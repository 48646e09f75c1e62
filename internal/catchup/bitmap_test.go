package catchup

import (
	"slices"
	"testing"

	pb "github.com/compactord/compactord/gen/compactordv1"
)

func TestFragmentIDs(t *testing.T) {
	for _, in := range [][]uint32{
		nil,
		{7},
		{0, 1, 2, 3},
		{0, 1, 5, 6, 9},   // runs with gaps
		{4, 5, 1, 2, 9},   // out of order after a run
		{0, 1, 1, 2},      // duplicate
		{1 << 31, 1, 0},   // large ids, descending
		{0, 1, 2, 100, 3}, // back-step after a run
	} {
		var frags []*pb.Fragment
		for _, id := range in {
			frags = append(frags, &pb.Fragment{Id: id})
		}
		want := slices.Compact(slices.Sorted(slices.Values(in)))
		if got := fragmentIDs(frags).ToArray(); !slices.Equal(got, want) && len(got)+len(want) > 0 {
			t.Errorf("fragmentIDs(%v) = %v, want %v", in, got, want)
		}
	}
}
