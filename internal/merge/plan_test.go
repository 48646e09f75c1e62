package merge

import (
	"context"
	"strings"
	"testing"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

const shardA = "aa48498d-ac91-59e2-8452-69f46010ace2"

func readState(t *testing.T, compacted map[string]uint64) *meta.ManifestFile {
	t.Helper()
	list, err := memwal.CompactedList(compacted)
	if err != nil {
		t.Fatal(err)
	}
	any, err := memwal.EncodeDetails(&pb.MemWalIndexDetails{NumShards: 1, CompactedSstables: list})
	if err != nil {
		t.Fatal(err)
	}
	return &meta.ManifestFile{Manifest: &pb.Manifest{Version: 7},
		Indices: []*pb.IndexMetadata{{Name: meta.MemWalIndexName, IndexDetails: any}}}
}

func shardState(t *testing.T, current uint64, gens ...uint64) *memwal.ShardState {
	t.Helper()
	u, _ := meta.ParseUUID(shardA)
	m := &pb.ShardManifest{Version: 3, ShardId: u, CurrentGeneration: current}
	for _, g := range gens {
		m.Sstables = append(m.Sstables, &pb.SsTable{Generation: g, Path: "x_gen_" + string(rune('0'+g))})
	}
	return &memwal.ShardState{ID: shardA, Manifest: m}
}

func gensOf(j Job) []uint64 {
	var out []uint64
	for _, s := range j.Generations {
		out = append(out, s.GetGeneration())
	}
	return out
}

func TestPlan(t *testing.T) {
	cases := []struct {
		name      string
		compacted uint64
		shard     *memwal.ShardState
		max       int
		want      []uint64
		skip      string
	}{
		{"nothing merged yet", 0, shardState(t, 4, 1, 2, 3), 10, []uint64{1, 2, 3}, ""},
		{"merged ones are not merged again", 2, shardState(t, 4, 1, 2, 3), 10, []uint64{3}, ""},
		{"capped by max generations", 0, shardState(t, 4, 1, 2, 3), 2, []uint64{1, 2}, ""},
		{"everything merged", 3, shardState(t, 4, 1, 2, 3), 10, nil, ""},
		{"a gap stops the run", 0, shardState(t, 5, 1, 2, 4), 10, []uint64{1, 2}, ""},
		{"a missing next generation skips the shard", 1, shardState(t, 5, 1, 3), 10, nil, "generation 2 is next"},
		{"never past the current (unflushed) generation", 0, shardState(t, 2, 1, 2), 10, []uint64{1}, ""},
		{"no manifest", 0, &memwal.ShardState{ID: shardA}, 10, nil, "no manifest"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			comp := map[string]uint64{}
			if tc.compacted > 0 {
				comp[shardA] = tc.compacted
			}
			jobs, skips, err := Plan(readState(t, comp), []*memwal.ShardState{tc.shard}, Env{MaxGenerations: tc.max})
			if err != nil {
				t.Fatal(err)
			}
			var got []uint64
			if len(jobs) == 1 {
				got = gensOf(jobs[0])
				if jobs[0].Compacted != tc.compacted || jobs[0].ReadVersion != 7 || jobs[0].Through() != got[len(got)-1] {
					t.Errorf("job = %+v", jobs[0])
				}
			} else if len(jobs) > 1 {
				t.Fatalf("%d jobs for one shard", len(jobs))
			}
			if !equal(got, tc.want) {
				t.Errorf("generations = %v, want %v", got, tc.want)
			}
			if tc.skip != "" && (len(skips) != 1 || !strings.Contains(skips[0].Reason, tc.skip)) {
				t.Errorf("skips = %+v, want one saying %q", skips, tc.skip)
			}
			if tc.skip == "" && len(skips) != 0 {
				t.Errorf("unexpected skips %+v", skips)
			}
		})
	}
	if _, _, err := Plan(readState(t, nil), nil, Env{}); err == nil {
		t.Error("max generations 0 accepted")
	}
	// A table without a MemWAL has nothing to merge.
	if jobs, _, err := Plan(&meta.ManifestFile{Manifest: &pb.Manifest{Version: 1}}, nil, Env{MaxGenerations: 1}); err != nil || jobs != nil {
		t.Errorf("no MemWAL: %v, %v", jobs, err)
	}
	// The shard manifest must be the shard's own.
	other := shardState(t, 4, 1)
	other.ID = "e00299e4-8c4b-50fc-bbdd-ce8179135761"
	if _, _, err := Plan(readState(t, nil), []*memwal.ShardState{other}, Env{MaxGenerations: 1}); err == nil {
		t.Error("a shard directory holding another shard's manifest was planned")
	}
}

func equal(a, b []uint64) bool {
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

// TestPlanOnLanceDBTables: the real MemWAL tables LanceDB wrote plan every
// flushed generation of every shard, in order.
func TestPlanOnLanceDBTables(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"memwal_1", "memwal_4"} {
		t.Run(name, func(t *testing.T) {
			b, err := storage.Open(ctx, "file://"+lancedb.CorpusDir(t, name))
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			read, _, err := meta.ReadLatest(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			ids, err := memwal.ListShards(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			var shards []*memwal.ShardState
			flushed := 0
			for _, id := range ids {
				st, err := memwal.ReadShard(ctx, b, id)
				if err != nil {
					t.Fatal(err)
				}
				shards = append(shards, st)
				if st.Manifest != nil {
					flushed += len(st.Manifest.GetSstables())
				}
			}
			jobs, skips, err := Plan(read, shards, Env{MaxGenerations: 100})
			if err != nil {
				t.Fatal(err)
			}
			planned := 0
			for _, j := range jobs {
				for i, g := range gensOf(j) {
					if g != uint64(i+1) {
						t.Errorf("shard %s: generations %v, want 1..n", j.Shard, gensOf(j))
					}
				}
				planned += len(j.Generations)
			}
			if planned != flushed || flushed == 0 || len(skips) != 0 {
				t.Errorf("planned %d of %d flushed generations (skips %+v)", planned, flushed, skips)
			}
		})
	}
}
