package fri

import (
	"testing"

	pb "github.com/compactord/compactord/gen/compactordv1"
)

// v1 (10): {1,2} -> {10}. v2 (20): {10, 11} -> {20}. v3 (30): {50} -> {60}.
func trimChain(t *testing.T) []*pb.FragReuseVersion {
	return []*pb.FragReuseVersion{
		ver(t, 10, nil, grp(t, []OldFragment{old(1, 2), old(2, 2)}, nf{10, 4})),
		ver(t, 20, nil, grp(t, []OldFragment{old(10, 4), old(11, 2)}, nf{20, 6})),
		ver(t, 30, []uint32{70}, grp(t, []OldFragment{old(50, 2)}, nf{60, 2})),
	}
}

// The single-version trim rule, including an index that never covered the
// compacted fragments not pinning the FRI (Lance #7870).
func TestTrimmable(t *testing.T) {
	v1 := trimChain(t)[0]
	for _, tc := range []struct {
		name     string
		segments []*pb.IndexMetadata
		want     bool
	}{
		{"no segments", nil, true},
		{"A remapped, B disjoint from old and new: trimmable", []*pb.IndexMetadata{
			seg("btree", 12, 10),   // A, physically remapped at 12
			seg("bitmap", 3, 5, 6), // B never covered 1, 2 or 10
		}, true},
		{"B covers an old fragment", []*pb.IndexMetadata{seg("btree", 12, 10), seg("bitmap", 3, 2, 5)}, false},
		{"B's bitmap already moved onto the new fragment", []*pb.IndexMetadata{seg("bitmap", 3, 10)}, false},
		{"B's bitmap unknown", []*pb.IndexMetadata{seg("btree", 12, 10), unknownSeg(3)}, false},
		{"unknown bitmap, but built after the version", []*pb.IndexMetadata{unknownSeg(10)}, true},
		{"covering, built at the version", []*pb.IndexMetadata{seg("btree", 10, 1, 2)}, true},
		{"corrupt bitmap blocks", []*pb.IndexMetadata{{Type: "btree", DatasetVersion: 3, FragmentBitmap: []byte("junk")}}, false},
		{"system segments do not count", []*pb.IndexMetadata{seg("__mem_wal", 0, 1, 2), seg("__frag_reuse", 0, 1)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Trimmable(v1, tc.segments); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	v3 := trimChain(t)[2]
	if Trimmable(v3, []*pb.IndexMetadata{seg("btree", 25, 70)}) {
		t.Error("a segment still covering a removed fragment blocks trimming")
	}
	corrupt := &pb.FragReuseVersion{DatasetVersion: 10, RemovedFragments: []byte("junk")}
	if Trimmable(corrupt, []*pb.IndexMetadata{seg("btree", 3, 99)}) {
		t.Error("undecodable removed_fragments must block trimming")
	}
}

func TestTrim(t *testing.T) {
	versions := trimChain(t)
	for _, tc := range []struct {
		name     string
		segments []*pb.IndexMetadata
		kept     []uint64 // dataset versions kept
	}{
		{"everything remapped", []*pb.IndexMetadata{seg("btree", 30, 20, 60)}, nil},
		// A remapped at head, B covers none of the fragments.
		{"non-covering index does not pin the FRI", []*pb.IndexMetadata{
			seg("btree", 30, 20, 60), seg("bitmap", 2, 5, 6)}, nil},
		{"lagging index over 1 needs v1 and, through 10, v2", []*pb.IndexMetadata{
			seg("btree", 5, 1, 2)}, []uint64{10, 20}},
		// v2 serves only the segment built at 15 over 10; v1 nobody.
		{"oldest dropped while later versions stay", []*pb.IndexMetadata{seg("btree", 15, 10, 50)}, []uint64{20, 30}},
		{"only the newest needed", []*pb.IndexMetadata{
			seg("btree", 25, 50), seg("bitmap", 5, 3)}, []uint64{30}},
		{"unknown bitmap pins what postdates it", []*pb.IndexMetadata{unknownSeg(15)}, []uint64{20, 30}},
		{"covers a removed fragment", []*pb.IndexMetadata{seg("btree", 25, 70)}, []uint64{30}},
		// Seen from trim, a bitmap advanced onto 20 through v1 and v2
		// without a physical remap (dataset_version still 5). Judged alone, v1 looks trimmable (20 is neither 1, 2
		// nor 10); the data still holds 1's and 2's addresses, so the
		// chain keeps both.
		{"bitmap advanced through two versions", []*pb.IndexMetadata{seg("btree", 5, 20)}, []uint64{10, 20}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kept, dropped := Trim(&pb.FragReuseIndexDetails{Versions: versions}, tc.segments)
			var got []uint64
			for _, v := range kept.GetVersions() {
				got = append(got, v.DatasetVersion)
			}
			if len(got) != len(tc.kept) || dropped != len(versions)-len(tc.kept) {
				t.Fatalf("kept %v (dropped %d), want %v", got, dropped, tc.kept)
			}
			for i := range got {
				if got[i] != tc.kept[i] {
					t.Fatalf("kept %v, want %v", got, tc.kept)
				}
			}
			// Whatever was dropped, every segment's addresses remap the
			// same through what is kept.
			full := compile(t, versions...)
			trimmed := compile(t, kept.Versions...)
			for _, s := range tc.segments {
				bm, known := segmentBitmap(s)
				if !known {
					continue
				}
				data := RemapBitmap(bm, 0, nil)
				for _, f := range data.ToArray() {
					for off := uint32(0); off < 6; off++ {
						a1, ok1 := full.RemapFrom(addr(f, off), s.DatasetVersion)
						a2, ok2 := trimmed.RemapFrom(addr(f, off), s.DatasetVersion)
						if a1 != a2 || ok1 != ok2 {
							t.Errorf("segment %v: %d:%d remaps differently after trim", s.Type, f, off)
						}
					}
				}
			}
		})
	}
	kept, dropped := Trim(nil, nil)
	if kept == nil || dropped != 0 {
		t.Error("Trim(nil) must return empty details")
	}
	if Trimmable(versions[0], []*pb.IndexMetadata{seg("btree", 5, 20)}) != true {
		t.Error("fixture: the single-version rule is expected to miss the advanced bitmap")
	}
}

// Whether a segment needs a physical remap is decided from the age of its
// data, not from its possibly already remapped bitmap (Lance #7286).
func TestNeedsRemap(t *testing.T) {
	versions := trimChain(t)
	for _, tc := range []struct {
		name string
		seg  *pb.IndexMetadata
		want bool
	}{
		{"bitmap as built, predates v1", seg("btree", 5, 1, 2), true},
		{"bitmap already moved onto 10, data still old", seg("btree", 5, 10), true},
		{"bitmap moved through v1 and v2", seg("btree", 5, 20), true},
		{"built at v1 over 10: needs v2", seg("btree", 10, 10), true},
		{"built at v2 over 20", seg("btree", 20, 20), false},
		{"built at head", seg("btree", 30, 20, 60), false},
		{"covers only untouched fragments", seg("btree", 5, 5, 6), false},
		{"covers a fragment v3 removed", seg("btree", 25, 70), true},
		{"covers 50, compacted by v3", seg("btree", 25, 50), true},
		{"unknown bitmap, older than a version", unknownSeg(25), true},
		{"unknown bitmap, newer than every version", unknownSeg(30), false},
		{"system index", seg("__mem_wal", 0, 1, 2), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := NeedsRemap(tc.seg, versions); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	// INVARIANT: a segment that pins a version needs a remap, and once
	// remapped (dataset_version = head) it pins nothing.
	for _, s := range []*pb.IndexMetadata{seg("btree", 5, 1, 2), seg("btree", 5, 20), unknownSeg(0), seg("btree", 25, 70)} {
		kept, _ := Trim(&pb.FragReuseIndexDetails{Versions: versions}, []*pb.IndexMetadata{s})
		if len(kept.Versions) > 0 && !NeedsRemap(s, versions) {
			t.Errorf("segment %v pins %d versions but needs no remap", s, len(kept.Versions))
		}
		s.DatasetVersion = 30
		if kept, _ := Trim(&pb.FragReuseIndexDetails{Versions: versions}, []*pb.IndexMetadata{s}); len(kept.Versions) != 0 {
			t.Errorf("remapped segment still pins %d versions", len(kept.Versions))
		}
	}
}

// A middle version no segment needs is dropped even though an older one is
// kept, and the chain still remaps every segment's rows identically.
func TestTrimMiddleVersion(t *testing.T) {
	versions := []*pb.FragReuseVersion{
		ver(t, 10, nil, grp(t, []OldFragment{old(1, 4, 1)}, nf{10, 3})),
		ver(t, 20, nil, grp(t, []OldFragment{old(5, 4)}, nf{15, 4})),
		ver(t, 30, nil, grp(t, []OldFragment{old(10, 3, 0)}, nf{20, 2})),
	}
	lagging := seg("btree", 2, 1) // needs v1 and, through 10, v3; never 5
	kept, dropped := Trim(&pb.FragReuseIndexDetails{Versions: versions}, []*pb.IndexMetadata{lagging})
	if dropped != 1 || len(kept.Versions) != 2 || kept.Versions[0] != versions[0] || kept.Versions[1] != versions[2] {
		t.Fatalf("kept %v, dropped %d; want v1 and v3", kept.Versions, dropped)
	}
	full, trimmed := compile(t, versions...), compile(t, kept.Versions...)
	for off := uint32(0); off < 5; off++ {
		a1, ok1 := full.RemapFrom(addr(1, off), 2)
		a2, ok2 := trimmed.RemapFrom(addr(1, off), 2)
		if a1 != a2 || ok1 != ok2 {
			t.Errorf("1:%d: %#x,%v before trim, %#x,%v after", off, a1, ok1, a2, ok2)
		}
	}
	if a, ok := trimmed.RemapFrom(addr(1, 2), 2); !ok || a != addr(20, 0) {
		t.Errorf("1:2 -> %d:%d,%v want 20:0", a>>32, uint32(a), ok)
	}
}
