package trim

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/faults"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

func TestDecide(t *testing.T) {
	view := func(v uint64, c uint64, catch map[string]uint64) View {
		vw := View{Version: v, HasMemWal: true, Compacted: map[string]uint64{"s": c}, Catchup: map[string]map[string]uint64{}, Maintained: []string{"idx"}}
		if catch != nil {
			vw.Catchup["idx"] = catch
		}
		return vw
	}
	shard := Shard{ID: "s", HasManifest: true, ManifestVersion: 9, ReplayAfter: 5,
		Generations: []ShardGen{{1, "a_gen_1"}, {2, "b_gen_2"}, {3, "c_gen_3"}},
		Dirs:        []Dir{{Name: "a_gen_1", Bytes: 1}, {Name: "b_gen_2", Bytes: 2}, {Name: "c_gen_3", Bytes: 3}, {Name: "z_gen_4", Bytes: 4}},
		WAL:         []WALEntry{{Position: 1}, {Position: 2, Sentinel: true}, {Position: 3}, {Position: 4, Unreadable: true}, {Position: 5}, {Position: 6}, {Position: 7}},
	}
	cases := []struct {
		name string
		st   State
		want []string // reasons of generations 1, 2, 3, and the unnamed dir
	}{
		{"nothing merged", State{Latest: view(4, 0, nil)}, []string{ReasonNotMerged, ReasonNotMerged, ReasonNotMerged, ReasonUnreferencedDir}},
		{"merged, absent catch-up retains", State{Latest: view(4, 2, nil)}, []string{ReasonIndexLag, ReasonIndexLag, ReasonNotMerged, ReasonUnreferencedDir}},
		{"merged to 2, caught up to 1", State{Latest: view(4, 2, map[string]uint64{"s": 1})}, []string{ReasonRetire, ReasonIndexLag, ReasonNotMerged, ReasonUnreferencedDir}},
		{"a tagged version merged less", State{Latest: view(4, 3, map[string]uint64{"s": 3}), Pins: []Pin{{View: view(2, 1, map[string]uint64{"s": 1}), Tagged: true, Why: "tagged t"}}},
			[]string{ReasonRetire, ReasonTagged, ReasonTagged, ReasonUnreferencedDir}},
		{"a version in the reader grace", State{Latest: view(4, 3, map[string]uint64{"s": 3}), Pins: []Pin{{View: view(3, 2, map[string]uint64{"s": 2}), Why: "grace"}}},
			[]string{ReasonRetire, ReasonRetire, ReasonPinnedVersion, ReasonUnreferencedDir}},
		{"a pinned version without MemWAL reads no generation", State{Latest: view(4, 3, map[string]uint64{"s": 3}), Pins: []Pin{{View: View{Version: 1}, Tagged: true}}},
			[]string{ReasonRetire, ReasonRetire, ReasonRetire, ReasonUnreferencedDir}},
		{"no MemWAL index at all", State{Latest: View{Version: 4}}, []string{ReasonNotMerged, ReasonNotMerged, ReasonNotMerged, ReasonUnreferencedDir}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.st.Shards = []Shard{shard}
			p := Decide(c.st, 2)
			var got []string
			for _, g := range p.Generations {
				got = append(got, g.Reason)
				if g.Delete != (g.Reason == ReasonRetire) {
					t.Errorf("generation %d: delete=%v reason %s", g.Generation, g.Delete, g.Reason)
				}
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
			var wal []string
			for _, w := range p.WAL {
				wal = append(wal, fmt.Sprintf("%d:%s", w.Position, w.Reason))
			}
			wantWAL := []string{"1:" + ReasonCovered, "2:" + ReasonFence, "3:" + ReasonCovered, "4:" + ReasonUnreadable, "5:" + ReasonNewestCovered, "6:" + ReasonAboveCursor, "7:" + ReasonAboveCursor}
			if !reflect.DeepEqual(wal, wantWAL) {
				t.Errorf("WAL %v, want %v", wal, wantWAL)
			}
		})
	}
	// A shard without a manifest: everything kept, reported.
	p := Decide(State{Latest: view(4, 9, map[string]uint64{"s": 9}), Shards: []Shard{{ID: "s", Dirs: shard.Dirs, WAL: shard.WAL}}}, 2)
	for _, g := range p.Generations {
		if g.Delete || g.Reason != ReasonNoShardManifest {
			t.Errorf("manifest-less shard: %+v", g)
		}
	}
	for _, w := range p.WAL {
		if w.Delete {
			t.Errorf("manifest-less shard: WAL %d deleted", w.Position)
		}
	}
	if len(p.Problems) == 0 {
		t.Error("no problem reported for a shard without a manifest")
	}
	// A named generation whose directory is missing is reported, and there
	// is nothing to delete.
	sh := shard
	sh.Dirs = nil
	p = Decide(State{Latest: view(4, 9, map[string]uint64{"s": 9}), Shards: []Shard{sh}}, 2)
	for _, g := range p.Generations {
		if g.Delete || g.Reason != ReasonMissingDir {
			t.Errorf("missing dir: %+v", g)
		}
	}
}

func open(t *testing.T, dir string) storage.Bucket {
	t.Helper()
	b, err := storage.Open(context.Background(), "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	if err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = fmt.Sprintf("%d@%d", fi.Size(), fi.ModTime().UnixNano())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// fabricateMerge commits a new table version (test helper, not product
// code) whose MemWAL index records compacted[shard] = compacted for every
// shard and, if catchup > 0, index_catchup[idx][shard] = catchup. It
// returns the new version's commit time.
func fabricateMerge(t *testing.T, b storage.Bucket, compacted, catchup uint64) time.Time {
	t.Helper()
	return fabricateMergeEdit(t, b, compacted, catchup, nil)
}

// fabricateMergeEdit is fabricateMerge with edit applied to the details
// after the merge and catch-up are recorded.
func fabricateMergeEdit(t *testing.T, b storage.Bucket, compacted, catchup uint64, edit func(*pb.MemWalIndexDetails)) time.Time {
	t.Helper()
	ctx := context.Background()
	f, naming, err := meta.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	ix := memwal.Index(f.Indices)
	d, err := memwal.Details(ix)
	if err != nil {
		t.Fatal(err)
	}
	shards, err := memwal.ListShards(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	d.CompactedSstables, d.IndexCatchup = nil, nil
	var caught []*pb.CompactedSsTable
	for _, s := range shards {
		u, err := meta.ParseUUID(s)
		if err != nil {
			t.Fatal(err)
		}
		d.CompactedSstables = append(d.CompactedSstables, &pb.CompactedSsTable{ShardId: u, Generation: compacted})
		caught = append(caught, &pb.CompactedSsTable{ShardId: u, Generation: catchup})
	}
	if catchup > 0 {
		for _, n := range d.GetMaintainedIndexes() {
			d.IndexCatchup = append(d.IndexCatchup, &pb.IndexCatchupProgress{IndexName: n, CaughtUpGenerations: caught})
		}
	}
	if edit != nil {
		edit(d)
	}
	nix := proto.Clone(ix).(*pb.IndexMetadata)
	nix.Uuid, _ = meta.NewUUID()
	if nix.IndexDetails, err = memwal.EncodeDetails(d); err != nil {
		t.Fatal(err)
	}
	var ixs []*pb.IndexMetadata
	for _, x := range f.Indices {
		if x == ix {
			x = nix
		}
		ixs = append(ixs, x)
	}
	m := proto.Clone(f.Manifest).(*pb.Manifest)
	m.Version++
	now := time.Now()
	m.Timestamp = timestamppb.New(now)
	m.TransactionFile = ""
	data, err := meta.EncodeManifestFile(&meta.ManifestFile{Manifest: m, Indices: ixs})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.PutIfAbsent(ctx, meta.ManifestKey(naming, m.Version), data); err != nil {
		t.Fatal(err)
	}
	return now
}

func reasons(p Plan) map[uint64]string {
	out := map[uint64]string{}
	for _, g := range p.Generations {
		out[g.Generation] = g.Reason
	}
	return out
}

// TestCorpusNothingMerged: on the real MemWAL tables nothing was merged
// (OSS LanceDB never merges), so every generation is kept as not_merged,
// and a dry run changes nothing.
func TestCorpusNothingMerged(t *testing.T) {
	for _, name := range []string{"memwal_1", "memwal_4"} {
		t.Run(name, func(t *testing.T) {
			dir := lancedb.CorpusDir(t, name)
			b := open(t, dir)
			before := snapshot(t, dir)
			cfg := DefaultConfig()
			cfg.DryRun = true
			res, err := Run(context.Background(), b, cfg, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(before, snapshot(t, dir)) {
				t.Fatal("dry run changed the table")
			}
			if len(res.Plan.Generations) == 0 {
				t.Fatal("no generations found")
			}
			for _, g := range res.Plan.Generations {
				if g.Delete || g.Reason != ReasonNotMerged {
					t.Errorf("%s gen %d: delete=%v reason %s", g.Shard, g.Generation, g.Delete, g.Reason)
				}
			}
			cfg.DryRun = false
			res, err = Run(context.Background(), b, cfg, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if res.DeletedGenerations != 0 || res.DeletedObjects != 0 {
				t.Fatalf("deleted %d generations", res.DeletedGenerations)
			}
			after := snapshot(t, dir)
			for k := range before {
				if _, ok := after[k]; !ok && !isWAL(k) {
					t.Errorf("%s deleted", k)
				}
			}
		})
	}
}

func isWAL(k string) bool {
	ok, _ := filepath.Match("_mem_wal/*/wal/*.arrow", k)
	return ok
}

func lsmRows(t *testing.T, uri, table string) map[int64]string {
	t.Helper()
	res := lancedb.MustRun(t, lancedb.Program{URI: uri, Table: table, Steps: []lancedb.Step{lancedb.ReadRows(lancedb.ReadOpts{LSM: lancedb.Bool(true)})}})
	rows, err := res.Rows(0)
	if err != nil {
		t.Fatal(err)
	}
	m, err := lancedb.RowsByID(rows)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestFabricatedMerge records a merge in a new table version and checks
// each rule, then that LanceDB reads the LSM view identically after the
// trim and a LanceDB writer still writes through the MemWAL.
func TestFabricatedMerge(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name               string
		compacted, catchup uint64
		tag                bool
		grace              bool
		want               map[uint64]string
	}{
		{"merged and caught up to 1", 1, 1, false, false, map[uint64]string{1: ReasonRetire, 2: ReasonNotMerged}},
		{"merged to 2, index caught up to 1", 2, 1, false, false, map[uint64]string{1: ReasonRetire, 2: ReasonIndexLag}},
		{"merged, no catch-up entry", 2, 0, false, false, map[uint64]string{1: ReasonIndexLag, 2: ReasonIndexLag}},
		{"old version tagged", 2, 2, true, false, map[uint64]string{1: ReasonTagged, 2: ReasonTagged}},
		{"old version within the reader grace", 2, 2, false, true, map[uint64]string{1: ReasonPinnedVersion, 2: ReasonPinnedVersion}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := lancedb.CorpusDir(t, "memwal_1")
			b := open(t, dir)
			if c.tag {
				if err := b.Put(ctx, meta.TagKey("old"), []byte(`{"branch":null,"version":4,"manifestSize":1}`)); err != nil {
					t.Fatal(err)
				}
			}
			ts := fabricateMerge(t, b, c.compacted, c.catchup)
			now := ts.Add(time.Hour)
			if c.grace {
				now = ts.Add(time.Second)
			}
			cfg := DefaultConfig()
			cfg.DryRun = true
			before := snapshot(t, dir)
			res, err := Run(ctx, b, cfg, now)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(before, snapshot(t, dir)) {
				t.Fatal("dry run changed the table")
			}
			if got := reasons(res.Plan); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("reasons %v, want %v", got, c.want)
			}
			cfg.DryRun = false
			res, err = Run(ctx, b, cfg, now)
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range res.Plan.Generations {
				gone := true
				for k := range snapshot(t, dir) {
					if len(k) > len(memwal.ShardDir(g.Shard)+g.Dir) && k[:len(memwal.ShardDir(g.Shard)+g.Dir)+1] == memwal.ShardDir(g.Shard)+g.Dir+"/" {
						gone = false
					}
				}
				if gone != g.Delete {
					t.Errorf("generation %d (%s): gone=%v, planned delete=%v", g.Generation, g.Reason, gone, g.Delete)
				}
			}
			if empty := emptyDirs(t, dir); len(empty) > 0 {
				t.Errorf("trim left empty folders: %v", empty)
			}
		})
	}
}

// TestLanceDBAfterTrim: after trimming a fabricated merge, LanceDB reads
// the LSM view as before, and a LanceDB writer can still merge-insert
// through the MemWAL and flush (fencing intact).
func TestLanceDBAfterTrim(t *testing.T) {
	lancedb.Require(t)
	ctx := context.Background()
	dir := lancedb.CorpusDir(t, "memwal_1")
	uri, table := filepath.Dir(dir), "memwal_1"
	b := open(t, dir)
	ts := fabricateMerge(t, b, 1, 1)
	before := lsmRows(t, uri, table)
	start := time.Now()
	res, err := Run(ctx, b, DefaultConfig(), ts.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("trim: %d generations (%d objects), %d WAL entries, %d shard manifests, %d bytes in %s",
		res.DeletedGenerations, res.DeletedObjects, res.DeletedWAL, res.DeletedManifests, res.BytesTrimmed, time.Since(start))
	if res.DeletedGenerations != 1 || res.DeletedWAL != 1 {
		t.Fatalf("deleted %d generations, %d WAL entries; want 1 and 1", res.DeletedGenerations, res.DeletedWAL)
	}
	if d := lancedb.DiffByID(lsmRows(t, uri, table), before); d != "" {
		t.Fatalf("LSM view differs after trim: %s", d)
	}
	rows := lancedb.TaggedRows(500, 505, "w")
	lancedb.MustRun(t, lancedb.Program{URI: uri, Table: table, Steps: []lancedb.Step{
		lancedb.MergeInsert("id", rows), lancedb.CloseLsmWriters(),
	}})
	want := map[int64]string{}
	for k, v := range before {
		want[k] = v
	}
	for _, r := range rows {
		id, _ := r.Int("id")
		want[id] = r.Str("s")
	}
	if d := lancedb.DiffByID(lsmRows(t, uri, table), want); d != "" {
		t.Fatalf("after a LanceDB write following trim: %s", d)
	}
	// And trim again: the new generation is not merged.
	res, err = Run(ctx, b, DefaultConfig(), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range res.Plan.Generations {
		if g.Generation > 1 && g.Delete {
			t.Errorf("generation %d deleted after the write", g.Generation)
		}
	}
}

// emptyDirs lists the folders under dir (dir excluded) that hold nothing.
func emptyDirs(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() || p == dir {
			return err
		}
		if entries, err := os.ReadDir(p); err == nil && len(entries) == 0 {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMaintainAllIndexes: Lance 13.1 records "every index is maintained"
// as maintain_all_indexes with an empty maintained_indexes. Read as the
// list alone that is "none", and trim --reader-grace 0s would retire
// merged generations id_idx has not taken in. Each generation above the
// index's catch-up must be kept as index_lag naming id_idx.
func TestMaintainAllIndexes(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		catchup uint64
		want    map[uint64]string
	}{
		{"no catch-up entry", 0, map[uint64]string{1: ReasonIndexLag, 2: ReasonIndexLag}},
		{"caught up to 1", 1, map[uint64]string{1: ReasonRetire, 2: ReasonIndexLag}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := lancedb.CorpusDir(t, "memwal_1")
			b := open(t, dir)
			ts := fabricateMergeEdit(t, b, 2, c.catchup, func(d *pb.MemWalIndexDetails) {
				d.MaintainedIndexes = nil
				d.MaintainAllIndexes = proto.Bool(true)
			})
			cfg := DefaultConfig()
			cfg.ReaderGrace = 0
			before := snapshot(t, dir)
			res, err := Run(ctx, b, cfg, ts.Add(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			if got := reasons(res.Plan); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("reasons %v, want %v", got, c.want)
			}
			after := snapshot(t, dir)
			for _, g := range res.Plan.Generations {
				if g.Reason == ReasonIndexLag && g.Index != "id_idx" {
					t.Errorf("generation %d: index_lag names %q, want id_idx", g.Generation, g.Index)
				}
				if g.Delete {
					continue
				}
				prefix := memwal.ShardDir(g.Shard) + g.Dir + "/"
				for k := range before {
					if strings.HasPrefix(k, prefix) {
						if _, ok := after[k]; !ok {
							t.Errorf("kept generation %d lost %s", g.Generation, k)
						}
					}
				}
			}
		})
	}
}

// TestUnknownDetailsFieldStops: MemWAL details with a field this build does
// not name (field 99 here; a newer Lance's) stop trim before any delete:
// such a field may say which generations an index has taken in.
func TestUnknownDetailsFieldStops(t *testing.T) {
	ctx := context.Background()
	dir := lancedb.CorpusDir(t, "memwal_1")
	b := open(t, dir)
	ts := fabricateMergeEdit(t, b, 2, 2, func(d *pb.MemWalIndexDetails) {
		// Field 99, varint 1: tag (99<<3|0) = 792 = 0x98 0x06.
		d.ProtoReflect().SetUnknown([]byte{0x98, 0x06, 0x01})
	})
	before := snapshot(t, dir)
	cfg := DefaultConfig()
	cfg.ReaderGrace = 0
	_, err := Run(ctx, b, cfg, ts.Add(time.Hour))
	if err == nil || !errors.Is(err, meta.ErrUnsupportedFeature) {
		t.Fatalf("trim: %v, want a refusal (unsupported feature)", err)
	}
	if !reflect.DeepEqual(before, snapshot(t, dir)) {
		t.Fatal("the refused trim changed the table")
	}
}

// TestExecuteCountsOnlyFreedWALBytes: a run whose WAL deletes fail part
// way reports the bytes of the entries it deleted, not of the plan's.
func TestExecuteCountsOnlyFreedWALBytes(t *testing.T) {
	ctx := context.Background()
	mem, err := storage.Open(ctx, "mem://trim-wal")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	fb := faults.NewFaulty(mem)
	plan := Plan{}
	for i, n := range []int64{100, 30} {
		key := fmt.Sprintf("_mem_wal/s/wal/%d.arrow", i+1)
		if err := mem.Put(ctx, key, make([]byte, n)); err != nil {
			t.Fatal(err)
		}
		plan.WAL = append(plan.WAL, WALDecision{Shard: "s", Position: uint64(i + 1), Key: key, Bytes: n, Delete: true})
	}
	fb.Add(faults.Fault{Ops: []storage.Op{storage.OpDelete}, KeyContains: "wal/2.arrow", Action: faults.Fail(nil)})
	res := &Result{}
	if err := Execute(ctx, fb, plan, 1, res); err == nil {
		t.Fatal("Execute succeeded with a failing delete")
	}
	if res.DeletedWAL != 1 || res.BytesTrimmed != 100 {
		t.Fatalf("deleted %d WAL entries, %d bytes trimmed; want 1 and 100", res.DeletedWAL, res.BytesTrimmed)
	}
}
