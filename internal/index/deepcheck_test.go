package index_test

import (
	"context"
	"strings"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/compact"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/ops"
	"github.com/compactord/compactord/internal/table"
)

// A healthy table passes the deep check, also after deletes and a
// deferred compaction (the addresses then resolve through the FRI).
func TestDeepCheckCleanTable(t *testing.T) {
	ctx := context.Background()
	tb := newTable(t, "mem://")
	for i := int64(0); i < 4; i++ {
		appendFragment(t, tb, i*10, 10)
	}
	mustCreate(t, tb, "by_id", "id", index.TypeBTree)
	mustCreate(t, tb, "by_cat", "cat", index.TypeBitmap)
	if _, _, err := tb.Delete(ctx, nil, ops.DeleteSpec{Keys: []table.Row{{int64(3), nil, nil}, {int64(15), nil, nil}}}); err != nil {
		t.Fatal(err)
	}
	c, err := compact.New(compact.Config{TargetRowsPerFragment: 100}, tb, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Run(ctx, nil); err != nil {
		t.Fatal(err)
	}
	m := head(t, tb)
	if table.FragReuse(m) == nil {
		t.Fatal("the compaction recorded no FRI version: the test no longer covers remapped addresses")
	}
	vs, err := index.DeepCheck(ctx, tb.Bucket, m)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) > 0 {
		t.Fatalf("violations on a healthy table: %v", vs)
	}
}

// A segment that claims a fragment it does not index, and a segment whose
// entries hold another column's values, are both reported.
func TestDeepCheckFindsMissingAndWrongEntries(t *testing.T) {
	ctx := context.Background()
	tb := newTable(t, "mem://")
	appendFragment(t, tb, 0, 10)
	appendFragment(t, tb, 10, 10)
	m := head(t, tb)
	// Indexes only the first fragment but claims both.
	seg, err := index.BuildSegment(ctx, tb.Bucket, m, index.Spec{Name: "by_id", Column: "id", Type: index.TypeBTree}, m.Fragments[:1], index.BuildConfig{})
	if err != nil {
		t.Fatal(err)
	}
	bm := roaring.New()
	bm.Add(m.Fragments[0].Id)
	bm.Add(m.Fragments[1].Id)
	if seg.FragmentBitmap, err = bm.MarshalBinary(); err != nil {
		t.Fatal(err)
	}
	// Built on cat, labelled as an index on val: every entry's key is a
	// category, not the row's val.
	bad, err := index.BuildSegment(ctx, tb.Bucket, m, index.Spec{Name: "by_val", Column: "cat", Type: index.TypeBitmap}, m.Fragments, index.BuildConfig{})
	if err != nil {
		t.Fatal(err)
	}
	bad.FieldIds = []int32{table.FieldByName(m.Schema, "val").Id}
	txn := tb.NewTxn(m.Version)
	txn.Operation = &pb.Transaction_CreateIndex{CreateIndex: &pb.CreateIndex{NewIndices: []*pb.IndexMetadata{seg, bad}}}
	if _, err := tb.CommitOrClean(ctx, txn, nil); err != nil {
		t.Fatal(err)
	}
	vs, err := index.DeepCheck(ctx, tb.Bucket, head(t, tb))
	if err != nil {
		t.Fatal(err)
	}
	var missing, wrong bool
	for _, v := range vs {
		missing = missing || strings.Contains(v.Object, "index by_id") && strings.Contains(v.Reason, "in no segment")
		wrong = wrong || strings.Contains(v.Object, "index by_val") && strings.Contains(v.Reason, "but the live row there holds")
	}
	if !missing || !wrong {
		t.Fatalf("want a missing-row and a wrong-key violation, got %v", vs)
	}
}
