package index_test

import (
	"context"
	"strings"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/ops"
	"github.com/compactord/compactord/internal/table"
)

func TestDeepCheck(t *testing.T) {
	tb := newTable(t, "mem://")
	ctx := context.Background()
	appendFragment(t, tb, 0, 50)
	appendFragment(t, tb, 50, 50)
	mustCreate(t, tb, "byid", "id", "btree")
	mustCreate(t, tb, "bycat", "cat", "bitmap")
	if _, _, err := tb.Delete(ctx, nil, opsDeleteKeys(3, 60)); err != nil {
		t.Fatal(err)
	}
	m := head(t, tb)
	if ps, err := index.DeepCheck(ctx, tb.Bucket, m); err != nil || len(ps) != 0 {
		t.Fatalf("healthy table: %v %v", ps, err)
	}
	// An index whose segment claims another column: every live entry
	// holds the wrong key.
	bad := proto.Clone(m).(*pb.Manifest)
	for _, ix := range bad.Indices {
		if ix.Name == "byid" {
			ix.FieldIds = []int32{table.FieldByName(m.Schema, "cat").Id}
		}
	}
	ps, err := index.DeepCheck(ctx, tb.Bucket, bad)
	if err != nil || len(ps) == 0 || !strings.Contains(ps[0].Reason, "key") {
		t.Fatalf("mismatched keys not found: %v %v", ps, err)
	}
	// A segment claiming a fragment it never indexed: that fragment's rows
	// are missing from the index.
	appendFragment(t, tb, 100, 10)
	m = head(t, tb)
	bad = proto.Clone(m).(*pb.Manifest)
	for _, ix := range bad.Indices {
		if ix.Name == "byid" {
			ix.FragmentBitmap, _ = roaring.BitmapOf(0, 1, 2).ToBytes()
		}
	}
	ps, err = index.DeepCheck(ctx, tb.Bucket, bad)
	if err != nil || len(ps) != 10 || !strings.Contains(ps[0].Reason, "missing from the index") {
		t.Fatalf("missing rows not found: %v %v", ps, err)
	}
}

func opsDeleteKeys(keys ...int64) ops.DeleteSpec {
	var s ops.DeleteSpec
	for _, k := range keys {
		s.Keys = append(s.Keys, table.Row{k, nil, nil})
	}
	return s
}
