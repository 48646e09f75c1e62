package fri

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/meta"
)

// v1 (read 10): {1,2} -> {10}. v2 (read 20): {10, 11} -> {20}.
// v3 (read 30): {50} -> {60}, and fragment 70 was fully deleted.
func trimChain(t *testing.T) []Version {
	return []Version{
		ver(10, nil, grp(t, []OldFragment{old(1, 2), old(2, 2)}, nf(10, 4))),
		ver(20, nil, grp(t, []OldFragment{old(10, 4), old(11, 2)}, nf(20, 6))),
		ver(30, []uint32{70}, grp(t, []OldFragment{old(50, 2)}, nf(60, 2))),
	}
}

func TestTrimmable(t *testing.T) {
	ix := newIndex(t, trimChain(t)...)
	for _, tc := range []struct {
		name     string
		segments []*pb.IndexMetadata
		kept     []uint64 // dataset versions kept
	}{
		{"no segments", nil, nil},
		{"everything remapped", []*pb.IndexMetadata{seg("a", 31, 20, 60)}, nil},
		// lance#7870: an index that never covered the compacted fragments
		// does not pin the FRI (Lance's own cleanup keeps every version
		// while such an index has an older dataset_version).
		{"an index disjoint from every version pins nothing", []*pb.IndexMetadata{seg("a", 31, 20, 60), seg("b", 2, 5, 6)}, nil},
		{"lagging index over 1 needs v1 and, through 10, v2", []*pb.IndexMetadata{seg("a", 5, 1, 2)}, []uint64{10, 20}},
		// Lance stamps a version with the compaction's read version, so an
		// index built at that version holds the old addresses: its
		// dataset_version equal to the version's proves nothing.
		{"built at the compaction's read version over its old fragments", []*pb.IndexMetadata{seg("a", 10, 1, 2)}, []uint64{10, 20}},
		// And a compaction that rebased commits later still.
		{"built after the read version, before the rebased commit", []*pb.IndexMetadata{seg("a", 12, 1, 2)}, []uint64{10, 20}},
		{"oldest dropped while later versions stay", []*pb.IndexMetadata{seg("a", 15, 10, 50)}, []uint64{20, 30}},
		{"only the newest needed", []*pb.IndexMetadata{seg("a", 25, 50), seg("b", 5, 3)}, []uint64{30}},
		{"covers a removed fragment", []*pb.IndexMetadata{seg("a", 25, 70)}, []uint64{30}},
		// A bitmap moved onto 10 without its data being remapped (LanceDB
		// writes the load-time remapped bitmap in its index optimize and
		// keeps dataset_version).
		{"bitmap already moved onto the new fragment", []*pb.IndexMetadata{seg("a", 3, 10)}, []uint64{10, 20}},
		{"bitmap advanced through two versions", []*pb.IndexMetadata{seg("a", 5, 20)}, []uint64{10, 20}},
		// The same bitmap at a dataset_version above the versions is an
		// index built (or remapped) after them.
		{"built on the new fragments after the versions", []*pb.IndexMetadata{seg("a", 31, 20)}, nil},
		{"unknown bitmap pins everything", []*pb.IndexMetadata{unknownSeg(40)}, []uint64{10, 20, 30}},
		{"corrupt bitmap pins everything", []*pb.IndexMetadata{{Name: "a", DatasetVersion: 40, FragmentBitmap: []byte("junk")}}, []uint64{10, 20, 30}},
		{"system indexes do not count", []*pb.IndexMetadata{seg(meta.MemWalIndexName, 0, 1, 2), seg(meta.FragReuseIndexName, 0, 1)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			trimmable := ix.Trimmable(tc.segments)
			var kept []uint64
			for _, v := range ix.Versions {
				if !slices.Contains(trimmable, v.DatasetVersion) {
					kept = append(kept, v.DatasetVersion)
				}
			}
			if !slices.Equal(kept, tc.kept) {
				t.Fatalf("kept %v, want %v", kept, tc.kept)
			}
			// Whatever was dropped, every segment's addresses remap the
			// same through what is kept.
			var rest []Version
			for _, v := range ix.Versions {
				if slices.Contains(kept, v.DatasetVersion) {
					rest = append(rest, v)
				}
			}
			trimmed := newIndex(t, rest...)
			for _, s := range tc.segments {
				bm, known, err := meta.FragmentBitmap(s)
				if err != nil || !known || meta.IsSystemIndex(s) {
					continue
				}
				for _, f := range bm.ToArray() {
					for off := uint32(0); off < 6; off++ {
						a1, ok1 := ix.Remapper(0)(addr(f, off))
						a2, ok2 := trimmed.Remapper(0)(addr(f, off))
						if a1 != a2 || ok1 != ok2 {
							t.Errorf("segment %s: %d:%d remaps differently after trim", s.GetName(), f, off)
						}
					}
				}
			}
			// INVARIANT: a segment that pins a version needs a remap.
			for _, s := range tc.segments {
				pins := !slices.Equal(kept, nil) && len(ix.Trimmable([]*pb.IndexMetadata{s})) < len(ix.Versions)
				if pins && !meta.IsSystemIndex(s) && !ix.NeedsRemap(s) {
					t.Errorf("segment %s pins a version but needs no remap", s.GetName())
				}
			}
		})
	}
}

// Once remapped (bitmap through the chain, dataset_version = the head it
// read), a segment pins nothing: the FRI drains.
func TestRemappedSegmentReleasesTheFRI(t *testing.T) {
	ix := newIndex(t, trimChain(t)...)
	for _, s := range []*pb.IndexMetadata{seg("a", 5, 1, 2), seg("a", 5, 20), seg("a", 10, 1, 2, 11), seg("a", 25, 70, 50)} {
		if !ix.NeedsRemap(s) {
			t.Errorf("%v needs no remap", s)
		}
		remapped := &pb.IndexMetadata{Name: "a", DatasetVersion: 31, FragmentBitmap: meta.EncodeBitmap(ix.RemapBitmap(s))}
		if ix.NeedsRemap(remapped) {
			t.Errorf("remapped %v still needs a remap", s)
		}
		if got := ix.Trimmable([]*pb.IndexMetadata{remapped}); len(got) != 3 {
			t.Errorf("remapped %v pins versions: trimmable %v", s, got)
		}
	}
}

// A middle version no segment needs is dropped even though an older one is
// kept, and the chain still remaps every segment's rows identically.
func TestTrimMiddleVersion(t *testing.T) {
	ix := newIndex(t,
		ver(10, nil, grp(t, []OldFragment{old(1, 4, 1)}, nf(10, 3))),
		ver(20, nil, grp(t, []OldFragment{old(5, 4)}, nf(15, 4))),
		ver(30, nil, grp(t, []OldFragment{old(10, 3, 0)}, nf(20, 2))),
	)
	lagging := seg("a", 2, 1) // needs v1 and, through 10, v3; never 5
	if got := ix.Trimmable([]*pb.IndexMetadata{lagging}); !slices.Equal(got, []uint64{20}) {
		t.Fatalf("trimmable %v, want [20]", got)
	}
	trimmed := newIndex(t, ix.Versions[0], ix.Versions[2])
	for off := uint32(0); off < 5; off++ {
		a1, ok1 := ix.Remapper(0)(addr(1, off))
		a2, ok2 := trimmed.Remapper(0)(addr(1, off))
		if a1 != a2 || ok1 != ok2 {
			t.Errorf("1:%d: %#x,%v before trim, %#x,%v after", off, a1, ok1, a2, ok2)
		}
	}
	if a, ok := trimmed.Remapper(0)(addr(1, 2)); !ok || a != addr(20, 0) {
		t.Errorf("1:2 -> %d:%d,%v want 20:0", a>>32, uint32(a), ok)
	}
}

func TestTrimOperation(t *testing.T) {
	ctx := context.Background()
	b := mem(t)
	vs := trimChain(t)
	var ix *Index
	var m *pb.IndexMetadata
	for _, v := range vs {
		nm, _, err := AppendVersion(ctx, b, ix, m, v, time.UnixMilli(1))
		if err != nil {
			t.Fatal(err)
		}
		m = nm
		if ix, err = Load(ctx, b, manifestFile(v.DatasetVersion+1, nil, m)); err != nil {
			t.Fatal(err)
		}
	}
	now := time.UnixMilli(99)

	// Nothing trimmable: no operation.
	read := manifestFile(40, []uint64{20, 60}, m, seg("a", 5, 1, 2), seg("b", 25, 70))
	if op, keys, err := ix.Trim(ctx, b, read, now); op != nil || keys != nil || err != nil {
		t.Fatalf("Trim with every version needed = %v, %v, %v", op, keys, err)
	}

	// v3 trimmable: the FRI is replaced by one with v1 and v2.
	read = manifestFile(40, []uint64{20, 60}, m, seg("a", 5, 1, 2))
	op, _, err := ix.Trim(ctx, b, read, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(op.GetRemovedIndices()) != 1 || meta.UUIDString(op.GetRemovedIndices()[0].GetUuid()) != meta.UUIDString(m.GetUuid()) || len(op.GetNewIndices()) != 1 {
		t.Fatalf("op %v", op)
	}
	nm := op.GetNewIndices()[0]
	if nm.GetDatasetVersion() != 40 || nm.GetCreatedAt() != 99 || nm.GetName() != meta.FragReuseIndexName {
		t.Errorf("new FRI %v", nm)
	}
	if bm, _, _ := meta.FragmentBitmap(nm); !bm.Equals(bm32(10, 20)) {
		t.Errorf("new FRI bitmap %v, want the kept versions' new fragments [10 20]", bm.ToArray())
	}
	got, err := Load(ctx, b, manifestFile(41, nil, nm))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Versions) != 2 || got.Versions[0].DatasetVersion != 10 || got.Versions[1].DatasetVersion != 20 {
		t.Errorf("kept %v", got.Versions)
	}

	// Every index remapped: the FRI is removed.
	read = manifestFile(40, []uint64{20, 60}, m, seg("a", 40, 20, 60))
	op, _, err = ix.Trim(ctx, b, read, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(op.GetNewIndices()) != 0 || len(op.GetRemovedIndices()) != 1 {
		t.Errorf("op %v, want the FRI removed", op)
	}
}

func TestStraddles(t *testing.T) {
	ix := newIndex(t, ver(10, nil, grp(t, []OldFragment{old(1, 2), old(2, 2)}, nf(10, 4))))
	for _, tc := range []struct {
		name string
		seg  *pb.IndexMetadata
		old  []uint64
		want bool
	}{
		{"fully covered", seg("a", 1, 3, 4), []uint64{3, 4}, false},
		{"not covered", seg("a", 1, 5), []uint64{3, 4}, false},
		{"partly covered", seg("a", 1, 3), []uint64{3, 4}, true},
		{"covered through an earlier version", seg("a", 1, 1, 2, 3), []uint64{3, 10}, false},
		{"partly through an earlier version", seg("a", 1, 1, 2), []uint64{3, 10}, true},
		{"unknown bitmap", unknownSeg(1), []uint64{3, 4}, false},
		{"system index", seg(meta.MemWalIndexName, 1, 3), []uint64{3, 4}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Straddles([]*pb.IndexMetadata{tc.seg}, ix, tc.old)
			if (err != nil) != tc.want {
				t.Errorf("Straddles = %v, want straddling %v", err, tc.want)
			}
		})
	}
}

func TestRemapBitmap(t *testing.T) {
	ix := newIndex(t, trimChain(t)...)
	for _, tc := range []struct {
		name string
		seg  *pb.IndexMetadata
		want []uint32 // nil: unknown
	}{
		{"groups fully covered swap, through the chain", seg("a", 1, 1, 2, 11, 5), []uint32{5, 20}},
		{"a later group partly covered drops the covered part", seg("a", 1, 1, 2, 5), []uint32{5}},
		{"partly covered drops the covered part", seg("a", 1, 1, 5), []uint32{5}},
		{"removed fragments leave", seg("a", 1, 70, 5), []uint32{5}},
		{"already remapped stays", seg("a", 31, 20, 60), []uint32{20, 60}},
		{"unknown bitmap", unknownSeg(1), nil},
		{"corrupt bitmap narrows to nothing", &pb.IndexMetadata{Name: "a", FragmentBitmap: []byte("junk")}, []uint32{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ix.RemapBitmap(tc.seg)
			if tc.want == nil {
				if got != nil {
					t.Errorf("got %v, want unknown", got.ToArray())
				}
				return
			}
			if got == nil || !got.Equals(bm32(tc.want...)) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	var none *Index
	if got := none.RemapBitmap(seg("a", 1, 1, 2)); !got.Equals(bm32(1, 2)) {
		t.Errorf("no FRI: %v", got.ToArray())
	}
}

// TestTrimNeverChangesARemap: for random chains and an index built before
// each compaction (at the compaction's read version, so its
// dataset_version equals the version's), dropping what Trimmable allows
// leaves the remap of every address the index holds unchanged; a bitmap
// already moved onto the new fragments (dataset_version kept, as LanceDB's
// index optimize does) is covered too, up to dead entries of a group whose
// every row was deleted. (A bitmap compactord's load-time remap moved has
// also dropped removed fragments; compactord writes one only with the data
// remapped.)
func TestTrimNeverChangesARemap(t *testing.T) {
	for seed := uint64(1); seed <= 300; seed++ {
		r := rand.New(rand.NewPCG(seed, 11))
		vs, snaps, final := randomChainWithLive(t, r, 1+r.IntN(4))
		alive := map[uint64]bool{}
		for _, f := range final {
			alive[f.id] = true
		}
		ix := newIndex(t, vs...)
		for k, live := range snaps {
			var frags []uint32
			var addrs []uint64
			for _, f := range live {
				frags = append(frags, uint32(f.id))
				for off := uint64(0); off < f.rows; off++ {
					addrs = append(addrs, f.id<<32|off)
				}
			}
			segs := []*pb.IndexMetadata{seg("a", vs[k].DatasetVersion, frags...)}
			// The same data with its bitmap moved through the chain as
			// LanceDB's load-time remap moves it (it keeps removed
			// fragments: it does not know the field).
			var noRemoved []Version
			for _, v := range vs {
				v.Removed = nil
				noRemoved = append(noRemoved, v)
			}
			moved := &pb.IndexMetadata{Name: "b", DatasetVersion: vs[k].DatasetVersion, FragmentBitmap: meta.EncodeBitmap(newIndex(t, noRemoved...).RemapBitmap(segs[0]))}
			for _, s := range []*pb.IndexMetadata{segs[0], moved} {
				drop := ix.Trimmable([]*pb.IndexMetadata{s})
				var kept []Version
				for _, v := range vs {
					if !slices.Contains(drop, v.DatasetVersion) {
						kept = append(kept, v)
					}
				}
				trimmed := newIndex(t, kept...)
				full, part := ix.Remapper(0), trimmed.Remapper(0)
				for _, a := range addrs {
					a1, ok1 := full(a)
					a2, ok2 := part(a)
					if s == moved && !ok1 && !alive[a2>>32] {
						// A group whose every row was deleted leaves no
						// trace in a moved bitmap: the entry stays, dead
						// and masked by liveness, never a wrong row.
						continue
					}
					if a1 != a2 || ok1 != ok2 {
						t.Fatalf("seed %d, index %s built before version %d: trimming %v changes %#x: %#x,%v -> %#x,%v", seed, s.GetName(), k, drop, a, a1, ok1, a2, ok2)
					}
				}
			}
		}
	}
}

type liveFrag struct{ id, rows uint64 }

// randomChainWithLive is randomChain that also returns the live fragments
// before each version.
func randomChainWithLive(t testing.TB, r *rand.Rand, n int) ([]Version, [][]liveFrag, []liveFrag) {
	var live []liveFrag
	next := uint64(0)
	for i := 0; i < 5; i++ {
		live = append(live, liveFrag{next, uint64(1 + r.IntN(40))})
		next++
	}
	var vs []Version
	var snaps [][]liveFrag
	for k := 0; k < n; k++ {
		snaps = append(snaps, slices.Clone(live))
		v := Version{DatasetVersion: uint64(10 * (k + 1))}
		if len(live) > 3 && r.IntN(3) == 0 {
			i := r.IntN(len(live))
			v.Removed = bm32(uint32(live[i].id))
			live = slices.Delete(live, i, i+1)
		}
		lo := r.IntN(len(live))
		hi := lo + 1 + r.IntN(min(3, len(live)-lo))
		var olds []OldFragment
		var surv uint64
		for _, f := range live[lo:hi] {
			o := OldFragment{ID: f.id, PhysicalRows: f.rows, Deleted: bm32()}
			for off := uint64(0); off < f.rows; off++ {
				if r.IntN(4) == 0 {
					o.Deleted.Add(uint32(off))
				}
			}
			surv += f.rows - o.Deleted.GetCardinality()
			olds = append(olds, o)
		}
		slices.SortFunc(olds, func(a, b OldFragment) int { return cmpU64(a.ID, b.ID) })
		var news []Digest
		var added []liveFrag
		for surv > 0 {
			rows := min(surv, uint64(1+r.IntN(30)))
			news = append(news, nf(next, rows))
			added = append(added, liveFrag{next, rows})
			next++
			surv -= rows
		}
		v.Groups = append(v.Groups, grp(t, olds, news...))
		live = append(append(append([]liveFrag{}, live[:lo]...), added...), live[hi:]...)
		vs = append(vs, v)
	}
	return vs, snaps, live
}
