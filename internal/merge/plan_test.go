package merge_test

import (
	"fmt"
	"strings"
	"testing"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/merge"
	"github.com/compactord/compactord/internal/table"
)

func TestPlan(t *testing.T) {
	base := func(compacted map[string]uint64, shards ...string) *pb.Manifest {
		return &pb.Manifest{Version: 7, Indices: []*pb.IndexMetadata{{
			Name: table.MemWalIndexName, Type: table.MemWalIndexName,
			Details: &pb.IndexMetadata_MemWal{MemWal: &pb.MemWalIndexDetails{Shards: shards, CompactedSstables: compacted}},
		}}}
	}
	shard := func(gens ...uint64) *pb.ShardManifest {
		sm := &pb.ShardManifest{}
		for _, g := range gens {
			sm.Sstables = append(sm.Sstables, &pb.SSTable{Generation: g, Path: fmt.Sprintf("g%d", g)})
		}
		return sm
	}
	render := func(jobs []merge.Job, blocked []merge.Blocked) string {
		var parts []string
		for _, j := range jobs {
			var gens []string
			for _, s := range j.SSTables {
				gens = append(gens, s.Path)
			}
			parts = append(parts, fmt.Sprintf("%s@v%d:%d..%d[%s]", j.Shard, j.ReadVersion, j.From, j.Through, strings.Join(gens, ",")))
		}
		for _, b := range blocked {
			parts = append(parts, fmt.Sprintf("blocked %s: %s", b.Shard, b.Reason))
		}
		return strings.Join(parts, "; ")
	}
	for _, c := range []struct {
		name   string
		base   *pb.Manifest
		shards map[string]*pb.ShardManifest
		env    merge.Env
		want   string
	}{
		{"no MemWAL", &pb.Manifest{Version: 3}, nil, merge.Env{}, ""},
		{"never claimed", base(nil, "a"), nil, merge.Env{}, ""},
		{"nothing flushed", base(nil, "a"), map[string]*pb.ShardManifest{"a": shard()}, merge.Env{}, ""},
		{"all pending, ascending", base(nil, "a"), map[string]*pb.ShardManifest{"a": shard(2, 1, 3)}, merge.Env{}, "a@v7:1..3[g1,g2,g3]"},
		{"above the compacted position only", base(map[string]uint64{"a": 2}, "a"), map[string]*pb.ShardManifest{"a": shard(1, 2, 3, 4)}, merge.Env{}, "a@v7:3..4[g3,g4]"},
		{"everything merged", base(map[string]uint64{"a": 4}, "a"), map[string]*pb.ShardManifest{"a": shard(3, 4)}, merge.Env{}, ""},
		{"stops at a hole", base(nil, "a"), map[string]*pb.ShardManifest{"a": shard(1, 2, 4)}, merge.Env{}, "a@v7:1..2[g1,g2]"},
		{"next generation missing", base(map[string]uint64{"a": 1}, "a"), map[string]*pb.ShardManifest{"a": shard(3, 4)}, merge.Env{},
			"blocked a: generation 2 is not in the shard manifest (compacted through 1, lowest flushed above it is 3)"},
		{"bounded job", base(nil, "a"), map[string]*pb.ShardManifest{"a": shard(1, 2, 3)}, merge.Env{MaxGenerations: 2}, "a@v7:1..2[g1,g2]"},
		{"duplicate generation", base(nil, "a"), map[string]*pb.ShardManifest{"a": shard(1, 1, 2)}, merge.Env{}, "a@v7:1..1[g1]"},
		{"shards in name order, independent", base(map[string]uint64{"b": 1}, "b", "a", "c"),
			map[string]*pb.ShardManifest{"a": shard(1), "b": shard(1, 2), "c": shard(5)}, merge.Env{},
			"a@v7:1..1[g1]; b@v7:2..2[g2]; blocked c: generation 1 is not in the shard manifest (compacted through 0, lowest flushed above it is 5)"},
		{"one shard", base(nil, "a", "b"), map[string]*pb.ShardManifest{"a": shard(1), "b": shard(1)}, merge.Env{Shard: "b"}, "b@v7:1..1[g1]"},
		{"unconfigured shard manifests are ignored", base(nil, "a"), map[string]*pb.ShardManifest{"z": shard(1)}, merge.Env{}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := render(merge.Plan(c.base, c.shards, c.env))
			if got != c.want {
				t.Fatalf("plan\n got %s\nwant %s", got, c.want)
			}
			// Pure and stable: the same inputs plan the same jobs.
			if again := render(merge.Plan(c.base, c.shards, c.env)); again != got {
				t.Fatalf("second plan differs: %s", again)
			}
		})
	}
}
