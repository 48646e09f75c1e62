package catchup

import (
	"fmt"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/compactordv1"
)

// benchInputs builds the target shape: 100 000 fragments, 16 logical indices
// of 1–3 segments whose bitmaps together cover every fragment, 8 shards.
// Segments split the id space both by stripes (id % n) and by ranges, so the
// bitmaps are bitmap and array containers rather than runs. The commit is an
// append after a merge: every index is unchanged and proven, which is the
// most work Derive does (every bitmap decoded, every index credited).
func benchInputs(b *testing.B) (read, head, next *pb.Manifest) {
	const (
		numFragments = 100_000
		numIndices   = 16
		numShards    = 8
	)
	var shards []string
	readCompacted, compacted := gens{}, gens{}
	prior := positions{}
	for s := range numShards {
		name := fmt.Sprintf("shard-%02d", s)
		shards = append(shards, name)
		readCompacted[name] = uint64(100 + s)
		compacted[name] = uint64(110 + s)
	}
	var segs []*pb.IndexMetadata
	for i := range numIndices {
		name := fmt.Sprintf("idx-%02d", i)
		prior[name] = gens{}
		for _, s := range shards {
			prior[name][s] = 50
		}
		n := 1 + i%3
		parts := make([]*roaring.Bitmap, n)
		for j := range parts {
			parts[j] = roaring.New()
		}
		for id := uint32(0); id < numFragments; id++ {
			if i%2 == 0 {
				parts[int(id)%n].Add(id)
			} else {
				parts[int(id)*n/numFragments].Add(id)
			}
		}
		for j, bm := range parts {
			bs, err := bm.ToBytes()
			if err != nil {
				b.Fatal(err)
			}
			segs = append(segs, &pb.IndexMetadata{
				Uuid: fmt.Sprintf("%s-seg-%d", name, j), Name: name, Type: "btree",
				DatasetVersion: 10, FragmentBitmap: bs,
			})
		}
	}
	frags := make([]uint32, numFragments)
	for i := range frags {
		frags[i] = uint32(i)
	}
	read = manifest(10, frags, append([]*pb.IndexMetadata{memWal(shards, readCompacted, prior)}, segs...)...)
	head = manifest(12, frags, append([]*pb.IndexMetadata{memWal(shards, compacted, prior)}, segs...)...)
	next = proto.CloneOf(head)
	next.Version = 13
	next.Fragments = append(next.Fragments, &pb.Fragment{Id: numFragments, PhysicalRows: 100})
	return read, head, next
}

func BenchmarkDerive(b *testing.B) {
	read, head, next := benchInputs(b)
	got, changed, err := Derive(read, head, next)
	if err != nil || !changed {
		b.Fatalf("setup: changed=%v err=%v", changed, err)
	}
	if gen, _ := IndexCaughtUp(got, "idx-15", "shard-07"); gen != 107 {
		b.Fatalf("setup: idx-15/shard-07 = %d, want 107 (proven, credited)", gen)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Derive(read, head, next); err != nil {
			b.Fatal(err)
		}
	}
}
