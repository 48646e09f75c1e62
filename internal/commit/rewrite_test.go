package commit

import (
	"fmt"
	"strings"
	"testing"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/meta"
)

func rwFrags(ids ...uint64) []*pb.DataFragment {
	var out []*pb.DataFragment
	for _, id := range ids {
		out = append(out, &pb.DataFragment{Id: id, PhysicalRows: 10})
	}
	return out
}

func rewriteTxn(groups ...*pb.Transaction_Rewrite_RewriteGroup) *pb.Transaction {
	return &pb.Transaction{ReadVersion: 4, Uuid: "33333333-3333-4333-8333-333333333333",
		Operation: &pb.Transaction_Rewrite_{Rewrite: &pb.Transaction_Rewrite{Groups: groups}}}
}

func group(old []uint64, new ...uint64) *pb.Transaction_Rewrite_RewriteGroup {
	return &pb.Transaction_Rewrite_RewriteGroup{OldFragments: rwFrags(old...), NewFragments: rwFrags(new...)}
}

func idsOf(m *pb.Manifest) string {
	var s []string
	for _, f := range m.GetFragments() {
		s = append(s, fmt.Sprint(f.GetId()))
	}
	return strings.Join(s, ",")
}

func bitmapOf(t *testing.T, ix *pb.IndexMetadata) string {
	t.Helper()
	bm, _, err := meta.FragmentBitmap(ix)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(bm.ToArray())
}

func TestBuildRewrite(t *testing.T) {
	cases := []struct {
		name   string
		frags  []uint64
		txn    *pb.Transaction
		want   string
		maxID  uint32
		errHas string
	}{
		{name: "contiguous groups splice in place, sorted by id", frags: []uint64{0, 1, 2, 3, 4}, txn: rewriteTxn(group([]uint64{1, 2}, 7), group([]uint64{3}, 8, 9)), want: "0,4,7,8,9", maxID: 9},
		{name: "non-contiguous old fragments", frags: []uint64{0, 1, 2}, txn: rewriteTxn(group([]uint64{0, 2}, 5)), want: "1,5", maxID: 5},
		{name: "id 0 takes the next id", frags: []uint64{3, 4}, txn: rewriteTxn(&pb.Transaction_Rewrite_RewriteGroup{OldFragments: rwFrags(3, 4), NewFragments: []*pb.DataFragment{{PhysicalRows: 20}}}), want: "5", maxID: 5},
		{name: "a group whose old fragments are gone appends its new ones", frags: []uint64{0, 1}, txn: rewriteTxn(group(nil, 6)), want: "0,1,6", maxID: 6},
		{name: "missing old fragment", frags: []uint64{0, 1}, txn: rewriteTxn(group([]uint64{2}, 6)), errHas: "fragment 2 to replace is not in version"},
		{name: "new id already used", frags: []uint64{0, 1}, txn: rewriteTxn(group([]uint64{0}, 1)), errHas: "new fragment id 1 is already"},
		{name: "empty group", frags: []uint64{0}, txn: rewriteTxn(group(nil)), errHas: "empty"},
		{name: "no groups", frags: []uint64{0}, txn: rewriteTxn(), errHas: "no groups"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			head := version(5, tc.frags)
			got, err := BuildManifest(head, tc.txn, head, t0)
			if tc.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("error %v, want one containing %q", err, tc.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ids := idsOf(got.Manifest); ids != tc.want {
				t.Errorf("fragments %s, want %s", ids, tc.want)
			}
			if got.Manifest.GetMaxFragmentId() != tc.maxID {
				t.Errorf("max fragment id %d, want %d", got.Manifest.GetMaxFragmentId(), tc.maxID)
			}
		})
	}
}

func TestBuildRewriteIndices(t *testing.T) {
	a := segment(t, "a", "00000000-0000-4000-8000-000000000001", []uint32{0, 1, 2})
	b := segment(t, "b", "00000000-0000-4000-8000-000000000002", []uint32{0})
	head := version(5, []uint64{0, 1, 2, 3}, a, b)
	newA := uuidOf(t, "00000000-0000-4000-8000-0000000000a1")
	txn := rewriteTxn(group([]uint64{1, 2}, 9))
	txn.GetRewrite().RewrittenIndices = []*pb.Transaction_Rewrite_RewrittenIndex{{OldId: a.GetUuid(), NewId: newA}}
	fri := &pb.IndexMetadata{Uuid: uuidOf(t, "00000000-0000-4000-8000-0000000000f1"), Name: meta.FragReuseIndexName}
	oldFRI := &pb.IndexMetadata{Uuid: uuidOf(t, "00000000-0000-4000-8000-0000000000f0"), Name: meta.FragReuseIndexName}
	head.Indices = append(head.Indices, oldFRI)
	got, err := BuildManifestExtra(head, txn, head, t0, Extra{FragReuse: fri})
	if err != nil {
		t.Fatal(err)
	}
	segs := meta.FindIndex(got.Indices, "a")
	if len(segs) != 1 || meta.UUIDString(segs[0].GetUuid()) != meta.UUIDString(newA) || bitmapOf(t, segs[0]) != "[0 9]" {
		t.Fatalf("index a: %v", segs)
	}
	if segs := meta.FindIndex(got.Indices, "b"); len(segs) != 1 || bitmapOf(t, segs[0]) != "[0]" {
		t.Fatalf("index b changed: %v", segs)
	}
	if segs := meta.FindIndex(got.Indices, meta.FragReuseIndexName); len(segs) != 1 || meta.UUIDString(segs[0].GetUuid()) != meta.UUIDString(fri.GetUuid()) {
		t.Fatalf("FRI entries %v, want the new one only", segs)
	}

	// A group the index covers only partly cannot be remapped.
	split := rewriteTxn(group([]uint64{2, 3}, 9))
	split.GetRewrite().RewrittenIndices = []*pb.Transaction_Rewrite_RewrittenIndex{{OldId: a.GetUuid(), NewId: newA}}
	if _, err := BuildManifest(head, split, head, t0); err == nil || !strings.Contains(err.Error(), "splits indexed and unindexed") {
		t.Fatalf("split group: %v", err)
	}
	// The FRI entry comes with a Rewrite only.
	if _, err := BuildManifestExtra(head, appendTxn(5, 1), head, t0, Extra{FragReuse: fri}); err == nil {
		t.Fatal("an FRI entry on an append: no error")
	}
}

func TestClassifyRewrite(t *testing.T) {
	ours := rewriteTxn(group([]uint64{1, 2}, 9))
	withIdx := rewriteTxn(group([]uint64{1, 2}, 9))
	seg := segment(t, "a", "00000000-0000-4000-8000-000000000001", []uint32{1, 2})
	withIdx.GetRewrite().RewrittenIndices = []*pb.Transaction_Rewrite_RewrittenIndex{{OldId: seg.GetUuid(), NewId: seg.GetUuid()}}
	cases := []struct {
		name   string
		ours   *pb.Transaction
		theirs any
		want   Decision
	}{
		{"append", ours, &pb.Transaction_Append{Fragments: rwFrags(5)}, Compatible},
		{"delete elsewhere", ours, &pb.Transaction_Delete{UpdatedFragments: rwFrags(3)}, Compatible},
		{"delete in a rewritten fragment is rebased", ours, &pb.Transaction_Delete{UpdatedFragments: rwFrags(2)}, Rebase},
		{"a rewritten fragment deleted whole is rebased", ours, &pb.Transaction_Delete{DeletedFragmentIds: []uint64{1}}, Rebase},
		{"update moving rows of a rewritten fragment", ours, &pb.Transaction_Update{UpdatedFragments: rwFrags(1), NewFragments: rwFrags(0)}, Retryable},
		{"overlapping rewrite", ours, &pb.Transaction_Rewrite{Groups: []*pb.Transaction_Rewrite_RewriteGroup{group([]uint64{2, 3}, 10)}}, Retryable},
		{"disjoint rewrite", ours, &pb.Transaction_Rewrite{Groups: []*pb.Transaction_Rewrite_RewriteGroup{group([]uint64{3}, 10)}}, Compatible},
		{"new segment over a rewritten fragment", ours, &pb.Transaction_CreateIndex{NewIndices: []*pb.IndexMetadata{segment(t, "b", "00000000-0000-4000-8000-000000000003", []uint32{0, 1})}}, Retryable},
		{"new segment elsewhere", ours, &pb.Transaction_CreateIndex{NewIndices: []*pb.IndexMetadata{segment(t, "b", "00000000-0000-4000-8000-000000000003", []uint32{3})}}, Compatible},
		{"FRI changed", ours, &pb.Transaction_CreateIndex{NewIndices: []*pb.IndexMetadata{{Name: meta.FragReuseIndexName, Uuid: uuidOf(t, "00000000-0000-4000-8000-0000000000f1")}}}, Retryable},
		{"remapped segment replaced", withIdx, &pb.Transaction_CreateIndex{RemovedIndices: []*pb.IndexMetadata{seg}}, Retryable},
		{"overwrite", ours, &pb.Transaction_Overwrite{}, Retryable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if v := Classify(tc.ours, txnOf(tc.theirs)); v.Decision != tc.want {
				t.Errorf("%v (%s), want %v", v.Decision, v.Reason, tc.want)
			}
		})
	}
}
