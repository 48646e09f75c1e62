package memwal

import (
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/meta"
)

func TestMaintained(t *testing.T) {
	ixs := []*pb.IndexMetadata{{Name: "b_idx"}, {Name: "a_idx"}, {Name: "a_idx"}, {Name: meta.MemWalIndexName}, {Name: meta.FragReuseIndexName}}
	for _, c := range []struct {
		name string
		d    *pb.MemWalIndexDetails
		want []string
	}{
		{"list", &pb.MemWalIndexDetails{MaintainedIndexes: []string{"b_idx", "gone"}}, []string{"b_idx"}},
		{"none", &pb.MemWalIndexDetails{}, []string{}},
		{"all, empty list", &pb.MemWalIndexDetails{MaintainAllIndexes: proto.Bool(true)}, []string{"a_idx", "b_idx"}},
		{"all and a list", &pb.MemWalIndexDetails{MaintainAllIndexes: proto.Bool(true), MaintainedIndexes: []string{"b_idx"}}, []string{"a_idx", "b_idx"}},
		{"explicitly false", &pb.MemWalIndexDetails{MaintainAllIndexes: proto.Bool(false)}, []string{}},
	} {
		if got := Maintained(c.d, ixs); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
