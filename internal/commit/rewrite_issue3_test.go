package commit

import (
	"errors"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/RoaringBitmap/roaring/v2/roaring64"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/table"
)

// A Rewrite whose old fragment a committed Delete fully removed since the
// read builds once rebased (the new fragment carries the deletions) and is
// refused when it was not rebased: its rows would come back.
func TestBuildManifestRewriteOverFullyDeletedOldFragment(t *testing.T) {
	read := baseManifest() // fragments 0 and 1, 10 rows each
	head := baseManifest()
	head.Version = 4
	head.Fragments = head.Fragments[:1] // a Delete removed fragment 1
	surv := roaring64.New()
	surv.AddRange(0, 10)
	surv.AddRange(table.RowAddr(1, 0), table.RowAddr(1, 10))
	sb, _ := surv.MarshalBinary()
	rewrite := func(deleted uint64) *pb.Transaction {
		nf := &pb.Fragment{PhysicalRows: 20, DataFile: &pb.DataFile{Path: "data/new.parquet"}}
		if deleted > 0 {
			nf.DeletionFile = &pb.DeletionFile{Path: "_deletions/x.bin", NumDeleted: deleted}
		}
		g := &pb.RewriteGroup{OldFragments: []*pb.Fragment{frag(0, 10), frag(1, 10)}, NewFragments: []*pb.Fragment{nf}, SurvivingAddresses: sb}
		v := &pb.FragReuseVersion{ReadVersion: 3, Groups: []*pb.FragReuseGroup{{
			OldFragments: []*pb.FragDigest{{Id: 0, PhysicalRows: 10}, {Id: 1, PhysicalRows: 10}},
			NewFragments: []*pb.FragDigest{{PhysicalRows: 20}}, SurvivingAddresses: sb}}}
		return &pb.Transaction{ReadVersion: 3, Uuid: "rw", Operation: &pb.Transaction_Rewrite{Rewrite: &pb.Rewrite{
			Groups: []*pb.RewriteGroup{g}, Remap: &pb.Rewrite_FragReuseVersion{FragReuseVersion: v}}}}
	}
	if _, err := BuildManifest(head, rewrite(0), read); !errors.Is(err, ErrRetryable) {
		t.Fatalf("unrebased rewrite over a vanished fragment: %v", err)
	}
	// An index covering both old fragments makes the FRI version needed;
	// the vanished fragment is mapped by the group, never also removed.
	bm, _ := encodeIDs(0, 1)
	head.Indices = []*pb.IndexMetadata{{Name: "ix", Type: "btree", Uuid: "u", DatasetVersion: 2, FragmentBitmap: bm}}
	got, err := BuildManifest(head, rewrite(10), read)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Fragments) != 1 || got.Fragments[0].Id != 2 {
		t.Fatalf("fragments %v", got.Fragments)
	}
	vs := table.FragReuse(got).GetVersions()
	if len(vs) != 1 {
		t.Fatalf("FRI %v", vs)
	}
	rm := roaring.New()
	if err := rm.UnmarshalBinary(vs[0].RemovedFragments); err != nil || !rm.IsEmpty() {
		t.Fatalf("removed_fragments %v also names an old fragment", rm.ToArray())
	}
}

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

func encodeIDs(ids ...uint32) ([]byte, error) { return roaring.BitmapOf(ids...).ToBytes() }
