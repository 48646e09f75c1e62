package commit

import (
	"errors"
	"strings"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/table"
)

func frag(id uint32, rows uint64) *pb.Fragment {
	return &pb.Fragment{Id: id, PhysicalRows: rows, DataFile: &pb.DataFile{Path: "data/f.parquet"}}
}

func baseManifest() *pb.Manifest {
	s, _ := table.ParseSchema("id:int64,v:string", []string{"id"})
	return &pb.Manifest{Version: 3, Schema: s, Fragments: []*pb.Fragment{frag(0, 10), frag(1, 10)}, MaxFragmentId: proto.Uint32(1)}
}

func TestBuildManifestAppendAssignsIDsAboveMax(t *testing.T) {
	head := baseManifest()
	head.Fragments = head.Fragments[:1] // fragment 1 was deleted: ids never reused
	before := proto.Clone(head)
	txn := &pb.Transaction{ReadVersion: 2, Uuid: "u1", Operation: &pb.Transaction_Append{Append: &pb.Append{Fragments: []*pb.Fragment{frag(0, 5), frag(0, 6)}}}}
	got, err := BuildManifest(head, txn, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != 4 || got.ReadVersion != 2 || got.TransactionUuid != "u1" || got.TransactionPath != table.TransactionKey(2, "u1") {
		t.Fatalf("header: %v", got)
	}
	ids := []uint32{}
	for _, f := range got.Fragments {
		ids = append(ids, f.Id)
	}
	if want := []uint32{0, 2, 3}; !equalU32(ids, want) || got.GetMaxFragmentId() != 3 {
		t.Fatalf("ids %v max %d, want %v max 3", ids, got.GetMaxFragmentId(), want)
	}
	if !proto.Equal(head, before) {
		t.Fatal("BuildManifest modified head")
	}
	again, _ := BuildManifest(head, txn, nil)
	if !proto.Equal(got, again) {
		t.Fatal("BuildManifest is not deterministic")
	}
}

func TestBuildManifestDelete(t *testing.T) {
	head := baseManifest()
	upd := frag(0, 10)
	upd.DeletionFile = &pb.DeletionFile{Path: "_deletions/0-3-x.bin", NumDeleted: 4}
	txn := &pb.Transaction{ReadVersion: 3, Uuid: "d", Operation: &pb.Transaction_Delete{Delete: &pb.Delete{UpdatedFragments: []*pb.Fragment{upd}, RemovedFragmentIds: []uint32{1}}}}
	got, err := BuildManifest(head, txn, head)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Fragments) != 1 || got.Fragments[0].DeletionFile.NumDeleted != 4 || got.GetMaxFragmentId() != 1 {
		t.Fatalf("fragments %v", got.Fragments)
	}
	// A fragment missing at head fails the build instead of resurrecting rows.
	bad := proto.Clone(txn).(*pb.Transaction)
	bad.GetDelete().RemovedFragmentIds = []uint32{9}
	if _, err := BuildManifest(head, bad, head); err == nil {
		t.Fatal("delete of a fragment not in head accepted")
	}
	full := proto.Clone(txn).(*pb.Transaction)
	full.GetDelete().UpdatedFragments[0].DeletionFile.NumDeleted = 10
	if _, err := BuildManifest(head, full, head); err == nil {
		t.Fatal("fully deleted fragment kept in manifest")
	}
}

func TestBuildManifestCreate(t *testing.T) {
	s, _ := table.ParseSchema("id:int64", []string{"id"})
	txn := &pb.Transaction{Uuid: "c", Operation: &pb.Transaction_Create{Create: &pb.Create{Schema: s}}}
	m, err := BuildManifest(nil, txn, nil)
	if err != nil || m.Version != 1 || m.MaxFragmentId != nil {
		t.Fatalf("create: %v %v", m, err)
	}
	if _, err := BuildManifest(m, txn, nil); !errors.Is(err, ErrIncompatible) {
		t.Fatalf("create on existing table: %v", err)
	}
}

// A stale compacted position fails the whole merge (Lance #8262).
func TestBuildManifestMergeStaleGenerationFailsWhole(t *testing.T) {
	head := baseManifest()
	head.Indices = append(head.Indices, &pb.IndexMetadata{Name: table.MemWalIndexName, Type: table.MemWalIndexName, Uuid: "mw",
		Details: &pb.IndexMetadata_MemWal{MemWal: &pb.MemWalIndexDetails{Shards: []string{"s0"}, CompactedSstables: map[string]uint64{"s0": 5}}}})
	for _, gen := range []uint64{4, 5} {
		txn := &pb.Transaction{ReadVersion: 3, Uuid: "m", Operation: &pb.Transaction_MergeSstables{MergeSstables: &pb.MergeSSTables{Shard: "s0", ThroughGeneration: gen, NewFragments: []*pb.Fragment{frag(0, 3)}}}}
		if _, err := BuildManifest(head, txn, head); !errors.Is(err, ErrIncompatible) {
			t.Fatalf("generation %d: got %v, want incompatible", gen, err)
		}
	}
	txn := &pb.Transaction{ReadVersion: 3, Uuid: "m", Operation: &pb.Transaction_MergeSstables{MergeSstables: &pb.MergeSSTables{Shard: "s0", ThroughGeneration: 6, NewFragments: []*pb.Fragment{frag(0, 3)}}}}
	got, err := BuildManifest(head, txn, head)
	if err != nil {
		t.Fatal(err)
	}
	if table.MemWal(got).CompactedSstables["s0"] != 6 || len(got.Fragments) != 3 {
		t.Fatalf("merge: %v", got)
	}
	if table.MemWal(head).CompactedSstables["s0"] != 5 || len(head.Fragments) != 2 {
		t.Fatalf("BuildManifest modified head: %v", head)
	}
}

func TestClassify(t *testing.T) {
	del := func(ids ...uint32) *pb.Transaction {
		d := &pb.Delete{}
		for _, id := range ids {
			d.UpdatedFragments = append(d.UpdatedFragments, frag(id, 10))
		}
		return &pb.Transaction{Operation: &pb.Transaction_Delete{Delete: d}}
	}
	app := &pb.Transaction{Operation: &pb.Transaction_Append{Append: &pb.Append{}}}
	rw := func(fri bool, ids ...uint32) *pb.Transaction {
		g := &pb.RewriteGroup{}
		for _, id := range ids {
			g.OldFragments = append(g.OldFragments, frag(id, 10))
		}
		r := &pb.Rewrite{Groups: []*pb.RewriteGroup{g}}
		if fri {
			r.Remap = &pb.Rewrite_FragReuseVersion{FragReuseVersion: &pb.FragReuseVersion{}}
		}
		return &pb.Transaction{Operation: &pb.Transaction_Rewrite{Rewrite: r}}
	}
	merge := func(shard string, gen uint64) *pb.Transaction {
		return &pb.Transaction{Operation: &pb.Transaction_MergeSstables{MergeSstables: &pb.MergeSSTables{Shard: shard, ThroughGeneration: gen}}}
	}
	cases := []struct {
		name         string
		ours, theirs *pb.Transaction
		want         Decision
	}{
		{"append vs delete", app, del(1), Compatible},
		{"append vs rewrite", app, rw(true, 1), Compatible},
		{"delete vs append", del(1), app, Compatible},
		{"delete vs delete same fragment", del(1), del(1, 2), Rebase},
		{"delete vs delete other fragment", del(1), del(2), Compatible},
		{"delete vs rewrite of our fragment", del(1), rw(true, 1, 2), Rebase},
		{"delete vs rewrite elsewhere", del(3), rw(true, 1, 2), Compatible},
		{"rewrite vs delete in old fragments", rw(true, 1, 2), del(2), Rebase},
		{"rewrite vs overlapping rewrite", rw(true, 1, 2), rw(true, 2, 3), Retryable},
		{"rewrite vs disjoint rewrite", rw(true, 1, 2), rw(true, 3, 4), Compatible},
		{"merge vs merge same shard already merged", merge("s0", 5), merge("s0", 5), Incompatible},
		{"merge vs merge same shard lower", merge("s0", 5), merge("s0", 4), Retryable},
		{"merge vs merge other shard", merge("s0", 5), merge("s1", 9), Compatible},
		{"create vs anything", &pb.Transaction{Operation: &pb.Transaction_Create{Create: &pb.Create{}}}, app, Incompatible},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Classify(tc.ours, tc.theirs); got.Decision != tc.want {
				t.Fatalf("got %v (%s), want %v", got.Decision, got.Reason, tc.want)
			}
		})
	}
}

func equalU32(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

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

func encodeIDs(ids ...uint32) ([]byte, error) { return roaring.BitmapOf(ids...).ToBytes() }

// Segments sharing a name are one logical index: BuildManifest refuses a
// segment on another field or of another type than its name's existing
// segments, and a CreateIndex creating a name the head already has.
func TestBuildManifestOneLogicalIndex(t *testing.T) {
	head := baseManifest()
	head.Indices = []*pb.IndexMetadata{{Name: "ix", Type: "btree", Uuid: "a", FieldIds: []int32{0}}}
	build := func(seg *pb.IndexMetadata, created ...string) error {
		txn := &pb.Transaction{ReadVersion: 3, Uuid: "c", Operation: &pb.Transaction_CreateIndex{CreateIndex: &pb.CreateIndex{
			NewIndices: []*pb.IndexMetadata{seg}, CreatedNames: created}}}
		_, err := BuildManifest(head, txn, head)
		return err
	}
	if err := build(&pb.IndexMetadata{Name: "ix", Type: "btree", Uuid: "b", FieldIds: []int32{0}}); err != nil {
		t.Fatalf("a delta segment: %v", err)
	}
	for _, seg := range []*pb.IndexMetadata{
		{Name: "ix", Type: "btree", Uuid: "b", FieldIds: []int32{1}},
		{Name: "ix", Type: "bitmap", Uuid: "b", FieldIds: []int32{0}},
	} {
		if err := build(seg); err == nil || !strings.Contains(err.Error(), `index "ix"`) {
			t.Fatalf("segment %v: got %v, want a refusal", seg, err)
		}
	}
	err := build(&pb.IndexMetadata{Name: "ix", Type: "btree", Uuid: "b", FieldIds: []int32{0}}, "ix")
	if !errors.Is(err, ErrRetryable) {
		t.Fatalf("creating an existing name: got %v, want retryable", err)
	}
	if err := build(&pb.IndexMetadata{Name: "new", Type: "btree", Uuid: "b", FieldIds: []int32{1}}, "new"); err != nil {
		t.Fatalf("creating a new name: %v", err)
	}
}
