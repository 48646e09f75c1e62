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
