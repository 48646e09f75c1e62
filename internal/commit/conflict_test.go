package commit

import (
	"testing"

	pb "github.com/compactord/compactord/gen/lancepb"
)

func txnOf(op any) *pb.Transaction {
	t := &pb.Transaction{ReadVersion: 1, Uuid: "theirs"}
	switch o := op.(type) {
	case *pb.Transaction_Append:
		t.Operation = &pb.Transaction_Append_{Append: o}
	case *pb.Transaction_Delete:
		t.Operation = &pb.Transaction_Delete_{Delete: o}
	case *pb.Transaction_Overwrite:
		t.Operation = &pb.Transaction_Overwrite_{Overwrite: o}
	case *pb.Transaction_CreateIndex:
		t.Operation = &pb.Transaction_CreateIndex_{CreateIndex: o}
	case *pb.Transaction_Rewrite:
		t.Operation = &pb.Transaction_Rewrite_{Rewrite: o}
	case *pb.Transaction_Merge:
		t.Operation = &pb.Transaction_Merge_{Merge: o}
	case *pb.Transaction_Restore:
		t.Operation = &pb.Transaction_Restore_{Restore: o}
	case *pb.Transaction_ReserveFragments:
		t.Operation = &pb.Transaction_ReserveFragments_{ReserveFragments: o}
	case *pb.Transaction_Update:
		t.Operation = &pb.Transaction_Update_{Update: o}
	case *pb.Transaction_Project:
		t.Operation = &pb.Transaction_Project_{Project: o}
	case *pb.Transaction_UpdateConfig:
		t.Operation = &pb.Transaction_UpdateConfig_{UpdateConfig: o}
	case *pb.Transaction_DataReplacement:
		t.Operation = &pb.Transaction_DataReplacement_{DataReplacement: o}
	case *pb.Transaction_UpdateMemWalState:
		t.Operation = &pb.Transaction_UpdateMemWalState_{UpdateMemWalState: o}
	case *pb.Transaction_Clone:
		t.Operation = &pb.Transaction_Clone_{Clone: o}
	case *pb.Transaction_UpdateBases:
		t.Operation = &pb.Transaction_UpdateBases_{UpdateBases: o}
	case *pb.Transaction_DataOverlay:
		t.Operation = &pb.Transaction_DataOverlay_{DataOverlay: o}
	case nil:
		return nil
	default:
		panic("unknown op")
	}
	return t
}

func frags(ids ...uint64) []*pb.DataFragment {
	var out []*pb.DataFragment
	for _, id := range ids {
		out = append(out, &pb.DataFragment{Id: id})
	}
	return out
}

func shard(t *testing.T, s string, g uint64) []*pb.CompactedSsTable {
	return []*pb.CompactedSsTable{{ShardId: uuidOf(t, s), Generation: g}}
}

// TestClassify: ours × every operation kind a LanceDB writer may commit.
func TestClassify(t *testing.T) {
	delFrag2 := txnOf(&pb.Transaction_Delete{DeletedFragmentIds: []uint64{2}})
	dropIdx := txnOf(&pb.Transaction_CreateIndex{RemovedIndices: []*pb.IndexMetadata{segment(t, "cat_idx", idxA, []uint32{0, 1, 2})}})
	newIdx := txnOf(&pb.Transaction_CreateIndex{NewIndices: []*pb.IndexMetadata{segment(t, "new_idx", idxA, []uint32{0, 1, 2})}})
	merge := txnOf(&pb.Transaction_Update{CompactedSstables: shard(t, shardA, 3), NewFragments: frags(9),
		InsertedRows: &pb.Transaction_KeyExistenceFilter{Data: &pb.Transaction_KeyExistenceFilter_Exact{Exact: &pb.Transaction_ExactKeySetFilter{KeyHashes: []uint64{1, 2}}}}})
	appendT := txnOf(&pb.Transaction_Append{Fragments: frags(0)})

	cases := []struct {
		name   string
		ours   *pb.Transaction
		theirs *pb.Transaction
		want   Decision
	}{
		{"no transaction recorded", delFrag2, nil, Retryable},
		{"delete vs append", delFrag2, appendT, Compatible},
		{"delete vs delete of other rows", delFrag2, txnOf(&pb.Transaction_Delete{UpdatedFragments: frags(1)}), Compatible},
		{"delete vs delete on the same fragment", delFrag2, txnOf(&pb.Transaction_Delete{UpdatedFragments: frags(2)}), Rebase},
		{"delete vs delete removing the same fragment", delFrag2, txnOf(&pb.Transaction_Delete{DeletedFragmentIds: []uint64{2}}), Rebase},
		{"delete vs overwrite", delFrag2, txnOf(&pb.Transaction_Overwrite{}), Retryable},
		{"delete vs restore", delFrag2, txnOf(&pb.Transaction_Restore{Version: 1}), Retryable},
		{"delete vs clone", delFrag2, txnOf(&pb.Transaction_Clone{}), Retryable},
		{"delete vs create index", delFrag2, newIdx, Compatible},
		{"delete vs rewrite of its fragment", delFrag2, txnOf(&pb.Transaction_Rewrite{Groups: []*pb.Transaction_Rewrite_RewriteGroup{{OldFragments: frags(2, 3), NewFragments: frags(7)}}}), Retryable},
		{"delete vs rewrite elsewhere", delFrag2, txnOf(&pb.Transaction_Rewrite{Groups: []*pb.Transaction_Rewrite_RewriteGroup{{OldFragments: frags(4, 5), NewFragments: frags(7)}}}), Compatible},
		{"delete vs merge-insert that moved its rows", delFrag2, txnOf(&pb.Transaction_Update{UpdatedFragments: frags(2), NewFragments: frags(8)}), Retryable},
		{"delete vs merge-insert elsewhere", delFrag2, txnOf(&pb.Transaction_Update{UpdatedFragments: frags(1), NewFragments: frags(8)}), Compatible},
		{"delete vs add columns (merge)", delFrag2, txnOf(&pb.Transaction_Merge{Fragments: frags(2)}), Rebase},
		{"delete vs project", delFrag2, txnOf(&pb.Transaction_Project{}), Compatible},
		{"delete vs reserve", delFrag2, txnOf(&pb.Transaction_ReserveFragments{NumFragments: 2}), Compatible},
		{"delete vs update config", delFrag2, txnOf(&pb.Transaction_UpdateConfig{}), Compatible},
		{"delete vs data replacement on it", delFrag2, txnOf(&pb.Transaction_DataReplacement{Replacements: []*pb.Transaction_DataReplacementGroup{{FragmentId: 2}}}), Rebase},
		{"delete vs MemWAL state", delFrag2, txnOf(&pb.Transaction_UpdateMemWalState{CompactedSstables: shard(t, shardA, 1)}), Compatible},
		{"delete vs update bases", delFrag2, txnOf(&pb.Transaction_UpdateBases{}), Compatible},
		{"delete vs overlay on it", delFrag2, txnOf(&pb.Transaction_DataOverlay{Groups: []*pb.Transaction_DataOverlayGroup{{FragmentId: 2}}}), Rebase},

		{"drop index vs create of the same name", dropIdx, txnOf(&pb.Transaction_CreateIndex{NewIndices: []*pb.IndexMetadata{segment(t, "cat_idx", "00000000-0000-4000-8000-000000000009", []uint32{3})}}), Retryable},
		{"drop index vs another index", dropIdx, newIdx, Compatible},
		{"drop index vs rewrite remapping it", dropIdx, txnOf(&pb.Transaction_Rewrite{Groups: []*pb.Transaction_Rewrite_RewriteGroup{{OldFragments: frags(1), NewFragments: frags(7)}},
			RewrittenIndices: []*pb.Transaction_Rewrite_RewrittenIndex{{OldId: uuidOf(t, idxA), NewId: uuidOf(t, "00000000-0000-4000-8000-000000000009")}}}), Retryable},
		{"drop index vs append", dropIdx, appendT, Compatible},
		{"drop index vs a MemWAL configuration change", dropIdx, txnOf(&pb.Transaction_CreateIndex{NewIndices: []*pb.IndexMetadata{{Name: "__lance_mem_wal"}}}), Retryable},
		{"drop index vs a MemWAL merge", dropIdx, txnOf(&pb.Transaction_Update{CompactedSstables: shard(t, shardA, 3)}), Compatible},
		{"drop index vs project", dropIdx, txnOf(&pb.Transaction_Project{}), Retryable},
		{"create index vs create of the same name", newIdx, newIdx, Retryable},

		{"merge vs a merge of the same generation", merge, txnOf(&pb.Transaction_Update{CompactedSstables: shard(t, shardA, 3)}), Incompatible},
		{"merge vs a merge of a later generation", merge, txnOf(&pb.Transaction_Update{CompactedSstables: shard(t, shardA, 4)}), Incompatible},
		{"merge vs a merge of an earlier generation", merge, txnOf(&pb.Transaction_Update{CompactedSstables: shard(t, shardA, 2)}), Retryable},
		{"merge vs UpdateMemWalState", merge, txnOf(&pb.Transaction_UpdateMemWalState{CompactedSstables: shard(t, shardA, 3)}), Incompatible},
		{"merge vs another shard", merge, txnOf(&pb.Transaction_Update{CompactedSstables: shard(t, shardB, 3)}), Compatible},
		{"merge vs a merge-insert without a key filter", merge, txnOf(&pb.Transaction_Update{NewFragments: frags(8)}), Retryable},
		{"merge vs a merge-insert of other keys", merge, txnOf(&pb.Transaction_Update{NewFragments: frags(8),
			InsertedRows: &pb.Transaction_KeyExistenceFilter{Data: &pb.Transaction_KeyExistenceFilter_Exact{Exact: &pb.Transaction_ExactKeySetFilter{KeyHashes: []uint64{5}}}}}), Compatible},
		{"merge vs a merge-insert of the same key", merge, txnOf(&pb.Transaction_Update{NewFragments: frags(8),
			InsertedRows: &pb.Transaction_KeyExistenceFilter{Data: &pb.Transaction_KeyExistenceFilter_Exact{Exact: &pb.Transaction_ExactKeySetFilter{KeyHashes: []uint64{2}}}}}), Retryable},
		{"merge vs a bloom filter", merge, txnOf(&pb.Transaction_Update{NewFragments: frags(8),
			InsertedRows: &pb.Transaction_KeyExistenceFilter{Data: &pb.Transaction_KeyExistenceFilter_Bloom{Bloom: &pb.Transaction_BloomFilter{}}}}), Retryable},
		// An append may land a key the merge also inserts (a key deleted
		// and added back while its generation waited): the merge plans
		// again so that its rows supersede the appended ones.
		{"merge vs append", merge, appendT, Retryable},
		{"merge vs an empty append", merge, txnOf(&pb.Transaction_Append{}), Compatible},
		{"merge-insert (no MemWAL) vs append", txnOf(&pb.Transaction_Update{NewFragments: frags(9)}), appendT, Compatible},
		{"unfiltered merge vs a merge-insert that inserted", txnOf(&pb.Transaction_Update{CompactedSstables: shard(t, shardA, 3), NewFragments: frags(9)}),
			txnOf(&pb.Transaction_Update{NewFragments: frags(8), InsertedRows: &pb.Transaction_KeyExistenceFilter{Data: &pb.Transaction_KeyExistenceFilter_Exact{Exact: &pb.Transaction_ExactKeySetFilter{KeyHashes: []uint64{5}}}}}), Retryable},
		{"unfiltered merge vs an update that inserted nothing", txnOf(&pb.Transaction_Update{CompactedSstables: shard(t, shardA, 3), NewFragments: frags(9)}),
			txnOf(&pb.Transaction_Update{UpdatedFragments: frags(4)}), Compatible},
		{"merge vs MemWAL config change", merge, txnOf(&pb.Transaction_CreateIndex{NewIndices: []*pb.IndexMetadata{{Name: "__lance_mem_wal"}}}), Compatible},

		{"append vs anything but a schema change", appendT, delFrag2, Compatible},
		// Lance's primary key is unenforced on plain appends: two appends of
		// one key both land (a merge-insert's key filter is what conflicts).
		{"append vs append of the same keys", appendT, appendT, Compatible},
		{"append vs a merge-insert of the same keys", appendT, merge, Compatible},
		{"append vs project", appendT, txnOf(&pb.Transaction_Project{}), Retryable},
		{"append vs overwrite", appendT, txnOf(&pb.Transaction_Overwrite{}), Retryable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := Classify(tc.ours, tc.theirs)
			if v.Decision != tc.want {
				t.Errorf("Classify(%s, %s) = %s (%s), want %s", OpName(tc.ours), OpName(tc.theirs), v.Decision, v.Reason, tc.want)
			}
			if v.Decision != Compatible && v.Reason == "" {
				t.Error("a non-compatible verdict without a reason")
			}
		})
	}
}
