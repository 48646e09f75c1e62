package fri

import (
	"errors"
	"slices"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/RoaringBitmap/roaring/v2/roaring64"

	pb "github.com/compactord/compactord/gen/compactordv1"
)

func TestRemapBitmap(t *testing.T) {
	// v1 (10): {1,2} -> {10}; {3} -> {11}; 4 removed.
	// v2 (20): {10, 5} -> {20, 21}; {6} all deleted -> {}.
	v1 := ver(t, 10, []uint32{4},
		grp(t, []OldFragment{old(1, 2), old(2, 2)}, nf{10, 4}),
		grp(t, []OldFragment{old(3, 2)}, nf{11, 2}))
	v2 := ver(t, 20, nil,
		grp(t, []OldFragment{old(10, 4), old(5, 2)}, nf{20, 3}, nf{21, 3}),
		grp(t, []OldFragment{old(6, 2, 0, 1)}))
	versions := []*pb.FragReuseVersion{v1, v2}
	for _, tc := range []struct {
		name  string
		in    []uint32
		segDV uint64
		want  []uint32
	}{
		{"full cover swaps through both versions", []uint32{1, 2, 5}, 0, []uint32{20, 21}},
		{"untouched fragments stay", []uint32{1, 2, 5, 7, 8}, 0, []uint32{7, 8, 20, 21}},
		// An index covering part of a group loses the covered fragments
		// and gains nothing; those rows are scanned.
		{"straddle drops, adds nothing", []uint32{1, 5}, 0, []uint32{}},
		{"straddle in v2 only", []uint32{1, 2}, 0, []uint32{}},
		{"removed fragment leaves", []uint32{3, 4}, 0, []uint32{11}},
		{"all-deleted group leaves no new fragment", []uint32{6, 7}, 0, []uint32{7}},
		{"segment at v1 skips v1", []uint32{10, 5, 4}, 10, []uint32{4, 20, 21}},
		{"segment at v2 skips both", []uint32{1, 4}, 20, []uint32{1, 4}},
		{"empty", nil, 0, []uint32{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := bm32(tc.in...)
			got := RemapBitmap(in, tc.segDV, versions)
			if g := got.ToArray(); !slices.Equal(g, tc.want) && !(len(g) == 0 && len(tc.want) == 0) {
				t.Errorf("RemapBitmap(%v, %d) = %v, want %v", tc.in, tc.segDV, g, tc.want)
			}
			if !in.Equals(bm32(tc.in...)) {
				t.Error("input modified")
			}
		})
	}
	if got := RemapBitmap(nil, 0, versions); got == nil || !got.IsEmpty() {
		t.Error("nil bitmap must remap to an empty one")
	}
	// Corrupt removed_fragments: coverage collapses (scan everything)
	// rather than keep a fragment that should have gone.
	bad := &pb.FragReuseVersion{DatasetVersion: 30, RemovedFragments: []byte("junk")}
	if got := RemapBitmap(bm32(1, 7), 0, append(slices.Clone(versions), bad)); !got.IsEmpty() {
		t.Errorf("corrupt version: coverage %v, want empty", got.ToArray())
	}
	// ...but only when that version applies.
	if got := RemapBitmap(bm32(7), 30, append(slices.Clone(versions), bad)); !got.Equals(bm32(7)) {
		t.Errorf("absorbed corrupt version: coverage %v, want [7]", got.ToArray())
	}
}

// The planner's check: an index covering some but not all of a group's old
// fragments straddles it.
func TestStraddlesGroup(t *testing.T) {
	for _, tc := range []struct {
		name  string
		index *roaring.Bitmap
		old   []uint32
		want  bool
	}{
		{"covers all", bm32(1, 2, 3), []uint32{1, 2}, false},
		{"covers none", bm32(5), []uint32{1, 2}, false},
		{"covers one of two", bm32(1, 5), []uint32{1, 2}, true},
		{"covers two of three", bm32(1, 3), []uint32{1, 2, 3}, true},
		{"duplicate ids are one fragment", bm32(1), []uint32{1, 1}, false},
		{"unknown coverage", nil, []uint32{1, 2}, false},
		{"empty group", bm32(1), nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := StraddlesGroup(tc.index, tc.old); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// The orphan set is computed after the load-time remap and from non-system
// indices only.
func TestRemovedFragmentsAfterLoadRemap(t *testing.T) {
	// v1 (10) compacted {1,2} into 10; then every row of 10 was deleted and
	// 10 left the manifest. Now a compaction of {11,12} commits.
	v1 := ver(t, 10, nil, grp(t, []OldFragment{old(1, 2), old(2, 2)}, nf{10, 4}))
	live := bm32(11, 12)
	segments := []*pb.IndexMetadata{
		seg("btree", 5, 1, 2, 11), // built before v1
		seg("bitmap", 12, 12),     // built after v1
		// A system index never covers rows; a stale bitmap on one
		// must not turn 7 into an orphan.
		seg("__mem_wal", 1, 7),
		unknownSeg(3),
	}
	cov, err := LoadCoverage(segments, []*pb.FragReuseVersion{v1})
	if err != nil {
		t.Fatal(err)
	}
	if len(cov) != 3 || cov[2] != nil {
		t.Fatalf("LoadCoverage: want 3 non-system entries, the unknown one nil; got %d", len(cov))
	}
	removed := RemovedFragments(cov, live)
	if !removed.Equals(bm32(10)) {
		t.Fatalf("removed = %v, want [10]", removed.ToArray())
	}
	// What the raw bitmaps would have said: 1 and 2 (harmless) and no 10,
	// so 10's addresses would pass through as ghost rows.
	raw := RemovedFragments([]*roaring.Bitmap{bm32(1, 2, 11), bm32(12)}, live)
	if raw.Contains(10) {
		t.Fatal("fixture broken: the raw set should miss 10")
	}
	// The version built from the right set deletes 1's rows (through 10).
	v2 := ver(t, 20, removed.ToArray(), grp(t, []OldFragment{old(11, 2), old(12, 2)}, nf{20, 4}))
	c := compile(t, v1, v2)
	if got, ok := c.RemapFrom(addr(1, 0), 5); ok {
		t.Errorf("row of a fragment deleted after compaction passed through as %#x", got)
	}
	if got := RemovedFragments(nil, live); got == nil || !got.IsEmpty() {
		t.Error("no indices: want an empty, non-nil set")
	}
	if _, err := LoadCoverage([]*pb.IndexMetadata{{Type: "btree", FragmentBitmap: []byte("junk")}}, nil); !errors.Is(err, ErrCorrupt) {
		t.Errorf("corrupt segment bitmap: err = %v", err)
	}
	bad := &pb.FragReuseVersion{DatasetVersion: 30, RemovedFragments: []byte("junk")}
	if _, err := LoadCoverage(segments, []*pb.FragReuseVersion{v1, bad}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("corrupt removed_fragments: err = %v", err)
	}
}

// Skip the FRI version when no index covers any rewritten fragment and
// nothing was orphaned (Lance #7774).
func TestSkip(t *testing.T) {
	groups := []*pb.FragReuseGroup{
		grp(t, []OldFragment{old(1, 2), old(2, 2)}, nf{20, 4}),
		grp(t, []OldFragment{old(3, 2)}, nf{21, 2}),
	}
	for _, tc := range []struct {
		name    string
		bitmaps []*roaring.Bitmap
		removed *roaring.Bitmap
		want    bool
	}{
		{"no indices", nil, nil, true},
		{"indices elsewhere", []*roaring.Bitmap{bm32(5, 6), bm32(7)}, roaring.New(), true},
		{"one index covers an old fragment", []*roaring.Bitmap{bm32(5), bm32(3)}, nil, false},
		{"an orphan must be recorded", []*roaring.Bitmap{bm32(5)}, bm32(9), false},
		{"unknown coverage", []*roaring.Bitmap{bm32(5), nil}, nil, false},
		// A segment lagging behind an earlier version that made 3 reaches
		// it through the load-time remap.
		{"lagging index reaches through an earlier version", []*roaring.Bitmap{
			RemapBitmap(bm32(30, 31), 0, []*pb.FragReuseVersion{ver(t, 10, nil, grp(t, []OldFragment{old(30, 1), old(31, 1)}, nf{3, 2}))}),
		}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Skip(groups, tc.bitmaps, tc.removed); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestBuildGroup(t *testing.T) {
	g, err := BuildGroup([]OldFragment{old(9, 5, 1, 3), old(4, 3), {ID: 6, PhysicalRows: 2}}, []uint64{4, 4})
	if err != nil {
		t.Fatal(err)
	}
	want := []uint64{addr(4, 0), addr(4, 1), addr(4, 2), addr(6, 0), addr(6, 1), addr(9, 0), addr(9, 2), addr(9, 4)}
	surv := roaring64.New()
	if err := surv.UnmarshalBinary(g.SurvivingAddresses); err != nil {
		t.Fatalf("roaring64 cannot read surviving_addresses: %v", err)
	}
	if got := surv.ToArray(); !slices.Equal(got, want) {
		t.Errorf("survivors %v, want %v", got, want)
	}
	if d := g.OldFragments[0]; d.Id != 9 || d.PhysicalRows != 5 || d.DeletedRows != 2 {
		t.Errorf("old digest %v", d)
	}
	if len(g.NewFragments) != 2 || g.NewFragments[1].PhysicalRows != 4 {
		t.Errorf("new digests %v", g.NewFragments)
	}
	// Old-fragment order, not id order, decides the ranks.
	g.NewFragments[0].Id, g.NewFragments[1].Id = 50, 51
	c := compile(t, &pb.FragReuseVersion{DatasetVersion: 1, Groups: []*pb.FragReuseGroup{g}})
	for _, tc := range []struct{ from, to uint64 }{
		{addr(9, 0), addr(50, 0)}, {addr(9, 4), addr(50, 2)}, {addr(4, 0), addr(50, 3)},
		{addr(4, 1), addr(51, 0)}, {addr(6, 0), addr(51, 2)}, {addr(6, 1), addr(51, 3)},
	} {
		if got, ok := c.Remap(tc.from); !ok || got != tc.to {
			t.Errorf("%d:%d -> %d:%d,%v want %d:%d", tc.from>>32, uint32(tc.from), got>>32, uint32(got), ok, tc.to>>32, uint32(tc.to))
		}
	}

	for _, tc := range []struct {
		name    string
		old     []OldFragment
		newRows []uint64
	}{
		{"no old fragments", nil, nil},
		{"old fragment twice", []OldFragment{old(1, 2), old(1, 2)}, []uint64{4}},
		{"deleted offset past the rows", []OldFragment{old(1, 2, 2)}, []uint64{2}},
		{"rows do not add up", []OldFragment{old(1, 2, 0)}, []uint64{2}},
		{"fragment too large", []OldFragment{{ID: 1, PhysicalRows: 1<<32 + 1}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := BuildGroup(tc.old, tc.newRows); err == nil {
				t.Error("accepted")
			}
		})
	}
}

func TestDecodeBitmap32(t *testing.T) {
	good := enc32(t, 1, 70000, 1<<31)
	bm, err := DecodeBitmap32(good)
	if err != nil || !bm.Equals(bm32(1, 70000, 1<<31)) {
		t.Fatalf("round trip: %v %v", bm, err)
	}
	if bm, err := DecodeBitmap32(nil); err != nil || !bm.IsEmpty() {
		t.Fatalf("zero bytes: %v %v", bm, err)
	}
	for _, b := range [][]byte{good[:len(good)-1], append(slices.Clone(good), 7), []byte("xxxxxxxxxxxx"), {0x3a, 0x30}} {
		if _, err := DecodeBitmap32(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%x: err = %v", b, err)
		}
	}
}
