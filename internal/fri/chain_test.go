package fri

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/RoaringBitmap/roaring/v2/roaring64"

	pb "github.com/compactord/compactord/gen/compactordv1"
)

// chainAB is the chained-compaction fixture:
//
//	A (commits as 10): {1 (10 rows, deleted 2,5), 2 (5 rows, deleted 0)} -> {10 (12 rows)}
//	B (commits as 20): {10 (deleted 0 after A), 11 (4 rows, deleted 3)} -> {20 (8 rows), 21 (6 rows)}
//	C (commits as 30): {30 (3 rows, all deleted)} -> {} (a group with no survivors)
//
// Ranks: A puts fragment 1's survivors 0,1,3,4,6,7,8,9 at 10:0..7 and
// fragment 2's survivors 1..4 at 10:8..11. B puts 10:1..8 at 20:0..7, 10:9..11
// at 21:0..2 and 11:0..2 at 21:3..5.
func chainAB(t testing.TB) []*pb.FragReuseVersion {
	a := ver(t, 10, nil, grp(t, []OldFragment{old(1, 10, 2, 5), old(2, 5, 0)}, nf{10, 12}))
	b := ver(t, 20, nil, grp(t, []OldFragment{old(10, 12, 0), old(11, 4, 3)}, nf{20, 8}, nf{21, 6}))
	c := ver(t, 30, nil, grp(t, []OldFragment{old(30, 3, 0, 1, 2)}))
	return []*pb.FragReuseVersion{a, b, c}
}

func TestRemapChained(t *testing.T) {
	versions := chainAB(t)
	c := compile(t, versions...)
	const deleted = "deleted"
	for _, tc := range []struct {
		name  string
		addr  uint64
		segDV uint64
		want  string // "frag:off" or deleted
	}{
		{"survivor of 1 through A and B", addr(1, 1), 0, "20:0"},
		{"last survivor of 1", addr(1, 9), 0, "20:6"},
		{"first survivor of 2 follows 1's survivors", addr(2, 1), 0, "20:7"},
		{"survivor of 2 spills into the second new fragment", addr(2, 2), 0, "21:0"},
		{"last survivor of 2", addr(2, 4), 0, "21:2"},
		{"survivor of 11 after 10's survivors", addr(11, 0), 0, "21:3"},
		{"last survivor of 11", addr(11, 2), 0, "21:5"},
		{"deleted before A", addr(1, 2), 0, deleted},
		{"deleted before A in 2", addr(2, 0), 0, deleted},
		{"survived A, deleted before B", addr(1, 0), 0, deleted},
		{"deleted in 11", addr(11, 3), 0, deleted},
		{"offset past physical rows", addr(1, 10), 0, deleted},
		{"untouched fragment passes through", addr(5, 7), 0, "5:7"},
		{"address 0 is a real row and passes through", addr(0, 0), 0, "0:0"},
		{"all-deleted group, row 0", addr(30, 0), 0, deleted},
		{"all-deleted group, row 2", addr(30, 2), 0, deleted},
		{"segment built at A skips A", addr(10, 3), 10, "20:2"},
		{"segment built at A: deleted after A", addr(10, 0), 10, deleted},
		{"segment built between A and B", addr(10, 11), 15, "21:2"},
		{"segment built before A applies A", addr(1, 1), 9, "20:0"},
		{"segment built at B absorbed A and B", addr(20, 3), 20, "20:3"},
		{"segment built at C absorbed everything", addr(30, 0), 30, "30:0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := c.RemapFrom(tc.addr, tc.segDV)
			gotS := deleted
			if ok {
				gotS = fmt.Sprintf("%d:%d", got>>32, uint32(got))
			} else if got != 0 {
				t.Errorf("deleted row returned address %#x", got)
			}
			if gotS != tc.want {
				t.Errorf("RemapFrom(%d:%d, %d) = %s, want %s", tc.addr>>32, uint32(tc.addr), tc.segDV, gotS, tc.want)
			}
			wa, wok := referenceRemap(t, versions, tc.addr, tc.segDV)
			if wa != got || wok != ok {
				t.Errorf("reference disagrees: %#x,%v vs %#x,%v", wa, wok, got, ok)
			}
			if tc.segDV == 0 {
				ra, rok := c.Remap(tc.addr)
				if ra != got || rok != ok {
					t.Errorf("Remap disagrees with RemapFrom(.., 0)")
				}
			}
		})
	}
}

// A fragment an index covers is fully deleted and leaves the manifest
// (Lance #7374), so it never enters a group. A deferred compaction of
// other fragments must map its addresses to deleted, not pass them through.
// Asserted at the remap level on purpose: a search is masked by liveness and
// passes with the bug.
func TestGhostRowsOfFullyDeletedFragment(t *testing.T) {
	// Ten fragments 0..9 of 100 rows; the index covers all of them.
	index := seg("btree", 5, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9)
	// Fragment 3 was fully deleted: it left the manifest.
	live := bm32(0, 1, 2, 4, 5, 6, 7, 8, 9)
	cov, err := LoadCoverage([]*pb.IndexMetadata{index}, nil)
	if err != nil {
		t.Fatal(err)
	}
	removed := RemovedFragments(cov, live)
	if !removed.Equals(bm32(3)) {
		t.Fatalf("removed = %v, want {3}", removed.ToArray())
	}
	g := grp(t, []OldFragment{old(0, 100), old(1, 100, 7)}, nf{10, 199})
	if Skip([]*pb.FragReuseGroup{g}, cov, removed) {
		t.Fatal("a version with an orphaned fragment must not be skipped")
	}
	v := ver(t, 6, removed.ToArray(), g)
	c := compile(t, v)
	for off := uint32(0); off < 100; off++ {
		if got, ok := c.RemapFrom(addr(3, off), index.DatasetVersion); ok {
			t.Fatalf("ghost row: 3:%d passed through as %#x", off, got)
		}
	}
	if got, ok := c.Remap(addr(4, 42)); !ok || got != addr(4, 42) {
		t.Errorf("untouched live fragment: got %#x,%v", got, ok)
	}
	if got, ok := c.Remap(addr(1, 8)); !ok || got != addr(10, 107) {
		t.Errorf("compacted row: got %d:%d,%v want 10:107", got>>32, uint32(got), ok)
	}
	// The load-time remap drops the orphan from the coverage, too.
	if got := RemapBitmap(bm32(0, 1, 2, 3, 4), 5, []*pb.FragReuseVersion{v}); !got.Equals(bm32(2, 4, 10)) {
		t.Errorf("coverage = %v, want [2 4 10]", got.ToArray())
	}
}

// A group whose every row was deleted maps its rows to deleted (Lance #9200),
// never to address 0, which is a real row.
func TestAllDeletedGroupNeverMapsToZero(t *testing.T) {
	for _, tc := range []struct {
		name   string
		groups []*pb.FragReuseGroup
	}{
		{"no new fragments", []*pb.FragReuseGroup{grp(t, []OldFragment{old(7, 4, 0, 1, 2, 3), old(8, 4, 0, 1, 2, 3)})}},
		{"next to a group with survivors into fragment 0", []*pb.FragReuseGroup{
			grp(t, []OldFragment{old(5, 2)}, nf{0, 2}),
			grp(t, []OldFragment{old(7, 4, 0, 1, 2, 3), old(8, 4, 0, 1, 2, 3)}),
		}},
		{"zero-row old fragments", []*pb.FragReuseGroup{grp(t, []OldFragment{old(7, 0), old(8, 0)})}},
		{"empty surviving_addresses bytes", []*pb.FragReuseGroup{{
			OldFragments: []*pb.FragDigest{{Id: 7, PhysicalRows: 4, DeletedRows: 4}, {Id: 8, PhysicalRows: 4, DeletedRows: 4}},
		}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := compile(t, &pb.FragReuseVersion{DatasetVersion: 3, Groups: tc.groups})
			for off := uint32(0); off < 4; off++ {
				for _, f := range []uint32{7, 8} {
					if got, ok := c.Remap(addr(f, off)); ok || got != 0 {
						t.Errorf("%d:%d -> %#x, %v; want deleted", f, off, got, ok)
					}
				}
			}
			out := make([]uint64, 2)
			okv := make([]bool, 2)
			if n := c.RemapBatch([]uint64{addr(7, 0), addr(7, 1)}, out, okv, 0); n != 0 || okv[0] || okv[1] {
				t.Errorf("RemapBatch kept rows of an all-deleted group: %v %v", out, okv)
			}
			if got := c.AppendRemapped(nil, []uint64{addr(7, 0), addr(7, 3)}, 0); len(got) != 0 {
				t.Errorf("AppendRemapped = %v, want none", got)
			}
			if got := c.RemapBitmap(bm32(7, 8, 9), 0); !got.Equals(bm32(9)) {
				t.Errorf("coverage of an all-deleted group = %v", got.ToArray())
			}
		})
	}
}

func TestCompileRejects(t *testing.T) {
	good := grp(t, []OldFragment{old(1, 4, 1)}, nf{10, 3})
	goodBytes := good.SurvivingAddresses
	surv := func(b []byte) []*pb.FragReuseGroup {
		return []*pb.FragReuseGroup{{
			OldFragments:       []*pb.FragDigest{{Id: 1, PhysicalRows: 4, DeletedRows: 1}},
			NewFragments:       []*pb.FragDigest{{Id: 10, PhysicalRows: 3}},
			SurvivingAddresses: b,
		}}
	}
	hugeCount := append([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, goodBytes[8:]...)
	outOfOrder := func() []byte {
		_, err := encodeBitmap64([]keyedBitmap{{2, bm32(0)}, {1, bm32(0)}})
		if err == nil {
			t.Fatal("encodeBitmap64 accepted keys out of order")
		}
		// Hand-build it: count 2, key 2, key 1.
		one, _ := bm32(0).ToBytes()
		raw := []byte{2, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0}
		raw = append(raw, one...)
		raw = append(raw, 1, 0, 0, 0)
		return append(raw, one...)
	}()
	for _, tc := range []struct {
		name     string
		versions []*pb.FragReuseVersion
	}{
		{"garbage surviving_addresses", []*pb.FragReuseVersion{{DatasetVersion: 1, Groups: surv([]byte("not a roaring bitmap"))}}},
		{"truncated surviving_addresses", []*pb.FragReuseVersion{{DatasetVersion: 1, Groups: surv(goodBytes[:len(goodBytes)-3])}}},
		{"trailing bytes", []*pb.FragReuseVersion{{DatasetVersion: 1, Groups: surv(append(slices.Clone(goodBytes), 0))}}},
		{"header claims 2^63 buckets", []*pb.FragReuseVersion{{DatasetVersion: 1, Groups: surv(hugeCount)}}},
		{"short header", []*pb.FragReuseVersion{{DatasetVersion: 1, Groups: surv([]byte{1, 0, 0})}}},
		{"bucket keys out of order", []*pb.FragReuseVersion{{DatasetVersion: 1, Groups: surv(outOfOrder)}}},
		{"garbage removed_fragments", []*pb.FragReuseVersion{{DatasetVersion: 1, RemovedFragments: []byte{1, 2, 3, 4, 5, 6, 7, 8, 9}}}},
		{"survivors != new rows", []*pb.FragReuseVersion{{DatasetVersion: 1, Groups: []*pb.FragReuseGroup{{
			OldFragments:       good.OldFragments,
			NewFragments:       []*pb.FragDigest{{Id: 10, PhysicalRows: 4}},
			SurvivingAddresses: goodBytes,
		}}}}},
		{"no survivors but new rows", []*pb.FragReuseVersion{{DatasetVersion: 1, Groups: []*pb.FragReuseGroup{{
			OldFragments: good.OldFragments,
			NewFragments: []*pb.FragDigest{{Id: 10, PhysicalRows: 1}},
		}}}}},
		{"old fragment in two groups", []*pb.FragReuseVersion{ver(t, 1, nil,
			grp(t, []OldFragment{old(1, 2)}, nf{10, 2}),
			grp(t, []OldFragment{old(2, 2), old(1, 2)}, nf{11, 4}))}},
		{"old fragment also removed", []*pb.FragReuseVersion{ver(t, 1, []uint32{1}, grp(t, []OldFragment{old(1, 2)}, nf{10, 2}))}},
		{"new fragment also removed", []*pb.FragReuseVersion{ver(t, 1, []uint32{10}, grp(t, []OldFragment{old(1, 2)}, nf{10, 2}))}},
		{"new fragment listed twice", []*pb.FragReuseVersion{ver(t, 1, nil,
			grp(t, []OldFragment{old(1, 2)}, nf{10, 2}),
			grp(t, []OldFragment{old(2, 2)}, nf{10, 2}))}},
		{"new fragment ids left unassigned", []*pb.FragReuseVersion{ver(t, 1, nil,
			grp(t, []OldFragment{old(1, 4)}, nf{0, 2}, nf{0, 2}))}},
		{"fragment both old and new", []*pb.FragReuseVersion{ver(t, 1, nil,
			grp(t, []OldFragment{old(1, 2)}, nf{2, 2}),
			grp(t, []OldFragment{old(2, 2)}, nf{11, 2}))}},
		{"survivor outside the group's old fragments", []*pb.FragReuseVersion{{DatasetVersion: 1, Groups: []*pb.FragReuseGroup{{
			OldFragments:       []*pb.FragDigest{{Id: 2, PhysicalRows: 4}},
			NewFragments:       []*pb.FragDigest{{Id: 10, PhysicalRows: 3}},
			SurvivingAddresses: goodBytes,
		}}}}},
		{"survivor past physical rows", []*pb.FragReuseVersion{{DatasetVersion: 1, Groups: []*pb.FragReuseGroup{{
			OldFragments:       []*pb.FragDigest{{Id: 1, PhysicalRows: 2}},
			NewFragments:       []*pb.FragDigest{{Id: 10, PhysicalRows: 3}},
			SurvivingAddresses: goodBytes,
		}}}}},
		{"old fragment too large", []*pb.FragReuseVersion{{DatasetVersion: 1, Groups: []*pb.FragReuseGroup{{
			OldFragments: []*pb.FragDigest{{Id: 1, PhysicalRows: 1<<32 + 1}},
		}}}}},
		{"group without old fragments", []*pb.FragReuseVersion{{DatasetVersion: 1, Groups: []*pb.FragReuseGroup{{}}}}},
		{"nil group", []*pb.FragReuseVersion{{DatasetVersion: 1, Groups: []*pb.FragReuseGroup{nil}}}},
		{"nil digest", []*pb.FragReuseVersion{{DatasetVersion: 1, Groups: []*pb.FragReuseGroup{{OldFragments: []*pb.FragDigest{nil}}}}}},
		{"nil version", []*pb.FragReuseVersion{nil}},
		{"dataset_version not increasing", []*pb.FragReuseVersion{{DatasetVersion: 5}, {DatasetVersion: 5}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Compile(tc.versions)
			if err == nil {
				t.Fatalf("Compile accepted it: %d versions", c.Len())
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("error %v does not wrap ErrCorrupt", err)
			}
		})
	}
	if _, err := Compile([]*pb.FragReuseVersion{{DatasetVersion: 1, Groups: surv(goodBytes)}}); err != nil {
		t.Fatalf("the valid control case failed: %v", err)
	}
}

// Mutated bitmap bytes must give an error or a consistent chain, never a
// panic.
func TestCompileNeverPanicsOnMutatedBytes(t *testing.T) {
	v := ver(t, 1, []uint32{40, 41}, grp(t, []OldFragment{old(1, 3000, 5, 6, 7), old(2, 70000, 1)}, nf{10, 40000}, nf{11, 32996}))
	for _, field := range []string{"survivors", "removed"} {
		orig := v.Groups[0].SurvivingAddresses
		if field == "removed" {
			orig = v.RemovedFragments
		}
		rng := rand.New(rand.NewPCG(1, 2))
		for i := 0; i < 3000; i++ {
			b := slices.Clone(orig)
			switch i % 3 {
			case 0:
				b[rng.IntN(len(b))] ^= byte(1 << rng.IntN(8))
			case 1:
				b = b[:rng.IntN(len(b))]
			case 2:
				b[rng.IntN(len(b))] = byte(rng.IntN(256))
				b[rng.IntN(len(b))] = byte(rng.IntN(256))
			}
			m := &pb.FragReuseVersion{DatasetVersion: 1, RemovedFragments: v.RemovedFragments,
				Groups: []*pb.FragReuseGroup{{OldFragments: v.Groups[0].OldFragments, NewFragments: v.Groups[0].NewFragments, SurvivingAddresses: v.Groups[0].SurvivingAddresses}}}
			if field == "removed" {
				m.RemovedFragments = b
			} else {
				m.Groups[0].SurvivingAddresses = b
			}
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("mutation %d panicked: %v", i, r)
					}
				}()
				c, err := Compile([]*pb.FragReuseVersion{m})
				if err != nil {
					return
				}
				// Whatever decoded must still remap without panicking.
				for _, a := range []uint64{addr(1, 0), addr(1, 2999), addr(2, 69999), addr(40, 1)} {
					c.Remap(a)
				}
			}()
		}
	}
}

// randomChain builds nVersions chained compactions over fragments of rows
// rows with random deletions at every density, so every survivor
// representation (none, all, deleted list, survivor list, dense) and both id
// lookups (dense table, sparse search) are exercised.
func randomChain(t testing.TB, rng *rand.Rand, nFrags int, rows uint64, nVersions int) (versions []*pb.FragReuseVersion, initial []uint32) {
	densities := []float64{0, 0.001, 0.01, 0.3, 0.7, 0.99, 0.999, 1}
	nextID := uint32(1)
	var live []uint32
	fragRows := map[uint32]uint64{}
	for i := 0; i < nFrags; i++ {
		id := nextID
		if i%7 == 6 {
			id += 100000 // spread ids so some versions need the sparse lookup
		}
		nextID = id + 1
		live = append(live, id)
		fragRows[id] = rows
	}
	initial = slices.Clone(live)
	for vi := 0; vi < nVersions; vi++ {
		rng.Shuffle(len(live), func(i, j int) { live[i], live[j] = live[j], live[i] })
		var groups []*pb.FragReuseGroup
		var removed []uint32
		var next []uint32
		i := 0
		for i < len(live) {
			if rng.IntN(10) == 0 { // fully deleted earlier: an orphan
				removed = append(removed, live[i])
				i++
				continue
			}
			if rng.IntN(4) == 0 { // untouched
				next = append(next, live[i])
				i++
				continue
			}
			k := 1 + rng.IntN(3)
			if i+k > len(live) {
				k = len(live) - i
			}
			var olds []OldFragment
			var surv uint64
			for _, id := range live[i : i+k] {
				d := densities[rng.IntN(len(densities))]
				del := roaring.New()
				for o := uint64(0); o < fragRows[id]; o++ {
					if rng.Float64() < d {
						del.Add(uint32(o))
					}
				}
				olds = append(olds, OldFragment{ID: id, PhysicalRows: fragRows[id], Deleted: del})
				surv += fragRows[id] - del.GetCardinality()
			}
			i += k
			var news []nf
			for surv > 0 {
				n := min(surv, 1+uint64(rng.IntN(int(rows*2))))
				news = append(news, nf{nextID, n})
				fragRows[nextID] = n
				next = append(next, nextID)
				nextID++
				surv -= n
			}
			groups = append(groups, grp(t, olds, news...))
		}
		slices.Sort(removed)
		versions = append(versions, ver(t, uint64(10*(vi+1)), removed, groups...))
		live = next
	}
	return versions, initial
}

func TestRemapMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	for round := 0; round < 4; round++ {
		versions, initial := randomChain(t, rng, 24, 700, 3)
		c := compile(t, versions...)
		var addrs []uint64
		for _, f := range initial {
			for o := uint32(0); o < 710; o += 1 + uint32(rng.IntN(3)) {
				addrs = append(addrs, addr(f, o))
			}
		}
		ref := newReference(t, versions)
		for _, segDV := range []uint64{0, 10, 25, 30} {
			out := make([]uint64, len(addrs))
			ok := make([]bool, len(addrs))
			n := c.RemapBatch(addrs, out, ok, segDV)
			var kept []uint64
			survivors := 0
			for i, a := range addrs {
				wa, wok := ref.remap(t, a, segDV)
				ga, gok := c.RemapFrom(a, segDV)
				if ga != wa || gok != wok {
					t.Fatalf("round %d segDV %d: %d:%d -> %#x,%v want %#x,%v", round, segDV, a>>32, uint32(a), ga, gok, wa, wok)
				}
				if out[i] != wa || ok[i] != wok {
					t.Fatalf("RemapBatch disagrees at %d", i)
				}
				if wok {
					survivors++
					kept = append(kept, wa)
				}
			}
			if n != survivors {
				t.Fatalf("RemapBatch counted %d survivors, want %d", n, survivors)
			}
			if got := c.AppendRemapped(nil, addrs, segDV); !slices.Equal(got, kept) {
				t.Fatalf("AppendRemapped disagrees")
			}
			in := roaring64.BitmapOf(addrs...)
			want := roaring64.BitmapOf(kept...)
			if got := c.RemapAddresses(in, segDV); !got.Equals(want) {
				t.Fatalf("RemapAddresses disagrees")
			}
			if in.GetCardinality() != uint64(len(addrs)) {
				t.Fatalf("RemapAddresses modified its input")
			}
		}
	}
}

// The survivors of one chain land on distinct addresses: no two rows merge.
func TestRemapIsInjective(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	versions, initial := randomChain(t, rng, 16, 500, 3)
	c := compile(t, versions...)
	seen := map[uint64]uint64{}
	for _, f := range initial {
		for o := uint32(0); o < 500; o++ {
			if na, ok := c.Remap(addr(f, o)); ok {
				if prev, dup := seen[na]; dup {
					t.Fatalf("%#x and %#x both map to %#x", prev, addr(f, o), na)
				}
				seen[na] = addr(f, o)
			}
		}
	}
}

func TestRepresentationsAllExercised(t *testing.T) {
	kinds := map[survivorKind]bool{}
	rng := rand.New(rand.NewPCG(11, 12))
	sparse, dense := false, false
	for round := 0; round < 4; round++ {
		versions, _ := randomChain(t, rng, 24, 700, 3)
		c := compile(t, versions...)
		for _, v := range c.versions {
			for _, f := range v.frags {
				kinds[f.kind] = true
			}
			if len(v.frags) > 0 {
				sparse = sparse || v.dense == nil
				dense = dense || v.dense != nil
			}
		}
	}
	for _, k := range []survivorKind{kindRemoved, kindNone, kindAll, kindDeletedList, kindSurvivorList, kindDense} {
		if !kinds[k] {
			t.Errorf("representation %d never built", k)
		}
	}
	if !sparse || !dense {
		t.Errorf("lookups exercised: sparse=%v dense=%v", sparse, dense)
	}
}

func TestRemapBitmapCompiledMatchesProto(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	versions, initial := randomChain(t, rng, 20, 50, 3)
	c := compile(t, versions...)
	for i := 0; i < 200; i++ {
		bm := roaring.New()
		for _, f := range initial {
			if rng.IntN(2) == 0 {
				bm.Add(f)
			}
		}
		segDV := uint64(rng.IntN(4) * 10)
		before := bm.Clone()
		want := RemapBitmap(bm, segDV, versions)
		if got := c.RemapBitmap(bm, segDV); !got.Equals(want) {
			t.Fatalf("compiled %v, proto %v", got.ToArray(), want.ToArray())
		}
		if !bm.Equals(before) {
			t.Fatal("RemapBitmap modified its input")
		}
	}
}

// Fragments large enough for multi-bucket lists and many rank blocks, a
// group split over many new fragments (zero-row ones included), checked
// offset by offset against the reference.
func TestRemapLargeFragments(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	const rows = 20_000
	sparse := func(p float64) *roaring.Bitmap {
		bm := roaring.New()
		for o := uint32(0); o < rows; o++ {
			if rng.Float64() < p {
				bm.Add(o)
			}
		}
		return bm
	}
	olds := []OldFragment{
		{ID: 1, PhysicalRows: rows, Deleted: sparse(0.001)},                        // deleted list
		{ID: 2, PhysicalRows: rows, Deleted: roaring.Flip(sparse(0.001), 0, rows)}, // survivor list
		{ID: 3, PhysicalRows: rows, Deleted: sparse(0.5)},                          // dense
		old(4, rows), // all
		{ID: 5, PhysicalRows: rows, Deleted: roaring.Flip(roaring.New(), 0, rows)},  // none
		{ID: 6, PhysicalRows: rows, Deleted: roaring.Flip(sparse(0.0002), 0, rows)}, // tiny survivor list
		{ID: 7, PhysicalRows: rows, Deleted: sparse(0.03)},                          // dense or list
	}
	var surv uint64
	for _, o := range olds {
		surv += rows - o.Deleted.GetCardinality()
	}
	var news []nf
	id := uint32(100)
	for surv > 0 {
		n := min(surv, uint64(1+rng.IntN(9000)))
		news = append(news, nf{id, n})
		id++
		if id%5 == 0 {
			news = append(news, nf{id, 0})
			id++
		}
		surv -= n
	}
	v := ver(t, 1, nil, grp(t, olds, news...))
	c := compile(t, v)
	kinds := map[survivorKind]bool{}
	for _, f := range c.versions[0].frags {
		kinds[f.kind] = true
	}
	if len(kinds) < 5 {
		t.Fatalf("fixture exercises only %d representations", len(kinds))
	}
	var addrs []uint64
	for _, o := range olds {
		for off := uint32(0); off < rows+3; off++ {
			addrs = append(addrs, addr(o.ID, off))
		}
	}
	out, ok := make([]uint64, len(addrs)), make([]bool, len(addrs))
	c.RemapBatch(addrs, out, ok, 0)
	ref := newReference(t, []*pb.FragReuseVersion{v})
	for i, a := range addrs {
		wa, wok := ref.remap(t, a, 0)
		if out[i] != wa || ok[i] != wok {
			t.Fatalf("%d:%d -> %d:%d,%v want %d:%d,%v", a>>32, uint32(a), out[i]>>32, uint32(out[i]), ok[i], wa>>32, uint32(wa), wok)
		}
	}
}

// One old fragment split over many new fragments (binary-searched), with
// zero-row new fragments in between that must never receive a row.
func TestRemapManyNewFragments(t *testing.T) {
	var news []nf
	for i := uint32(0); i < 50; i++ {
		news = append(news, nf{100 + 2*i, 20}, nf{101 + 2*i, 0})
	}
	v := ver(t, 1, nil, grp(t, []OldFragment{old(1, 1001, 1000)}, news...))
	c := compile(t, v)
	for off := uint32(0); off < 1000; off++ {
		got, ok := c.Remap(addr(1, off))
		if want := addr(100+2*(off/20), off%20); !ok || got != want {
			t.Fatalf("1:%d -> %d:%d,%v want %d:%d", off, got>>32, uint32(got), ok, want>>32, uint32(want))
		}
	}
	if _, ok := c.Remap(addr(1, 1000)); ok {
		t.Fatal("deleted row survived")
	}
}
