package catchup

import (
	"maps"
	"strings"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/compactordv1"
)

// gens is shard -> generation; positions is index -> shard -> generation.
type (
	gens      map[string]uint64
	positions map[string]gens
)

func bitmapBytes(t testing.TB, ids ...uint32) []byte {
	t.Helper()
	b, err := roaring.BitmapOf(ids...).ToBytes()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// seg is a user index segment with a known fragment bitmap.
func seg(t testing.TB, name, uuid string, frags ...uint32) *pb.IndexMetadata {
	return &pb.IndexMetadata{Uuid: uuid, Name: name, Type: "btree", FragmentBitmap: bitmapBytes(t, frags...)}
}

// segUnknown is a user index segment whose fragment bitmap is absent (unknown).
func segUnknown(name, uuid string) *pb.IndexMetadata {
	return &pb.IndexMetadata{Uuid: uuid, Name: name, Type: "btree"}
}

func memWal(shards []string, compacted gens, catchup positions) *pb.IndexMetadata {
	d := &pb.MemWalIndexDetails{
		Shards:            shards,
		MaintainedIndexes: []string{"idx"},
		CompactedSstables: compacted,
	}
	if catchup != nil {
		d.IndexCatchup = map[string]*pb.ShardGenerations{}
		for name, g := range catchup {
			d.IndexCatchup[name] = &pb.ShardGenerations{Generations: maps.Clone(g)}
		}
	}
	return &pb.IndexMetadata{
		Uuid:    "memwal-" + strings.Join(shards, "-"),
		Name:    MemWalIndexType,
		Type:    MemWalIndexType,
		Details: &pb.IndexMetadata_MemWal{MemWal: d},
	}
}

// manifest builds a version with one fragment per id and the given indices.
func manifest(version uint64, fragIDs []uint32, indices ...*pb.IndexMetadata) *pb.Manifest {
	m := &pb.Manifest{Version: version, Indices: indices}
	for _, id := range fragIDs {
		m.Fragments = append(m.Fragments, &pb.Fragment{Id: id, PhysicalRows: 100})
	}
	return m
}

func ids(v ...uint32) []uint32 { return v }

var one = []string{"s0"}

func TestDerive(t *testing.T) {
	cases := []struct {
		name             string
		read, head, next *pb.Manifest
		want             positions // nil: index_catchup left empty
		changed          bool
	}{
		{
			// CreateIndex built at the read version: covers every fragment R had.
			name:    "coverage recorded",
			read:    manifest(3, ids(0, 1, 2), memWal(one, gens{"s0": 3}, nil)),
			head:    manifest(3, ids(0, 1, 2), memWal(one, gens{"s0": 3}, nil)),
			next:    manifest(4, ids(0, 1, 2), memWal(one, gens{"s0": 3}, nil), seg(t, "idx", "u1", 0, 1, 2)),
			want:    positions{"idx": {"s0": 3}},
			changed: true,
		},
		{
			// Credit is capped by the read version: a merge to 5 landed after the read; the index only
			// proves what R had landed.
			name:    "capped by the read version",
			read:    manifest(3, ids(0, 1), memWal(one, gens{"s0": 2}, nil)),
			head:    manifest(5, ids(0, 1, 2), memWal(one, gens{"s0": 5}, nil)),
			next:    manifest(6, ids(0, 1, 2), memWal(one, gens{"s0": 5}, nil), seg(t, "idx", "u1", 0, 1)),
			want:    positions{"idx": {"s0": 2}},
			changed: true,
		},
		{
			// Credit is capped by the commit: R had 9, but the commit records 3
			// (a restore).
			name:    "capped by the commit",
			read:    manifest(3, ids(0, 1), memWal(one, gens{"s0": 9}, nil)),
			head:    manifest(5, ids(0, 1), memWal(one, gens{"s0": 3}, nil)),
			next:    manifest(6, ids(0, 1), memWal(one, gens{"s0": 3}, nil), seg(t, "idx", "u1", 0, 1)),
			want:    positions{"idx": {"s0": 3}},
			changed: true,
		},
		{
			// The cap applies to a carried position too: the head recorded 8,
			// and this commit rolls compacted back to 3.
			name:    "capped by the commit: a carried position",
			read:    manifest(7, ids(0, 1, 2), memWal(one, gens{"s0": 9}, positions{"idx": {"s0": 8}}), seg(t, "idx", "u1", 0, 1)),
			head:    manifest(7, ids(0, 1, 2), memWal(one, gens{"s0": 9}, positions{"idx": {"s0": 8}}), seg(t, "idx", "u1", 0, 1)),
			next:    manifest(8, ids(0, 1, 2), memWal(one, gens{"s0": 3}, positions{"idx": {"s0": 8}}), seg(t, "idx", "u1", 0, 1)),
			want:    positions{"idx": {"s0": 3}},
			changed: true,
		},
		{
			// Fragment 2 is unindexed. Shard s1 never compacted: still written.
			name:    "explicit 0 when unproven",
			read:    manifest(3, ids(0, 1, 2), memWal([]string{"s0", "s1"}, gens{"s0": 4}, nil)),
			head:    manifest(3, ids(0, 1, 2), memWal([]string{"s0", "s1"}, gens{"s0": 4}, nil)),
			next:    manifest(4, ids(0, 1, 2), memWal([]string{"s0", "s1"}, gens{"s0": 4}, nil), seg(t, "idx", "u1", 0, 1)),
			want:    positions{"idx": {"s0": 0, "s1": 0}},
			changed: true,
		},
		{
			// An append: the index is unproven (fragment 2 unindexed at R)
			// but untouched, so it keeps its position.
			name:    "carry-forward for an unchanged index",
			read:    manifest(5, ids(0, 1, 2), memWal(one, gens{"s0": 8}, positions{"idx": {"s0": 6}}), seg(t, "idx", "u1", 0, 1)),
			head:    manifest(5, ids(0, 1, 2), memWal(one, gens{"s0": 8}, positions{"idx": {"s0": 6}}), seg(t, "idx", "u1", 0, 1)),
			next:    manifest(6, ids(0, 1, 2, 3), memWal(one, gens{"s0": 8}, positions{"idx": {"s0": 6}}), seg(t, "idx", "u1", 0, 1)),
			want:    positions{"idx": {"s0": 6}},
			changed: false,
		},
		{
			// Replaced by a segment with a new uuid that does not prove
			// coverage: the old position is not inherited.
			name:    "dropped for a changed index",
			read:    manifest(5, ids(0, 1, 2), memWal(one, gens{"s0": 8}, positions{"idx": {"s0": 6}}), seg(t, "idx", "u1", 0, 1)),
			head:    manifest(5, ids(0, 1, 2), memWal(one, gens{"s0": 8}, positions{"idx": {"s0": 6}}), seg(t, "idx", "u1", 0, 1)),
			next:    manifest(6, ids(0, 1, 2), memWal(one, gens{"s0": 8}, positions{"idx": {"s0": 6}}), seg(t, "idx", "u2", 0, 1)),
			want:    positions{"idx": {"s0": 0}},
			changed: true,
		},
		{
			// An index changed in place: same uuid, narrower bitmap. A uuid-only check would
			// keep 6.
			name:    "dropped for a changed index: bitmap pruned in place with the same uuid",
			read:    manifest(5, ids(0, 1, 2), memWal(one, gens{"s0": 8}, positions{"idx": {"s0": 6}}), seg(t, "idx", "u1", 0, 1, 2)),
			head:    manifest(5, ids(0, 1, 2), memWal(one, gens{"s0": 8}, positions{"idx": {"s0": 6}}), seg(t, "idx", "u1", 0, 1, 2)),
			next:    manifest(6, ids(0, 1, 2), memWal(one, gens{"s0": 8}, positions{"idx": {"s0": 6}}), seg(t, "idx", "u1", 0, 1)),
			want:    positions{"idx": {"s0": 0}},
			changed: true,
		},
		{
			// A commit that read an older version (compacted 5) does not
			// withdraw the 8 the index already demonstrated.
			name:    "a recorded position never lowered",
			read:    manifest(4, ids(0, 1, 2), memWal(one, gens{"s0": 5}, nil), seg(t, "idx", "u1", 0, 1, 2)),
			head:    manifest(7, ids(0, 1, 2), memWal(one, gens{"s0": 10}, positions{"idx": {"s0": 8}}), seg(t, "idx", "u1", 0, 1, 2)),
			next:    manifest(8, ids(0, 1, 2, 3), memWal(one, gens{"s0": 10}, positions{"idx": {"s0": 8}}), seg(t, "idx", "u1", 0, 1, 2)),
			want:    positions{"idx": {"s0": 8}},
			changed: false,
		},
		{
			// Neither segment alone covers R; their union does.
			name:    "union across delta segments",
			read:    manifest(5, ids(0, 1, 2, 3), memWal(one, gens{"s0": 4}, nil), seg(t, "idx", "u1", 0, 1)),
			head:    manifest(5, ids(0, 1, 2, 3), memWal(one, gens{"s0": 4}, positions{"idx": {"s0": 0}}), seg(t, "idx", "u1", 0, 1)),
			next:    manifest(6, ids(0, 1, 2, 3), memWal(one, gens{"s0": 4}, positions{"idx": {"s0": 0}}), seg(t, "idx", "u1", 0, 1), seg(t, "idx", "u2", 2, 3)),
			want:    positions{"idx": {"s0": 4}},
			changed: true,
		},
		{
			name:    "a segment without a fragment bitmap makes it unproven",
			read:    manifest(5, ids(0, 1, 2, 3), memWal(one, gens{"s0": 4}, nil)),
			head:    manifest(5, ids(0, 1, 2, 3), memWal(one, gens{"s0": 4}, nil)),
			next:    manifest(6, ids(0, 1, 2, 3), memWal(one, gens{"s0": 4}, nil), seg(t, "idx", "u1", 0, 1, 2, 3), segUnknown("idx", "u2")),
			want:    positions{"idx": {"s0": 0}},
			changed: true,
		},
		{
			// The operation changed nothing the derivation looks at, and the
			// head already records what R proves.
			name: "a no-op leaves the system index untouched",
			read: manifest(5, ids(0, 1), memWal([]string{"s0", "s1"}, gens{"s0": 3, "s1": 0}, positions{"idx": {"s0": 3, "s1": 0}}),
				seg(t, "idx", "u1", 0, 1)),
			head: manifest(6, ids(0, 1), memWal([]string{"s0", "s1"}, gens{"s0": 3, "s1": 0}, positions{"idx": {"s0": 3, "s1": 0}}),
				seg(t, "idx", "u1", 0, 1)),
			next: manifest(7, ids(0, 1), memWal([]string{"s0", "s1"}, gens{"s0": 3, "s1": 0}, positions{"idx": {"s0": 3, "s1": 0}}),
				seg(t, "idx", "u1", 0, 1)),
			want:    positions{"idx": {"s0": 3, "s1": 0}},
			changed: false,
		},
		{
			// Nothing merged yet: no position could exceed 0, so none is
			// recorded (see derive for why that is equivalent).
			name:    "a never-compacted table records nothing",
			read:    manifest(2, ids(0, 1), memWal([]string{"s0", "s1"}, gens{"s0": 0}, nil)),
			head:    manifest(2, ids(0, 1), memWal([]string{"s0", "s1"}, gens{"s0": 0}, nil)),
			next:    manifest(3, ids(0, 1), memWal([]string{"s0", "s1"}, gens{"s0": 0}, nil), seg(t, "idx", "u1", 0, 1)),
			want:    nil,
			changed: false,
		},
		{
			name: "indices judged independently",
			read: manifest(5, ids(0, 1, 2), memWal(one, gens{"s0": 3}, nil)),
			head: manifest(5, ids(0, 1, 2), memWal(one, gens{"s0": 3}, nil)),
			next: manifest(6, ids(0, 1, 2), memWal(one, gens{"s0": 3}, nil),
				seg(t, "a", "ua", 0, 1, 2), seg(t, "b", "ub", 0, 1)),
			want:    positions{"a": {"s0": 3}, "b": {"s0": 0}},
			changed: true,
		},
		{
			// An empty read version proves nothing: every merged row was deleted; R has no fragments.
			// The empty set is a subset of the (empty) bitmap, yet proves
			// nothing.
			name:    "an empty read version credits nothing",
			read:    manifest(5, nil, memWal(one, gens{"s0": 5}, nil)),
			head:    manifest(5, nil, memWal(one, gens{"s0": 5}, nil)),
			next:    manifest(6, nil, memWal(one, gens{"s0": 5}, nil), seg(t, "idx", "u1")),
			want:    positions{"idx": {"s0": 0}},
			changed: true,
		},
		{
			// Appends after the read do not block credit: fragments 2 and 3
			// were appended after the read.
			// Judged at R, the index covers everything.
			name:    "appends between read and commit do not block credit",
			read:    manifest(3, ids(0, 1), memWal(one, gens{"s0": 2}, nil)),
			head:    manifest(5, ids(0, 1, 2, 3), memWal(one, gens{"s0": 2}, nil)),
			next:    manifest(6, ids(0, 1, 2, 3), memWal(one, gens{"s0": 2}, nil), seg(t, "idx", "u1", 0, 1)),
			want:    positions{"idx": {"s0": 2}},
			changed: true,
		},
		{
			// Coverage is a set, not a watermark: fragment 4 is the compaction
			// of 1 and 2; merged
			// rows sit in unindexed fragment 3. A watermark at 4 would credit.
			name:    "coverage is a set not a watermark",
			read:    manifest(6, ids(0, 3, 4), memWal(one, gens{"s0": 3}, nil)),
			head:    manifest(6, ids(0, 3, 4), memWal(one, gens{"s0": 3}, nil)),
			next:    manifest(7, ids(0, 3, 4), memWal(one, gens{"s0": 3}, nil), seg(t, "idx", "u1", 0, 4)),
			want:    positions{"idx": {"s0": 0}},
			changed: true,
		},
		{
			// Shards are judged independently: A at 10/8, B at 10/2, unchanged
			// and unproven.
			name: "shards independent",
			read: manifest(9, ids(0, 1, 2), memWal([]string{"A", "B"}, gens{"A": 10, "B": 10}, positions{"idx": {"A": 8, "B": 2}}),
				seg(t, "idx", "u1", 0, 1)),
			head: manifest(9, ids(0, 1, 2), memWal([]string{"A", "B"}, gens{"A": 10, "B": 10}, positions{"idx": {"A": 8, "B": 2}}),
				seg(t, "idx", "u1", 0, 1)),
			next: manifest(10, ids(0, 1, 2, 3), memWal([]string{"A", "B"}, gens{"A": 10, "B": 10}, positions{"idx": {"A": 8, "B": 2}}),
				seg(t, "idx", "u1", 0, 1)),
			want:    positions{"idx": {"A": 8, "B": 2}},
			changed: false,
		},
		{
			// Derive is deterministic: every case runs twice; this one exercises all the
			// branches at once (credit, carry, drop, several shards).
			name: "same result on two attempts",
			read: manifest(5, ids(0, 1, 2), memWal([]string{"s0", "s1", "s2"}, gens{"s0": 4, "s1": 7}, nil),
				seg(t, "a", "ua", 0, 1, 2)),
			head: manifest(7, ids(0, 1, 2, 3), memWal([]string{"s0", "s1", "s2"}, gens{"s0": 6, "s1": 7},
				positions{"a": {"s0": 5, "s1": 1, "s2": 0}, "b": {"s0": 2, "s1": 2, "s2": 0}, "c": {"s0": 1, "s1": 1, "s2": 0}}),
				seg(t, "a", "ua", 0, 1, 2), seg(t, "b", "ub", 0), seg(t, "c", "uc", 0)),
			next: manifest(8, ids(0, 1, 2, 3), memWal([]string{"s0", "s1", "s2"}, gens{"s0": 6, "s1": 7, "s3": 1},
				positions{"a": {"s0": 5, "s1": 1, "s2": 0}, "b": {"s0": 2, "s1": 2, "s2": 0}, "c": {"s0": 1, "s1": 1, "s2": 0}}),
				seg(t, "a", "ua", 0, 1, 2), seg(t, "b", "ub", 0), seg(t, "c", "uc2", 0)),
			want: positions{
				"a": {"s0": 5, "s1": 7, "s2": 0, "s3": 0},
				"b": {"s0": 2, "s1": 2, "s2": 0, "s3": 0},
				"c": {"s0": 0, "s1": 0, "s2": 0, "s3": 0},
			},
			changed: true,
		},
		{
			name:    "index removed: its entry dropped",
			read:    manifest(5, ids(0, 1), memWal(one, gens{"s0": 5}, positions{"old": {"s0": 5}, "keep": {"s0": 5}}), seg(t, "old", "uo", 0, 1), seg(t, "keep", "uk", 0, 1)),
			head:    manifest(5, ids(0, 1), memWal(one, gens{"s0": 5}, positions{"old": {"s0": 5}, "keep": {"s0": 5}}), seg(t, "old", "uo", 0, 1), seg(t, "keep", "uk", 0, 1)),
			next:    manifest(6, ids(0, 1), memWal(one, gens{"s0": 5}, positions{"old": {"s0": 5}, "keep": {"s0": 5}}), seg(t, "keep", "uk", 0, 1)),
			want:    positions{"keep": {"s0": 5}},
			changed: true,
		},
		{
			// No read version (table creation): nothing to prove against.
			name:    "read == nil credits nothing",
			read:    nil,
			head:    nil,
			next:    manifest(1, ids(0), memWal(one, gens{"s0": 3}, nil), seg(t, "idx", "u1", 0)),
			want:    positions{"idx": {"s0": 0}},
			changed: true,
		},
		{
			// The read version predates __mem_wal: R.compacted is 0 everywhere.
			name:    "read without __mem_wal credits nothing",
			read:    manifest(1, ids(0)),
			head:    manifest(2, ids(0), memWal(one, gens{"s0": 3}, nil)),
			next:    manifest(3, ids(0), memWal(one, gens{"s0": 3}, nil), seg(t, "idx", "u1", 0)),
			want:    positions{"idx": {"s0": 0}},
			changed: true,
		},
		{
			// Compacted positions rolled back to 0: stale entries are cleared.
			name:    "compacted back to zero clears recorded positions",
			read:    manifest(5, ids(0), memWal(one, gens{"s0": 4}, positions{"idx": {"s0": 4}}), seg(t, "idx", "u1", 0)),
			head:    manifest(5, ids(0), memWal(one, gens{"s0": 4}, positions{"idx": {"s0": 4}}), seg(t, "idx", "u1", 0)),
			next:    manifest(6, ids(0), memWal(one, gens{"s0": 0}, positions{"idx": {"s0": 4}}), seg(t, "idx", "u1", 0)),
			want:    nil,
			changed: true,
		},
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := []*pb.Manifest{proto.CloneOf(tc.read), proto.CloneOf(tc.head), proto.CloneOf(tc.next)}

			got, changed, err := Derive(tc.read, tc.head, tc.next)
			if err != nil {
				t.Fatalf("Derive: %v", err)
			}
			if changed != tc.changed {
				t.Errorf("changed = %v, want %v", changed, tc.changed)
			}
			if g := toPositions(got); !equalPositions(g, tc.want) {
				t.Errorf("index_catchup = %v, want %v", g, tc.want)
			}

			// Everything but index_catchup is next's, untouched.
			cur, _ := memWalDetails(tc.next)
			rest, curRest := proto.CloneOf(got), proto.CloneOf(cur)
			rest.IndexCatchup, curRest.IndexCatchup = nil, nil
			if !proto.Equal(rest, curRest) {
				t.Errorf("details outside index_catchup changed:\n got %v\nwant %v", rest, curRest)
			}
			// changed=false means next's details, byte for byte.
			if !changed {
				if !proto.Equal(got, cur) || string(marshal(t, got)) != string(marshal(t, cur)) {
					t.Errorf("changed=false but details differ:\n got %v\nwant %v", got, cur)
				}
			}

			// Inputs are never mutated.
			for i, m := range []*pb.Manifest{tc.read, tc.head, tc.next} {
				if !proto.Equal(m, before[i]) {
					t.Errorf("input %d mutated", i)
				}
			}

			// Deterministic: a second attempt derives the identical result.
			again, changedAgain, err := Derive(tc.read, tc.head, tc.next)
			if err != nil {
				t.Fatalf("second Derive: %v", err)
			}
			if changedAgain != changed || string(marshal(t, again)) != string(marshal(t, got)) {
				t.Errorf("second attempt differs: %v vs %v", again, got)
			}
		})
	}
}

// TestDeriveNoOpEqualsHead pins the no-op contract against the head itself:
// when next is head, the published details are head's, byte for byte.
func TestDeriveNoOpEqualsHead(t *testing.T) {
	head := manifest(6, ids(0, 1), memWal([]string{"s0", "s1"}, gens{"s0": 3}, positions{"idx": {"s0": 3, "s1": 0}}),
		seg(t, "idx", "u1", 0, 1), seg(t, "idx", "u2", 1))
	read := proto.CloneOf(head)
	read.Version = 5
	next := proto.CloneOf(head)
	next.Version = 7

	got, changed, err := Derive(read, head, next)
	if err != nil {
		t.Fatal(err)
	}
	headMW, _ := memWalDetails(head)
	if changed || !proto.Equal(got, headMW) || string(marshal(t, got)) != string(marshal(t, headMW)) {
		t.Fatalf("changed=%v, details %v, want head's %v", changed, got, headMW)
	}
}

// TestDeriveSegmentOrder: the segment order inside the index list is not an
// input to the result (unchanged is a set comparison).
func TestDeriveSegmentOrder(t *testing.T) {
	mw := memWal(one, gens{"s0": 9}, positions{"idx": {"s0": 7}})
	head := manifest(5, ids(0, 1, 2, 3), mw, seg(t, "idx", "u1", 0, 1), seg(t, "idx", "u2", 2))
	next := manifest(6, ids(0, 1, 2, 3), proto.CloneOf(mw), seg(t, "idx", "u2", 2), seg(t, "idx", "u1", 0, 1))
	got, changed, err := Derive(head, head, next)
	if err != nil {
		t.Fatal(err)
	}
	if changed || !equalPositions(toPositions(got), positions{"idx": {"s0": 7}}) {
		t.Fatalf("changed=%v, got %v", changed, toPositions(got))
	}
}

func TestDeriveNoMemWal(t *testing.T) {
	m := manifest(2, ids(0), seg(t, "idx", "u1", 0))
	got, changed, err := Derive(m, m, m)
	if got != nil || changed || err != nil {
		t.Fatalf("Derive without __mem_wal = %v, %v, %v; want nil, false, nil", got, changed, err)
	}
}

func TestDeriveErrors(t *testing.T) {
	mw := func() *pb.IndexMetadata { return memWal(one, gens{"s0": 3}, nil) }
	read := manifest(2, ids(0, 1), mw())
	cases := []struct {
		name string
		next *pb.Manifest
		want string
	}{
		{"two __mem_wal indices", manifest(3, ids(0), mw(), mw()), "two __mem_wal"},
		{"__mem_wal without details", manifest(3, ids(0), &pb.IndexMetadata{Uuid: "m", Name: MemWalIndexType, Type: MemWalIndexType}), "no mem_wal details"},
		{"unnamed user index", manifest(3, ids(0), mw(), &pb.IndexMetadata{Uuid: "u", Type: "btree", FragmentBitmap: bitmapBytes(t, 0)}), "has no name"},
		{"malformed bitmap", manifest(3, ids(0), mw(), &pb.IndexMetadata{Uuid: "u", Name: "idx", Type: "btree", FragmentBitmap: []byte{1, 2, 3, 4, 5}}), "malformed"},
		{"trailing bytes", manifest(3, ids(0), mw(), &pb.IndexMetadata{Uuid: "u", Name: "idx", Type: "btree", FragmentBitmap: append(bitmapBytes(t, 0, 1), 0)}), "trailing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Derive(read, read, tc.next)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestBitmapPresenceSurvivesEncoding: a known bitmap stays known through the
// wire format, and an absent one stays absent (unknown).
func TestBitmapPresenceSurvivesEncoding(t *testing.T) {
	for _, im := range []*pb.IndexMetadata{segUnknown("idx", "u1"), {Uuid: "u2", Name: "idx", FragmentBitmap: []byte{}}} {
		var back pb.IndexMetadata
		if err := proto.Unmarshal(marshal(t, im), &back); err != nil {
			t.Fatal(err)
		}
		if (back.FragmentBitmap == nil) != (im.FragmentBitmap == nil) {
			t.Errorf("%s: presence changed across encoding", im.GetUuid())
		}
	}
}

func TestIndexCaughtUp(t *testing.T) {
	d := memWal(one, gens{"s0": 9}, positions{"idx": {"s0": 4, "s1": 0}}).GetMemWal()
	d.IndexCatchup["nil"] = nil
	cases := []struct {
		d            *pb.MemWalIndexDetails
		index, shard string
		gen          uint64
		known        bool
	}{
		{d, "idx", "s0", 4, true},
		{d, "idx", "s1", 0, true}, // explicit 0 is known
		{d, "idx", "s2", 0, false},
		{d, "other", "s0", 0, false},
		{d, "nil", "s0", 0, false},
		{nil, "idx", "s0", 0, false},
	}
	for _, tc := range cases {
		gen, known := IndexCaughtUp(tc.d, tc.index, tc.shard)
		if gen != tc.gen || known != tc.known {
			t.Errorf("IndexCaughtUp(%s, %s) = %d, %v; want %d, %v", tc.index, tc.shard, gen, known, tc.gen, tc.known)
		}
	}
}

func marshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func toPositions(d *pb.MemWalIndexDetails) positions {
	if len(d.GetIndexCatchup()) == 0 {
		return nil
	}
	out := positions{}
	for name, sg := range d.GetIndexCatchup() {
		out[name] = maps.Clone(gens(sg.GetGenerations()))
	}
	return out
}

// equalPositions compares exactly: a missing shard entry is not a 0.
func equalPositions(a, b positions) bool {
	return maps.EqualFunc(a, b, func(x, y gens) bool { return maps.Equal(x, y) })
}
