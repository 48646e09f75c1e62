package inspect

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"testing"

	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

// mixedSteps builds a table with everything but a MemWAL: three appends,
// a delete that empties fragment 1 (Lance drops the fragment), a delete
// that leaves deletion files on fragments 0 and 2, a btree and a bitmap
// index, an append the indexes do not cover, and two tags.
func mixedSteps() []lancedb.Step {
	return []lancedb.Step{
		lancedb.Create(lancedb.BasicSchema, lancedb.BasicRows(0, 10)),
		lancedb.Add(lancedb.BasicRows(10, 20)),
		lancedb.Add(lancedb.BasicRows(20, 30)),
		lancedb.Delete("id >= 10 AND id < 20"),
		lancedb.Delete("id = 3 OR id = 25 OR id = 26"),
		lancedb.CreateIndex("id", "btree", "id_idx"),
		lancedb.CreateIndex("cat", "bitmap", "cat_idx"),
		lancedb.Add(lancedb.BasicRows(30, 35)),
		lancedb.TagCreate("two", 2),
		lancedb.TagCreate("five", 5),
	}
}

// TestAgreesWithLanceDB builds tables with LanceDB and checks that inspect,
// at every version, agrees with what LanceDB reports: the versions and
// their timestamps, the row count, the fragments that hold rows and how
// many live rows each holds (from LanceDB's row addresses), the indexes
// (names, uuids, how many rows their bitmaps cover), tags and the MemWAL
// spec.
func TestAgreesWithLanceDB(t *testing.T) {
	lancedb.Require(t)
	cases := []struct {
		name  string
		build func(t *testing.T) *lancedb.Fixture
	}{
		{"mixed", func(t *testing.T) *lancedb.Fixture {
			dir := t.TempDir()
			lancedb.MustRun(t, lancedb.Program{URI: dir, Steps: mixedSteps()})
			return &lancedb.Fixture{URI: dir, Table: "t", Dir: dir + "/t.lance"}
		}},
		{"memwal_unsharded", func(t *testing.T) *lancedb.Fixture { return lancedb.MemWAL(t, "", 1, 2) }},
		{"memwal_bucket3", func(t *testing.T) *lancedb.Fixture { return lancedb.MemWAL(t, "", 3, 2) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.build(t)
			ctx := context.Background()
			b, err := storage.Open(ctx, "file://"+f.Dir)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			res := f.Run(t, lancedb.ListVersions(), lancedb.ListIndices(), lancedb.Tags(), lancedb.GetLsmWriteSpec())
			versions, err := res.Versions(0)
			if err != nil {
				t.Fatal(err)
			}
			lIdx, err := res.Indices(1)
			if err != nil {
				t.Fatal(err)
			}
			lTags, err := res.Tags(2)
			if err != nil {
				t.Fatal(err)
			}
			spec, err := res.LsmWriteSpec(3)
			if err != nil {
				t.Fatal(err)
			}

			// One read-back program: per version, the count and the row
			// addresses of the base table; then index stats at the head.
			var steps []lancedb.Step
			for _, v := range versions {
				steps = append(steps, lancedb.Checkout(v.Version), lancedb.CountRows(""),
					lancedb.ReadRows(lancedb.ReadOpts{Version: v.Version, Columns: []string{"id"}, WithRowID: true, LSM: lancedb.Bool(false)}))
			}
			steps = append(steps, lancedb.CheckoutLatest())
			for _, ix := range lIdx {
				steps = append(steps, lancedb.IndexStats(ix.Name))
			}
			back := f.Run(t, steps...)

			for i, v := range versions {
				doc, err := Build(ctx, b, v.Version)
				if err != nil {
					t.Fatalf("version %d: %v", v.Version, err)
				}
				if doc.Version != v.Version {
					t.Errorf("version %d: inspect says %d", v.Version, doc.Version)
				}
				if got := mustMillis(t, doc.Timestamp); got != v.Timestamp {
					t.Errorf("version %d: timestamp %d ms, LanceDB %d", v.Version, got, v.Timestamp)
				}
				count, err := back.Count(3*i + 1)
				if err != nil {
					t.Fatal(err)
				}
				if doc.Rows != uint64(count) {
					t.Errorf("version %d: %d rows, LanceDB counts %d", v.Version, doc.Rows, count)
				}
				rows, err := back.Rows(3*i + 2)
				if err != nil {
					t.Fatal(err)
				}
				lance := map[uint64]uint64{}
				for _, r := range rows {
					addr, ok := r.Int("_rowid")
					if !ok {
						t.Fatalf("version %d: row without _rowid: %v", v.Version, r)
					}
					lance[uint64(addr)>>32]++
				}
				ours := map[uint64]uint64{}
				for _, fr := range doc.Fragments {
					if live := fr.PhysicalRows - fr.DeletedRows; live > 0 {
						ours[fr.ID] = live
					}
				}
				if fmt.Sprint(ours) != fmt.Sprint(lance) {
					t.Errorf("version %d: live rows by fragment %v, LanceDB's row addresses say %v", v.Version, ours, lance)
				}
			}

			doc, err := Build(ctx, b, 0)
			if err != nil {
				t.Fatal(err)
			}
			if last := versions[len(versions)-1].Version; doc.Version != last {
				t.Errorf("latest: inspect %d, LanceDB %d", doc.Version, last)
			}
			// Indexes: LanceDB lists user indexes (not the system ones)
			// with the uuid of a segment; stats count the rows the
			// bitmaps cover.
			byName := map[string][]Index{}
			for _, ix := range doc.Indices {
				byName[ix.Name] = append(byName[ix.Name], ix)
			}
			live := map[uint32]uint64{}
			for _, fr := range doc.Fragments {
				live[uint32(fr.ID)] = fr.PhysicalRows - fr.DeletedRows
			}
			var lNames []string
			for k, ix := range lIdx {
				lNames = append(lNames, ix.Name)
				segs := byName[ix.Name]
				if len(segs) == 0 {
					t.Errorf("LanceDB lists index %s, inspect does not", ix.Name)
					continue
				}
				if !slices.ContainsFunc(segs, func(s Index) bool { return s.UUID == ix.IndexUUID }) {
					t.Errorf("index %s: LanceDB uuid %s, inspect has %v", ix.Name, ix.IndexUUID, segs)
				}
				if fmt.Sprint(segs[0].Columns) != fmt.Sprint(ix.Columns) {
					t.Errorf("index %s: columns %v, LanceDB %v", ix.Name, segs[0].Columns, ix.Columns)
				}
				var covered uint64
				for _, s := range segs {
					for _, id := range s.FragmentBitmap {
						covered += live[id]
					}
				}
				st, err := back.IndexStats(3*len(versions) + 1 + k)
				if err != nil || st == nil {
					t.Fatalf("index stats %s: %v %v", ix.Name, st, err)
				}
				if uint64(st.NumIndexedRows) != covered || uint64(st.NumUnindexedRows) != doc.Rows-covered {
					t.Errorf("index %s: bitmaps cover %d of %d rows, LanceDB stats say %d indexed, %d unindexed", ix.Name, covered, doc.Rows, st.NumIndexedRows, st.NumUnindexedRows)
				}
				if st.NumIndices != int64(len(segs)) {
					t.Errorf("index %s: %d segments, LanceDB %d", ix.Name, len(segs), st.NumIndices)
				}
			}
			var ourNames []string
			for name := range byName {
				if name != "__lance_mem_wal" && name != "__lance_frag_reuse" {
					ourNames = append(ourNames, name)
				}
			}
			sort.Strings(ourNames)
			sort.Strings(lNames)
			if fmt.Sprint(ourNames) != fmt.Sprint(lNames) {
				t.Errorf("indexes %v, LanceDB %v", ourNames, lNames)
			}
			ourTags := map[string]uint64{}
			for _, tg := range doc.Tags {
				ourTags[tg.Name] = tg.Version
			}
			theirTags := map[string]uint64{}
			for k, v := range lTags {
				theirTags[k] = v.Version
			}
			if fmt.Sprint(ourTags) != fmt.Sprint(theirTags) {
				t.Errorf("tags %v, LanceDB %v", ourTags, theirTags)
			}
			switch {
			case spec == nil && doc.MemWal != nil:
				t.Errorf("LanceDB has no LSM spec, inspect shows a MemWAL: %+v", doc.MemWal)
			case spec != nil && doc.MemWal == nil:
				t.Errorf("LanceDB has an LSM spec %+v, inspect shows no MemWAL", spec)
			case spec != nil:
				if fmt.Sprint(doc.MemWal.MaintainedIndexes) != fmt.Sprint(spec.MaintainedIndexes) {
					t.Errorf("maintained indexes %v, LanceDB %v", doc.MemWal.MaintainedIndexes, spec.MaintainedIndexes)
				}
				if len(doc.MemWal.ShardingSpecs) != 1 || len(doc.MemWal.ShardingSpecs[0].Fields) != 1 || doc.MemWal.ShardingSpecs[0].Fields[0].Transform != spec.SpecType {
					t.Errorf("sharding specs %+v, LanceDB spec %+v", doc.MemWal.ShardingSpecs, spec)
				}
				checkShards(t, f, doc)
			}
			if _, err := json.Marshal(doc); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// checkShards: every merge-insert the fixture ran flushed one generation
// per shard it wrote (closeLsmWriters), and nothing is merged (OSS LanceDB
// never merges), so the generations inspect shows per shard are exactly
// the flushes, and each shard's current generation is one above its last.
func checkShards(t *testing.T, f *lancedb.Fixture, doc *Doc) {
	t.Helper()
	flushes := map[string]int{}
	for i, s := range f.Steps {
		if s["op"] != "mergeInsert" {
			continue
		}
		m, err := f.Results.Merge(i)
		if err != nil {
			t.Fatal(err)
		}
		for _, sh := range m.Shards {
			flushes[sh]++
		}
	}
	got := map[string]int{}
	for _, sh := range doc.MemWal.Shards {
		got[sh.ID] = len(sh.SSTables)
		if sh.CompactedSSTables != 0 {
			t.Errorf("shard %s: compacted %d; LanceDB never merges", sh.ID, sh.CompactedSSTables)
		}
		if n := uint64(len(sh.SSTables)); sh.CurrentGeneration != n+1 {
			t.Errorf("shard %s: current generation %d with %d flushed generations", sh.ID, sh.CurrentGeneration, n)
		}
		for i, g := range sh.SSTables {
			if g.Generation != uint64(i+1) {
				t.Errorf("shard %s: generations %+v are not 1..n", sh.ID, sh.SSTables)
			}
		}
	}
	// The oracle names shards by bucket ("b0", "unsharded"), Lance by a
	// UUIDv5 of it, so compare the per-shard counts as multisets.
	var want, have []int
	for _, n := range flushes {
		want = append(want, n)
	}
	for _, n := range got {
		have = append(have, n)
	}
	sort.Ints(want)
	sort.Ints(have)
	if len(want) == 0 || fmt.Sprint(want) != fmt.Sprint(have) {
		t.Errorf("generations per shard %v, the oracle's merges flushed %v per shard", got, flushes)
	}
}
