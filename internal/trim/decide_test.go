package trim

import (
	"fmt"
	"testing"

	pb "github.com/compactord/compactord/gen/compactordv1"
	"github.com/compactord/compactord/internal/table"
)

func manifest(compacted map[string]uint64, maintained []string, catchup map[string]map[string]uint64) *pb.Manifest {
	d := &pb.MemWalIndexDetails{Shards: []string{"a", "b"}, MaintainedIndexes: maintained, CompactedSstables: compacted, IndexCatchup: map[string]*pb.ShardGenerations{}}
	for n, sg := range catchup {
		d.IndexCatchup[n] = &pb.ShardGenerations{Generations: sg}
	}
	return &pb.Manifest{Version: 9, Indices: []*pb.IndexMetadata{{Name: table.MemWalIndexName, Type: table.MemWalIndexName, Details: &pb.IndexMetadata_MemWal{MemWal: d}}}}
}

func shards(gens map[string][]uint64) map[string]*pb.ShardManifest {
	out := map[string]*pb.ShardManifest{}
	for s, gs := range gens {
		sm := &pb.ShardManifest{ShardId: s}
		for _, g := range gs {
			sm.Sstables = append(sm.Sstables, &pb.SSTable{Generation: g, Bytes: 100, Path: fmt.Sprintf("%s/%d", s, g)})
		}
		out[s] = sm
	}
	return out
}

func TestDecide(t *testing.T) {
	all := map[string][]uint64{"a": {1, 2, 3}, "b": {1, 2}}
	cases := []struct {
		name    string
		latest  *pb.Manifest
		readers Readers
		want    string // per SSTable: "+" retire, or the reason[/index]
	}{
		{
			name:   "no maintained index: merged generations retire",
			latest: manifest(map[string]uint64{"a": 2, "b": 2}, nil, nil),
			want:   "a1:+ a2:+ a3:not_merged b1:+ b2:+",
		},
		{
			name:   "an index absent from index_catchup retains everything",
			latest: manifest(map[string]uint64{"a": 3, "b": 2}, []string{"ix"}, nil),
			want:   "a1:index_lag/ix a2:index_lag/ix a3:index_lag/ix b1:index_lag/ix b2:index_lag/ix",
		},
		{
			name:   "an index absent for one shard only",
			latest: manifest(map[string]uint64{"a": 3, "b": 2}, []string{"ix"}, map[string]map[string]uint64{"ix": {"a": 3}}),
			want:   "a1:+ a2:+ a3:+ b1:index_lag/ix b2:index_lag/ix",
		},
		{
			name:   "an index at an explicit 0",
			latest: manifest(map[string]uint64{"a": 3, "b": 2}, []string{"ix"}, map[string]map[string]uint64{"ix": {"a": 0, "b": 0}}),
			want:   "a1:index_lag/ix a2:index_lag/ix a3:index_lag/ix b1:index_lag/ix b2:index_lag/ix",
		},
		{
			name:   "a lagging index among caught-up ones",
			latest: manifest(map[string]uint64{"a": 3, "b": 2}, []string{"fast", "slow"}, map[string]map[string]uint64{"fast": {"a": 3, "b": 2}, "slow": {"a": 1, "b": 2}}),
			want:   "a1:+ a2:index_lag/slow a3:index_lag/slow b1:+ b2:+",
		},
		{
			name:   "catch-up above compacted still needs the merge",
			latest: manifest(map[string]uint64{"a": 1, "b": 0}, []string{"ix"}, map[string]map[string]uint64{"ix": {"a": 3, "b": 2}}),
			want:   "a1:+ a2:not_merged a3:not_merged b1:not_merged b2:not_merged",
		},
		{
			name:    "a version that may still be read needs the SSTables above its position",
			latest:  manifest(map[string]uint64{"a": 3, "b": 2}, nil, nil),
			readers: Readers{"a": {Version: 4, Compacted: 1, Why: "tagged"}, "b": {Version: 4, Compacted: 0, Why: "tagged"}},
			want:    "a1:+ a2:version_retention a3:version_retention b1:version_retention b2:version_retention",
		},
		{
			name:    "a shard no older version reads retires on the latest's terms",
			latest:  manifest(map[string]uint64{"a": 3, "b": 2}, nil, nil),
			readers: Readers{"a": {Version: 4, Compacted: 2, Why: "within the reader grace"}},
			want:    "a1:+ a2:+ a3:version_retention b1:+ b2:+",
		},
		{
			name:   "no MemWAL configured",
			latest: &pb.Manifest{},
			want:   "a1:not_merged a2:not_merged a3:not_merged b1:not_merged b2:not_merged",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			for _, d := range Decide(tc.latest, tc.readers, shards(all)) {
				if got != "" {
					got += " "
				}
				v := "+"
				if !d.Retire {
					v = d.Reason
					if d.Index != "" {
						v += "/" + d.Index
					}
					if d.Detail == "" {
						t.Errorf("%s%d retained without detail", d.Shard, d.Generation)
					}
				}
				got += fmt.Sprintf("%s%d:%s", d.Shard, d.Generation, v)
			}
			if got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestWALDeletionsKeepNewestCovered(t *testing.T) {
	cases := []struct {
		positions []uint64
		cursor    uint64
		want      string
	}{
		{[]uint64{1, 2, 3, 4, 5}, 3, "[1 2]"},
		{[]uint64{5, 1, 3, 2, 4}, 3, "[1 2]"},
		{[]uint64{1, 2}, 0, "[]"},
		{[]uint64{3}, 3, "[]"}, // never delete every covered entry
		{[]uint64{2, 3, 7}, 9, "[2 3]"},
		{nil, 5, "[]"},
	}
	for _, tc := range cases {
		got := WALDeletions(tc.positions, tc.cursor)
		if fmt.Sprint(got) != tc.want && !(len(got) == 0 && tc.want == "[]") {
			t.Errorf("WALDeletions(%v, %d) = %v, want %s", tc.positions, tc.cursor, got, tc.want)
		}
	}
}
