package commit

import (
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/meta"
)

// Shard ids of the synthetic tables (UUIDv5-shaped, as LanceDB's).
const (
	shardA = "aa48498d-ac91-59e2-8452-69f46010ace2"
	shardB = "e00299e4-8c4b-50fc-bbdd-ce8179135761"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func uuidOf(t testing.TB, s string) *pb.UUID {
	t.Helper()
	u, err := meta.ParseUUID(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// segment is an index segment on field 0 over the given fragments (nil:
// no bitmap).
func segment(t testing.TB, name, id string, frags []uint32) *pb.IndexMetadata {
	ix := &pb.IndexMetadata{Uuid: uuidOf(t, id), Name: name, Fields: []int32{0},
		IndexDetails: &anypb.Any{TypeUrl: meta.TypeURLBTree}}
	if frags != nil {
		ix.FragmentBitmap = meta.EncodeBitmap(roaring.BitmapOf(frags...))
	}
	return ix
}

// memwalIndex is a MemWAL index with compacted positions and catch-up entries.
func memwalIndex(t testing.TB, compacted map[string]uint64, catchup map[string]map[string]uint64, maintained ...string) *pb.IndexMetadata {
	t.Helper()
	list, err := memwal.CompactedList(compacted)
	if err != nil {
		t.Fatal(err)
	}
	d := &pb.MemWalIndexDetails{NumShards: 2, MaintainedIndexes: maintained, CompactedSstables: list}
	for _, name := range sortedUnique(keys(catchup)) {
		cl, err := memwal.CompactedList(catchup[name])
		if err != nil {
			t.Fatal(err)
		}
		d.IndexCatchup = append(d.IndexCatchup, &pb.IndexCatchupProgress{IndexName: name, CaughtUpGenerations: cl})
	}
	any, err := memwal.EncodeDetails(d)
	if err != nil {
		t.Fatal(err)
	}
	return &pb.IndexMetadata{Uuid: uuidOf(t, "00000000-0000-4000-8000-00000000aaaa"), Name: meta.MemWalIndexName, IndexDetails: any}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// version is a manifest file with the given fragment ids and indices.
func version(v uint64, frags []uint64, ixs ...*pb.IndexMetadata) *meta.ManifestFile {
	m := &pb.Manifest{Version: v, DataFormat: &pb.Manifest_DataStorageFormat{FileFormat: "lance", Version: "2.2"}}
	for _, id := range frags {
		m.Fragments = append(m.Fragments, &pb.DataFragment{Id: id, PhysicalRows: 10,
			Files: []*pb.DataFile{{Path: "f.lance", Fields: []int32{0}, FileMajorVersion: 2, FileMinorVersion: 2}}})
	}
	m.MaxFragmentId = maxFragmentID(m)
	f := &meta.ManifestFile{Manifest: m}
	if len(ixs) > 0 {
		f.Indices = ixs
	}
	return f
}

func catchupOf(t testing.TB, f *meta.ManifestFile) map[string]map[string]uint64 {
	t.Helper()
	ix := memwal.Index(f.Indices)
	if ix == nil {
		t.Fatal("no MemWAL index")
	}
	d, err := memwal.Details(ix)
	if err != nil {
		t.Fatal(err)
	}
	return memwal.Catchup(d)
}

func mergeTxn(read uint64, shard string, gen uint64) *pb.Transaction {
	u, _ := meta.ParseUUID(shard)
	return &pb.Transaction{ReadVersion: read, Uuid: "11111111-1111-4111-8111-111111111111", Operation: &pb.Transaction_Update_{Update: &pb.Transaction_Update{
		CompactedSstables: []*pb.CompactedSsTable{{ShardId: u, Generation: gen}}}}}
}

func appendTxn(read uint64, n int) *pb.Transaction {
	op := &pb.Transaction_Append{}
	for range n {
		op.Fragments = append(op.Fragments, &pb.DataFragment{PhysicalRows: 5})
	}
	return &pb.Transaction{ReadVersion: read, Uuid: "22222222-2222-4222-8222-222222222222", Operation: &pb.Transaction_Append_{Append: op}}
}
