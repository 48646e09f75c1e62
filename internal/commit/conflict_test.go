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

// A CreateIndex that creates a logical index checked at its read version
// that the name was free: a segment of that name added since conflicts.
func TestClassifyPreconditions(t *testing.T) {
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
