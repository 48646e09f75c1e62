package compact

import (
	"fmt"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/lance/deletion"
	"github.com/compactord/compactord/internal/lance/meta"
)

// TestRebaseMapsDeletes: a Delete that landed on the rewritten fragments
// after the read is carried through the group's row map: the k-th
// surviving old row is row k of the new fragments (in order), rows deleted
// before the read are not counted, and a fragment deleted whole deletes
// all its survivors and leaves the group.
func TestRebaseMapsDeletes(t *testing.T) {
	h := openHandle(t, t.TempDir())
	ctx := t.Context()
	// Old fragment 3 (10 rows, 1 and 2 deleted at the read) and 5 (6 rows):
	// 14 survivors into new fragments 20 (10 rows) and 21 (4 rows).
	f3 := &pb.DataFragment{Id: 3, PhysicalRows: 10}
	f5 := &pb.DataFragment{Id: 5, PhysicalRows: 6}
	surv3 := roaring.BitmapOf(0, 3, 4, 5, 6, 7, 8, 9)
	surv5 := roaring.New()
	surv5.AddRange(0, 6)
	out := &Output{Old: []*pb.DataFragment{f3, f5},
		New:       []*pb.DataFragment{{Id: 20, PhysicalRows: 10}, {Id: 21, PhysicalRows: 4}},
		Deleted:   map[uint64]*roaring.Bitmap{3: roaring.BitmapOf(1, 2), 5: roaring.New()},
		Survivors: map[uint64]*roaring.Bitmap{3: surv3, 5: surv5}}
	rb := newRebaser(h, []*Output{out})
	cur := &pb.Transaction{ReadVersion: 4, Uuid: "44444444-4444-4444-8444-444444444444", Operation: &pb.Transaction_Rewrite_{Rewrite: &pb.Transaction_Rewrite{
		Groups: []*pb.Transaction_Rewrite_RewriteGroup{{OldFragments: out.Old, NewFragments: out.New}}}}}

	// Theirs: rows 4 and 9 of fragment 3 (1 and 2 again), fragment 5 whole.
	df, key, data, err := deletion.Encode(3, roaring.BitmapOf(1, 2, 4, 9), 5)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Bucket.Put(ctx, key, data); err != nil {
		t.Fatal(err)
	}
	theirs := &pb.Transaction{ReadVersion: 5, Uuid: "t", Operation: &pb.Transaction_Delete_{Delete: &pb.Transaction_Delete{
		UpdatedFragments: []*pb.DataFragment{{Id: 3, PhysicalRows: 10, DeletionFile: df}}, DeletedFragmentIds: []uint64{5}}}}
	next, files, err := rb.rebase(ctx, cur, theirs, &meta.ManifestFile{Manifest: &pb.Manifest{Version: 6}})
	if err != nil || len(files) != 0 {
		t.Fatalf("rebase: %v, %v", files, err)
	}
	if next.GetUuid() == cur.GetUuid() {
		t.Error("the rebased transaction kept the uuid")
	}
	next, files, err = rb.prepare(ctx, next)
	if err != nil || len(files) != 2 {
		t.Fatalf("prepare: %v, %v", files, err)
	}
	g := next.GetRewrite().GetGroups()[0]
	if len(g.GetOldFragments()) != 1 || g.GetOldFragments()[0].GetId() != 3 {
		t.Errorf("old fragments %v, want 3 alone (5 is gone)", g.GetOldFragments())
	}
	want := map[uint64]string{20: "[2 7 8 9]", 21: "[0 1 2 3]"}
	for _, nf := range g.GetNewFragments() {
		dv, err := deletion.Read(ctx, h.Bucket, nf.GetId(), nf.GetDeletionFile(), nf.GetPhysicalRows())
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(dv.ToArray()); got != want[nf.GetId()] {
			t.Errorf("fragment %d deletes %s, want %s", nf.GetId(), got, want[nf.GetId()])
		}
	}
	// Nothing new: prepare writes nothing.
	if again, files, err := rb.prepare(ctx, next); err != nil || len(files) != 0 || again != next {
		t.Errorf("second prepare: %v %v", files, err)
	}
	// A Delete on other fragments changes nothing.
	other := &pb.Transaction{Uuid: "o", Operation: &pb.Transaction_Delete_{Delete: &pb.Transaction_Delete{DeletedFragmentIds: []uint64{9}}}}
	if _, _, err := rb.rebase(ctx, next, other, nil); err != nil {
		t.Fatal(err)
	}
	if len(rb.dirty) != 0 {
		t.Errorf("a delete elsewhere dirtied %v", rb.dirty)
	}
}
