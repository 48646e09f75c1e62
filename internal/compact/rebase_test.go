package compact

import (
	"errors"
	"fmt"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/format/deletion"
	"github.com/compactord/compactord/internal/meta"
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
	v6 := &meta.ManifestFile{Manifest: &pb.Manifest{Version: 6, Fragments: []*pb.DataFragment{{Id: 3, PhysicalRows: 10, DeletionFile: df}}}}
	next, files, err := rb.rebase(ctx, cur, theirs, v6)
	if err != nil || len(files) != 0 {
		t.Fatalf("rebase: %v, %v", files, err)
	}
	if next.GetUuid() == cur.GetUuid() {
		t.Error("the rebased transaction kept the uuid")
	}
	g := next.GetRewrite().GetGroups()[0]
	if len(g.GetOldFragments()) != 1 || g.GetOldFragments()[0].GetId() != 3 {
		t.Errorf("old fragments %v, want 3 alone (5 is gone)", g.GetOldFragments())
	}
	if got := fmt.Sprint(rb.deleted[20].ToArray(), rb.deleted[21].ToArray()); got != "[2 7 8 9] [0 1 2 3]" {
		t.Errorf("new fragments delete %s, want [2 7 8 9] [0 1 2 3]", got)
	}
	// Every row of new fragment 21 is deleted: Lance keeps no fully
	// deleted fragment, so the compaction re-plans instead of landing it.
	var ce *commit.ConflictError
	if _, _, err := rb.prepare(ctx, next); !errors.As(err, &ce) || !errors.Is(err, commit.ErrRetryable) {
		t.Fatalf("prepare with a fully deleted new fragment: %v, want a retryable conflict", err)
	}
	// Without that, prepare writes the deletion file of each changed new
	// fragment once.
	delete(rb.deleted, 21)
	delete(rb.dirty, 21)
	rb.dirty[20] = true
	next, files, err = rb.prepare(ctx, next)
	if err != nil || len(files) != 1 {
		t.Fatalf("prepare: %v, %v", files, err)
	}
	for _, nf := range next.GetRewrite().GetGroups()[0].GetNewFragments() {
		if nf.GetId() != 20 {
			continue
		}
		dv, err := deletion.Read(ctx, h.Bucket, nf.GetId(), nf.GetDeletionFile(), nf.GetPhysicalRows())
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(dv.ToArray()); got != "[2 7 8 9]" {
			t.Errorf("fragment 20's deletion file holds %s, want [2 7 8 9]", got)
		}
	}
	// Nothing new: prepare writes nothing.
	if again, files, err := rb.prepare(ctx, next); err != nil || len(files) != 0 || again != next {
		t.Errorf("second prepare: %v %v", files, err)
	}
	// A Delete on other fragments changes nothing.
	other := &pb.Transaction{Uuid: "o", Operation: &pb.Transaction_Delete_{Delete: &pb.Transaction_Delete{DeletedFragmentIds: []uint64{9}}}}
	if _, _, err := rb.rebase(ctx, next, other, v6); err != nil {
		t.Fatal(err)
	}
	if len(rb.dirty) != 0 {
		t.Errorf("a delete elsewhere dirtied %v", rb.dirty)
	}

	// LanceDB rebases a delete over a concurrent one by merging their
	// deletion vectors: its transaction can list fragment 5 as updated
	// while the version it made no longer holds it (every row deleted).
	// The version decides: 5 leaves the group, all its survivors deleted.
	rb2 := newRebaser(h, []*Output{out})
	merged := &pb.Transaction{ReadVersion: 5, Uuid: "m", Operation: &pb.Transaction_Delete_{Delete: &pb.Transaction_Delete{
		UpdatedFragments: []*pb.DataFragment{{Id: 5, PhysicalRows: 6}}}}}
	next2, _, err := rb2.rebase(ctx, cur, merged, &meta.ManifestFile{Manifest: &pb.Manifest{Version: 6, Fragments: []*pb.DataFragment{f3}}})
	if err != nil {
		t.Fatal(err)
	}
	if g := next2.GetRewrite().GetGroups()[0]; len(g.GetOldFragments()) != 1 || g.GetOldFragments()[0].GetId() != 3 {
		t.Errorf("after a merged delete: old fragments %v, want 3 alone", g.GetOldFragments())
	}
	if got := fmt.Sprint(rb2.deleted[20].ToArray(), rb2.deleted[21].ToArray()); got != "[8 9] [0 1 2 3]" {
		t.Errorf("after a merged delete: new fragments delete %s, want [8 9] [0 1 2 3]", got)
	}
}
