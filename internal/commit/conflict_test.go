package commit

import (
	"testing"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/table"
)

// An FRI trim must not commit over a segment added since its read, which
// may need a version the trim drops (the converse of the rule for index
// builds).
func TestClassifyTrimVersusNewSegment(t *testing.T) {
	trim := &pb.Transaction{Operation: &pb.Transaction_CreateIndex{CreateIndex: &pb.CreateIndex{NewIndices: []*pb.IndexMetadata{
		{Name: table.FragReuseIndexName, Type: table.FragReuseIndexName}}}}}
	build := &pb.Transaction{Operation: &pb.Transaction_CreateIndex{CreateIndex: &pb.CreateIndex{NewIndices: []*pb.IndexMetadata{
		{Name: "ix", Type: "btree", Uuid: "n"}}}}}
	if v := Classify(trim, build); v.Decision != Retryable {
		t.Fatalf("trim vs a new segment: %v", v.Decision)
	}
	if v := Classify(build, trim); v.Decision != Retryable {
		t.Fatalf("a new segment vs trim: %v", v.Decision)
	}
}

// Every precondition a transaction checked at its read version is part of
// its classification: the primary keys an append or merge inserts, and the
// names a CreateIndex creates.
func TestClassifyPreconditions(t *testing.T) {
	key := func(ks ...int64) *pb.KeySet {
		var enc [][]byte
		for _, k := range ks {
			enc = append(enc, table.AppendKey(nil, k))
		}
		return KeySetOf(enc...)
	}
	wide := func(lo, hi int64) *pb.KeySet { // a set too large to carry hashes
		ks := key(lo, hi)
		ks.Hashes = nil
		return ks
	}
	app := func(ks *pb.KeySet) *pb.Transaction {
		return &pb.Transaction{Operation: &pb.Transaction_Append{Append: &pb.Append{Keys: ks}}}
	}
	merge := func(shard string, ks *pb.KeySet) *pb.Transaction {
		return &pb.Transaction{Operation: &pb.Transaction_MergeSstables{MergeSstables: &pb.MergeSSTables{Shard: shard, ThroughGeneration: 3, Keys: ks}}}
	}
	seg := func(name string, created ...string) *pb.Transaction {
		return &pb.Transaction{Operation: &pb.Transaction_CreateIndex{CreateIndex: &pb.CreateIndex{
			NewIndices: []*pb.IndexMetadata{{Name: name, Type: "btree", Uuid: name + "-seg", FieldIds: []int32{1}}}, CreatedNames: created}}}
	}
	remap := &pb.Transaction{Operation: &pb.Transaction_Rewrite{Rewrite: &pb.Rewrite{Remap: &pb.Rewrite_RewrittenIndices{RewrittenIndices: &pb.RewrittenIndices{
		NewIndices: []*pb.IndexMetadata{{Name: "ix", Type: "btree", Uuid: "r"}}}}}}}
	for _, tc := range []struct {
		name         string
		ours, theirs *pb.Transaction
		want         Decision
	}{
		{"append vs append of a shared key", app(key(1, 2, 3)), app(key(3, 9)), Retryable},
		{"append vs append, disjoint ranges", app(key(1, 2, 3)), app(key(4, 9)), Compatible},
		{"append vs append, interleaved keys", app(key(1, 3, 5)), app(key(2, 4)), Compatible},
		{"append vs append, overlapping ranges without hashes", app(wide(1, 100)), app(key(50)), Retryable},
		{"append vs append without a key set", app(key(1)), app(nil), Compatible},
		{"append vs merge of a shared key", app(key(7)), merge("s0", key(5, 7)), Retryable},
		{"append vs merge of other keys", app(key(7)), merge("s0", key(5, 8)), Compatible},
		{"merge vs append of a shared key", merge("s0", key(5, 7)), app(key(7)), Retryable},
		{"merge vs merge of another shard, shared key", merge("s0", key(5, 7)), merge("s1", key(7)), Retryable},
		{"merge vs merge of another shard, other keys", merge("s0", key(5, 7)), merge("s1", key(6)), Compatible},
		{"merge with no keys vs append", merge("s0", key()), app(key(7)), Compatible},
		{"create vs create of one name", seg("ix", "ix"), seg("ix", "ix"), Retryable},
		{"create vs a segment of that name", seg("ix", "ix"), seg("ix"), Retryable},
		{"create vs a remapped segment of that name", seg("ix", "ix"), remap, Retryable},
		{"create vs create of another name", seg("ix", "ix"), seg("other", "other"), Compatible},
		{"catch-up vs catch-up of one index", seg("ix"), seg("ix"), Compatible},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Classify(tc.ours, tc.theirs); got.Decision != tc.want {
				t.Fatalf("got %v (%s), want %v", got.Decision, got.Reason, tc.want)
			}
		})
	}
}
