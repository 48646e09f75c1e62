package fri

import (
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/lancepb"
)

// FuzzDetails decodes FRI content bytes: any input gives an Index or an
// error, never a panic, and an accepted Index remaps without panicking.
func FuzzDetails(f *testing.F) {
	vs := chainAB(f)
	vs[1].Removed = bm32(4)
	seed, _ := proto.Marshal(ToProto(vs))
	f.Add(seed)
	f.Add([]byte{})
	one, _ := proto.Marshal(ToProto(vs[:1]))
	f.Add(one)
	f.Fuzz(func(t *testing.T, b []byte) {
		in := &pb.FragmentReuseIndexDetails_InlineContent{}
		if proto.Unmarshal(b, in) != nil {
			return
		}
		ix, err := FromProto(in)
		if err != nil {
			return
		}
		remap := ix.Remapper(0)
		for _, v := range ix.Versions {
			for _, g := range v.Groups {
				for _, d := range g.Old {
					for off := uint64(0); off < min(d.PhysicalRows+1, 4); off++ {
						remap(d.ID<<32 | off)
					}
				}
			}
		}
		ix.RemapBitmap(seg("a", 0, 1, 2, 10, 11))
		ix.Trimmable([]*pb.IndexMetadata{seg("a", 0, 1, 2)})
		// What was accepted encodes and decodes to the same chain.
		if _, err := FromProto(ToProto(ix.Versions)); err != nil {
			t.Fatalf("re-encoded content rejected: %v", err)
		}
	})
}
