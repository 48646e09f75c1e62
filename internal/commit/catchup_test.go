package commit

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/meta"
)

const idxA = "00000000-0000-4000-8000-000000000001"

// TestCatchupDerivation states the read-version rule case by case.
func TestCatchupDerivation(t *testing.T) {
	type cm = map[string]uint64
	cases := []struct {
		name string
		read *meta.ManifestFile
		head *meta.ManifestFile
		txn  *pb.Transaction
		want map[string]uint64 // catch-up of "id_idx" per shard
	}{
		{
			name: "covering the read version credits what the read version had merged",
			read: version(5, []uint64{0, 1}, segment(t, "id_idx", idxA, []uint32{0, 1}), memwalIndex(t, cm{shardA: 2}, nil, "id_idx")),
			head: version(6, []uint64{0, 1, 2}, segment(t, "id_idx", idxA, []uint32{0, 1}), memwalIndex(t, cm{shardA: 2}, nil, "id_idx")),
			txn:  appendTxn(5, 1),
			want: cm{shardA: 2},
		},
		{
			name: "credit is capped by the read version (read had 2, the commit records 3)",
			read: version(5, []uint64{0, 1}, segment(t, "id_idx", idxA, []uint32{0, 1}), memwalIndex(t, cm{shardA: 2}, nil, "id_idx")),
			head: version(6, []uint64{0, 1}, segment(t, "id_idx", idxA, []uint32{0, 1}), memwalIndex(t, cm{shardA: 2}, nil, "id_idx")),
			txn:  mergeTxn(5, shardA, 3),
			want: cm{shardA: 2},
		},
		{
			name: "credit is capped by the commit (read had 9, the head records 3 after a restore)",
			read: version(5, []uint64{0}, segment(t, "id_idx", idxA, []uint32{0}), memwalIndex(t, cm{shardA: 9}, nil, "id_idx")),
			head: version(6, []uint64{0}, segment(t, "id_idx", idxA, []uint32{0}), memwalIndex(t, cm{shardA: 3}, nil, "id_idx")),
			txn:  appendTxn(5, 1),
			want: cm{shardA: 3},
		},
		{
			name: "an empty read version credits nothing",
			read: version(5, nil, segment(t, "id_idx", idxA, []uint32{}), memwalIndex(t, cm{shardA: 2}, nil, "id_idx")),
			head: version(6, nil, segment(t, "id_idx", idxA, []uint32{}), memwalIndex(t, cm{shardA: 2}, nil, "id_idx")),
			txn:  appendTxn(5, 1),
			want: cm{shardA: 0},
		},
		{
			name: "appends between read and commit do not block credit",
			read: version(5, []uint64{0}, segment(t, "id_idx", idxA, []uint32{0}), memwalIndex(t, cm{shardA: 4}, nil, "id_idx")),
			head: version(9, []uint64{0, 1, 2, 3}, segment(t, "id_idx", idxA, []uint32{0}), memwalIndex(t, cm{shardA: 4}, nil, "id_idx")),
			txn:  appendTxn(5, 1),
			want: cm{shardA: 4},
		},
		{
			name: "coverage is a set: {0,4} does not cover a read version with 3",
			read: version(5, []uint64{0, 3, 4}, segment(t, "id_idx", idxA, []uint32{0, 4}), memwalIndex(t, cm{shardA: 4}, nil, "id_idx")),
			head: version(6, []uint64{0, 3, 4}, segment(t, "id_idx", idxA, []uint32{0, 4}), memwalIndex(t, cm{shardA: 4}, nil, "id_idx")),
			txn:  appendTxn(5, 1),
			want: cm{shardA: 0},
		},
		{
			name: "a segment without a bitmap makes the index unproven",
			read: version(5, []uint64{0}, segment(t, "id_idx", idxA, nil), memwalIndex(t, cm{shardA: 4}, nil, "id_idx")),
			head: version(6, []uint64{0}, segment(t, "id_idx", idxA, nil), memwalIndex(t, cm{shardA: 4}, nil, "id_idx")),
			txn:  appendTxn(5, 1),
			want: cm{shardA: 0},
		},
		{
			name: "unchanged and unproven keeps the head's position, shard by shard",
			read: version(5, []uint64{0, 7}, segment(t, "id_idx", idxA, []uint32{0}), memwalIndex(t, cm{shardA: 10, shardB: 10}, nil, "id_idx")),
			head: version(6, []uint64{0, 7}, segment(t, "id_idx", idxA, []uint32{0}), memwalIndex(t, cm{shardA: 10, shardB: 10}, map[string]cm{"id_idx": {shardA: 8, shardB: 2}}, "id_idx")),
			txn:  appendTxn(5, 1),
			want: cm{shardA: 8, shardB: 2},
		},
		{
			name: "a bitmap narrowed in place under the old uuid drops the old position",
			read: version(5, []uint64{0, 7}, segment(t, "id_idx", idxA, []uint32{0, 1}), memwalIndex(t, cm{shardA: 10}, nil, "id_idx")),
			head: version(6, []uint64{0, 7}, segment(t, "id_idx", idxA, []uint32{0, 1}), memwalIndex(t, cm{shardA: 10}, map[string]cm{"id_idx": {shardA: 8}}, "id_idx")),
			txn: &pb.Transaction{ReadVersion: 5, Uuid: "33333333-3333-4333-8333-333333333333", Operation: &pb.Transaction_CreateIndex_{CreateIndex: &pb.Transaction_CreateIndex{
				RemovedIndices: []*pb.IndexMetadata{segment(t, "id_idx", idxA, []uint32{0, 1})},
				NewIndices:     []*pb.IndexMetadata{segment(t, "id_idx", "00000000-0000-4000-8000-000000000002", []uint32{0})}}}},
			want: cm{shardA: 0},
		},
		{
			name: "a rewrite that remaps the segment inline keeps the head's position",
			read: version(4, []uint64{0, 1, 7}, segment(t, "id_idx", idxA, []uint32{0, 1}), memwalIndex(t, cm{shardA: 10}, nil, "id_idx")),
			head: version(4, []uint64{0, 1, 7}, segment(t, "id_idx", idxA, []uint32{0, 1}), memwalIndex(t, cm{shardA: 10}, map[string]cm{"id_idx": {shardA: 8}}, "id_idx")),
			txn:  inlineRewrite(t, idxA, "00000000-0000-4000-8000-000000000002", group([]uint64{0, 1}, 20)),
			want: cm{shardA: 8},
		},
		{
			name: "an inline-remap rewrite of indexed fragments keeps the credit",
			read: version(5, []uint64{0, 1, 2}, segment(t, "id_idx", idxA, []uint32{0, 1, 2}), memwalIndex(t, cm{shardA: 4}, map[string]cm{"id_idx": {shardA: 4}}, "id_idx")),
			head: version(5, []uint64{0, 1, 2}, segment(t, "id_idx", idxA, []uint32{0, 1, 2}), memwalIndex(t, cm{shardA: 4}, map[string]cm{"id_idx": {shardA: 4}}, "id_idx")),
			txn:  inlineRewriteInto(t, 5, []uint64{1, 2}, 7),
			want: cm{shardA: 4},
		},
		{
			// Not proven (fragment 2 is not indexed), but the remapped
			// segment holds the rows its old one held: the head's position
			// is carried forward, and nothing more is credited.
			name: "an inline-remap rewrite leaving an unindexed fragment carries the head's position, credits nothing",
			read: version(5, []uint64{0, 1, 2}, segment(t, "id_idx", idxA, []uint32{0, 1}), memwalIndex(t, cm{shardA: 6}, map[string]cm{"id_idx": {shardA: 4}}, "id_idx")),
			head: version(5, []uint64{0, 1, 2}, segment(t, "id_idx", idxA, []uint32{0, 1}), memwalIndex(t, cm{shardA: 6}, map[string]cm{"id_idx": {shardA: 4}}, "id_idx")),
			txn:  inlineRewriteInto(t, 5, []uint64{0, 1}, 7),
			want: cm{shardA: 4},
		},
		{
			name: "an inline-remap rewrite leaving an unindexed fragment earns no credit",
			read: version(5, []uint64{0, 1, 2}, segment(t, "id_idx", idxA, []uint32{0, 1}), memwalIndex(t, cm{shardA: 6}, map[string]cm{"id_idx": {shardA: 0}}, "id_idx")),
			head: version(5, []uint64{0, 1, 2}, segment(t, "id_idx", idxA, []uint32{0, 1}), memwalIndex(t, cm{shardA: 6}, map[string]cm{"id_idx": {shardA: 0}}, "id_idx")),
			txn:  inlineRewriteInto(t, 5, []uint64{0, 1}, 7),
			want: cm{shardA: 0},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := BuildManifest(tc.head, tc.txn, tc.read, t0)
			if err != nil {
				t.Fatal(err)
			}
			cu := catchupOf(t, got)["id_idx"]
			for s, g := range tc.want {
				if cu[s] != g {
					t.Errorf("catch-up[%s] = %d, want %d (all: %v)", s, cu[s], g, cu)
				}
				if _, ok := cu[s]; !ok {
					t.Errorf("no explicit entry for shard %s (absent reads as not caught up, but must be written)", s)
				}
			}
			// The same result on every attempt.
			again, err := BuildManifest(tc.head, tc.txn, tc.read, t0)
			if err != nil {
				t.Fatal(err)
			}
			a, _ := meta.EncodeManifestFile(got)
			b, _ := meta.EncodeManifestFile(again)
			if !bytes.Equal(a, b) {
				t.Error("two builds from the same inputs differ")
			}
		})
	}
}

// TestCatchupNoChangeKeepsUUID: a commit that changes no position leaves the
// MemWAL index as it was (readers cache it by uuid).
func TestCatchupNoChangeKeepsUUID(t *testing.T) {
	mw := memwalIndex(t, map[string]uint64{shardA: 2}, map[string]map[string]uint64{"id_idx": {shardA: 2}}, "id_idx")
	read := version(5, []uint64{0}, segment(t, "id_idx", idxA, []uint32{0}), mw)
	head := version(6, []uint64{0, 1}, segment(t, "id_idx", idxA, []uint32{0}), mw)
	got, err := BuildManifest(head, appendTxn(5, 1), read, t0)
	if err != nil {
		t.Fatal(err)
	}
	if meta.UUIDString(memwal.Index(got.Indices).GetUuid()) != meta.UUIDString(mw.GetUuid()) {
		t.Error("MemWAL uuid changed though no position did")
	}
	// A merge changes it: a new uuid.
	got, err = BuildManifest(head, mergeTxn(5, shardA, 3), read, t0)
	if err != nil {
		t.Fatal(err)
	}
	if meta.UUIDString(memwal.Index(got.Indices).GetUuid()) == meta.UUIDString(mw.GetUuid()) {
		t.Error("MemWAL details changed under the old uuid")
	}
	if c := memwal.Compacted(mustDetails(t, got)); c[shardA] != 3 {
		t.Errorf("compacted = %v", c)
	}
}

func mustDetails(t *testing.T, f *meta.ManifestFile) *pb.MemWalIndexDetails {
	d, err := memwal.Details(memwal.Index(f.Indices))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestStaleMergeFailsWhole: a generation at or below the recorded one fails
// the commit, and no rows land.
func TestStaleMergeFailsWhole(t *testing.T) {
	mw := memwalIndex(t, map[string]uint64{shardA: 3}, nil, "id_idx")
	head := version(6, []uint64{0}, segment(t, "id_idx", idxA, []uint32{0}), mw)
	txn := mergeTxn(6, shardA, 3)
	txn.GetUpdate().NewFragments = []*pb.DataFragment{{PhysicalRows: 4}}
	if _, err := BuildManifest(head, txn, head, t0); err == nil {
		t.Fatal("merging generation 3 again committed")
	}
}

// TestDroppedIndexLosesItsEntry: entries of indexes that no longer exist go.
func TestDroppedIndexLosesItsEntry(t *testing.T) {
	mw := memwalIndex(t, map[string]uint64{shardA: 2}, map[string]map[string]uint64{"id_idx": {shardA: 2}}, "id_idx")
	seg := segment(t, "id_idx", idxA, []uint32{0})
	head := version(6, []uint64{0}, seg, mw)
	drop := &pb.Transaction{ReadVersion: 6, Uuid: "44444444-4444-4444-8444-444444444444", Operation: &pb.Transaction_CreateIndex_{CreateIndex: &pb.Transaction_CreateIndex{RemovedIndices: []*pb.IndexMetadata{seg}}}}
	got, err := BuildManifest(head, drop, head, t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := catchupOf(t, got)["id_idx"]; ok {
		t.Error("a dropped index kept its catch-up entry")
	}
}

// inlineRewrite is a Rewrite of groups that remaps segment old as new.
func inlineRewrite(t *testing.T, old, new string, groups ...*pb.Transaction_Rewrite_RewriteGroup) *pb.Transaction {
	t.Helper()
	o, err := meta.ParseUUID(old)
	if err != nil {
		t.Fatal(err)
	}
	n, err := meta.ParseUUID(new)
	if err != nil {
		t.Fatal(err)
	}
	txn := rewriteTxn(groups...)
	txn.GetRewrite().RewrittenIndices = []*pb.Transaction_Rewrite_RewrittenIndex{{OldId: o, NewId: n}}
	return txn
}

// inlineRewriteInto compacts the old fragments into fragment newID and remaps
// id_idx's segment idxA onto it in the same commit.
func inlineRewriteInto(t *testing.T, read uint64, old []uint64, newID uint64) *pb.Transaction {
	txn := rewriteTxn(group(old, newID))
	txn.ReadVersion = read
	txn.GetRewrite().RewrittenIndices = []*pb.Transaction_Rewrite_RewrittenIndex{{OldId: uuidOf(t, idxA), NewId: uuidOf(t, "00000000-0000-4000-8000-000000000003")}}
	return txn
}

// TestCatchupMaintainAll: under Lance 13.1's maintain_all_indexes (empty
// list) every index is maintained, so a covering commit credits id_idx; a
// derivation that read only the list wrote no entry and left it lagging.
func TestCatchupMaintainAll(t *testing.T) {
	all := func(mw *pb.IndexMetadata) *pb.IndexMetadata {
		d, err := memwal.Details(mw)
		if err != nil {
			t.Fatal(err)
		}
		d.MaintainAllIndexes = proto.Bool(true)
		if mw.IndexDetails, err = memwal.EncodeDetails(d); err != nil {
			t.Fatal(err)
		}
		return mw
	}
	cm := map[string]uint64{shardA: 2}
	read := version(5, []uint64{0, 1}, segment(t, "id_idx", idxA, []uint32{0, 1}), all(memwalIndex(t, cm, nil)))
	head := version(6, []uint64{0, 1, 2}, segment(t, "id_idx", idxA, []uint32{0, 1}), all(memwalIndex(t, cm, nil)))
	got, err := BuildManifest(head, appendTxn(5, 1), read, t0)
	if err != nil {
		t.Fatal(err)
	}
	if cu, ok := catchupOf(t, got)["id_idx"]; !ok || cu[shardA] != 2 {
		t.Errorf("catch-up of id_idx = %v (present %v), want shard A at 2", cu, ok)
	}
}
