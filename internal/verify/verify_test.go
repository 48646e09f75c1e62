package verify

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/memwal"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/testing/lancedb"
	"github.com/compactord/compactord/internal/testing/tables"
)

func open(t *testing.T, dir string) storage.Bucket {
	t.Helper()
	b, err := storage.Open(context.Background(), "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func run(t *testing.T, dir string, opt Options) *Report {
	t.Helper()
	rep, err := Run(context.Background(), open(t, dir), opt)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func wantOK(t *testing.T, name string, rep *Report) {
	t.Helper()
	if !rep.OK() || len(rep.Warnings) != 0 {
		t.Errorf("%s: violations %v warnings %v", name, rep.Violations, rep.Warnings)
	}
}

// wantCheck asserts a violation of check whose object contains object.
func wantCheck(t *testing.T, rep *Report, check, object string) {
	t.Helper()
	for _, v := range rep.Violations {
		if v.Check == check && strings.Contains(v.Object, object) {
			return
		}
	}
	t.Errorf("no %s violation on %q; got %v", check, object, rep.Violations)
}

// TestUnknownFlagsAreWarnings: a version a newer Lance wrote (a feature
// flag lance 12 does not define) is read and checked; the flag is a
// warning naming it, not a violation: the table is not damaged, only out
// of compactord's reach.
func TestUnknownFlagsAreWarnings(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(m *pb.Manifest)
	}{
		{"writer", func(m *pb.Manifest) { m.WriterFeatureFlags |= 1024 }},
		{"reader", func(m *pb.Manifest) { m.ReaderFeatureFlags |= 1 << 40 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := lancedb.CorpusDir(t, "plain")
			rewriteLatest(t, dir, func(f *meta.ManifestFile) { tc.edit(f.Manifest) })
			rep := run(t, dir, Options{Deep: true})
			if !rep.OK() {
				t.Fatalf("violations %v", rep.Violations)
			}
			if len(rep.Warnings) != 1 || rep.Warnings[0].Check != CheckFlags || !strings.Contains(rep.Warnings[0].Message, tc.name+" flags") || !strings.Contains(rep.Warnings[0].Message, "maintains nothing") {
				t.Fatalf("warnings %v, want one %s naming the %s flag", rep.Warnings, CheckFlags, tc.name)
			}
		})
	}
}

func TestCorpusPasses(t *testing.T) {
	names, err := lancedb.CorpusNames()
	if err != nil || len(names) < 8 {
		t.Fatalf("corpus %v %v", names, err)
	}
	for _, name := range names {
		dir := lancedb.CorpusDir(t, name)
		for _, deep := range []bool{false, true} {
			o := Options{Deep: deep}
			if deep {
				o.IndexContent = index.ContentChecker
			}
			rep := run(t, dir, o)
			wantOK(t, name, rep)
			if rep.Objects == 0 || len(rep.Versions) == 0 {
				t.Errorf("%s: checked nothing: %+v", name, rep)
			}
		}
		latest := run(t, dir, Options{}).Versions
		wantOK(t, name+" one version", run(t, dir, Options{Version: latest[len(latest)-1]}))
	}
}

// TestLiveTablesPass: tables LanceDB builds now, with deletes (one
// fragment emptied), indexes, tags, an optimize() that compacts and remaps,
// and MemWAL generations on several shards.
func TestLiveTablesPass(t *testing.T) {
	lancedb.Require(t)
	dir := t.TempDir()
	lancedb.MustRun(t, lancedb.Program{URI: dir, Steps: []lancedb.Step{
		lancedb.Create(lancedb.BasicSchema, lancedb.BasicRows(0, 10)),
		lancedb.Add(lancedb.BasicRows(10, 20)),
		lancedb.Add(lancedb.BasicRows(20, 30)),
		lancedb.Delete("id >= 10 AND id < 20"),
		lancedb.Delete("id = 3"),
		lancedb.CreateIndex("id", "btree", "id_idx"),
		lancedb.CreateIndex("cat", "bitmap", "cat_idx"),
		lancedb.TagCreate("before", 5),
		lancedb.Add(lancedb.BasicRows(30, 40)),
		lancedb.Optimize(lancedb.OptimizeOpts{}),
	}})
	deep := Options{Deep: true, IndexContent: index.ContentChecker}
	rep := run(t, filepath.Join(dir, "t.lance"), deep)
	wantOK(t, "mixed", rep)
	if len(rep.IndexContent) != 2 {
		t.Errorf("mixed: index content %+v", rep.IndexContent)
	}
	f := lancedb.MemWAL(t, "", 3, 2)
	wantOK(t, "memwal", run(t, f.Dir, deep))
}

// rewriteLatest rewrites the newest manifest of the table in dir in place
// (tables.RewriteLatest).
func rewriteLatest(t *testing.T, dir string, edit func(f *meta.ManifestFile)) {
	t.Helper()
	tables.RewriteLatest(t, open(t, dir), edit)
}

func editMemWal(t *testing.T, f *meta.ManifestFile, edit func(d *pb.MemWalIndexDetails)) {
	t.Helper()
	tables.EditMemWal(t, f, edit)
}

func shardID(t *testing.T, dir string) string {
	t.Helper()
	ids, err := memwal.ListShards(context.Background(), open(t, dir))
	if err != nil || len(ids) == 0 {
		t.Fatalf("shards %v %v", ids, err)
	}
	return ids[0]
}

func uuidMsg(t *testing.T, s string) *pb.UUID {
	u, err := meta.ParseUUID(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestViolations breaks one invariant at a time in a copy of a corpus
// table and checks verify names it.
func TestViolations(t *testing.T) {
	cases := []struct {
		name, table, check, object string
		deep                       bool
		breakIt                    func(t *testing.T, dir string)
	}{
		{name: "merged above flushed", table: "memwal_1", check: CheckMemWal, object: "_mem_wal/", breakIt: func(t *testing.T, dir string) {
			sh := shardID(t, dir)
			rewriteLatest(t, dir, func(f *meta.ManifestFile) {
				editMemWal(t, f, func(d *pb.MemWalIndexDetails) {
					d.CompactedSstables = []*pb.CompactedSsTable{{ShardId: uuidMsg(t, sh), Generation: 3}}
				})
			})
		}},
		{name: "catch-up above merged", table: "memwal_1", check: CheckMemWal, object: "__lance_mem_wal", breakIt: func(t *testing.T, dir string) {
			sh := shardID(t, dir)
			rewriteLatest(t, dir, func(f *meta.ManifestFile) {
				editMemWal(t, f, func(d *pb.MemWalIndexDetails) {
					d.CompactedSstables = []*pb.CompactedSsTable{{ShardId: uuidMsg(t, sh), Generation: 1}}
					d.IndexCatchup = []*pb.IndexCatchupProgress{{IndexName: "id_idx", CaughtUpGenerations: []*pb.CompactedSsTable{{ShardId: uuidMsg(t, sh), Generation: 2}}}}
				})
			})
		}},
		{name: "maintained index missing", table: "memwal_4", check: CheckMemWal, object: "__lance_mem_wal", breakIt: func(t *testing.T, dir string) {
			rewriteLatest(t, dir, func(f *meta.ManifestFile) {
				editMemWal(t, f, func(d *pb.MemWalIndexDetails) { d.MaintainedIndexes = append(d.MaintainedIndexes, "gone_idx") })
			})
		}},
		{name: "WAL gap above replay", table: "memwal_1", check: CheckWAL, object: "/wal/", breakIt: func(t *testing.T, dir string) {
			ctx := context.Background()
			b := open(t, dir)
			sh := shardID(t, dir)
			st, err := memwal.ReadShard(ctx, b, sh)
			if err != nil {
				t.Fatal(err)
			}
			m := proto.Clone(st.Manifest).(*pb.ShardManifest)
			m.Version++
			m.ReplayAfterWalEntryPosition = 0
			data, _ := memwal.EncodeShardManifest(m)
			if err := b.Put(ctx, memwal.ShardManifestKey(sh, m.Version), data); err != nil {
				t.Fatal(err)
			}
			if err := b.Delete(ctx, memwal.WALKey(sh, 2)); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "unflushed WAL entry torn (deep)", table: "memwal_1", check: CheckWAL, object: "/wal/", deep: true, breakIt: func(t *testing.T, dir string) {
			ctx := context.Background()
			b := open(t, dir)
			sh := shardID(t, dir)
			st, err := memwal.ReadShard(ctx, b, sh)
			if err != nil {
				t.Fatal(err)
			}
			m := proto.Clone(st.Manifest).(*pb.ShardManifest)
			m.Version++
			m.ReplayAfterWalEntryPosition = 0
			data, _ := memwal.EncodeShardManifest(m)
			if err := b.Put(ctx, memwal.ShardManifestKey(sh, m.Version), data); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, filepath.FromSlash(memwal.WALKey(sh, 2)))
			entry, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, entry[:len(entry)/2], 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "unmerged generation data file torn (deep)", table: "memwal_1", check: CheckSSTable, object: "_gen_2/data/", deep: true, breakIt: func(t *testing.T, dir string) {
			matches, _ := filepath.Glob(filepath.Join(dir, "_mem_wal", "*", "*_gen_2", "data", "*.lance"))
			if len(matches) == 0 {
				t.Fatal("no data file in generation 2")
			}
			data, err := os.ReadFile(matches[0])
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(matches[0], data[:len(data)-20], 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "unmerged generation without _versions", table: "memwal_1", check: CheckSSTable, object: "_gen_2/", breakIt: func(t *testing.T, dir string) {
			matches, _ := filepath.Glob(filepath.Join(dir, "_mem_wal", "*", "*_gen_2", "_versions"))
			if len(matches) != 1 || os.RemoveAll(matches[0]) != nil {
				t.Fatalf("gen 2 _versions: %v", matches)
			}
		}},
		{name: "shard manifest says another version", table: "memwal_1", check: CheckShardManifest, object: "manifest/", breakIt: func(t *testing.T, dir string) {
			ctx := context.Background()
			b := open(t, dir)
			sh := shardID(t, dir)
			st, _ := memwal.ReadShard(ctx, b, sh)
			m := proto.Clone(st.Manifest).(*pb.ShardManifest)
			m.Version = 1
			data, _ := memwal.EncodeShardManifest(m)
			if err := b.Put(ctx, memwal.ShardManifestKey(sh, st.Manifest.GetVersion()), data); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "duplicate fragment id", table: "plain", check: CheckFragments, object: "fragment 1", breakIt: func(t *testing.T, dir string) {
			rewriteLatest(t, dir, func(f *meta.ManifestFile) {
				m := f.Manifest
				dup := proto.Clone(m.Fragments[1]).(*pb.DataFragment)
				m.Fragments = append(m.Fragments, dup)
			})
		}},
		{name: "fragment above max_fragment_id", table: "plain", check: CheckFragments, object: "fragment 2", breakIt: func(t *testing.T, dir string) {
			rewriteLatest(t, dir, func(f *meta.ManifestFile) { f.Manifest.MaxFragmentId = proto.Uint32(1) })
		}},
		{name: "more deleted than physical", table: "deletes_arrow", check: CheckFragments, object: "fragment 0", breakIt: func(t *testing.T, dir string) {
			rewriteLatest(t, dir, func(f *meta.ManifestFile) { f.Manifest.Fragments[0].DeletionFile.NumDeletedRows = 11 })
		}},
		{name: "deletion count disagrees (deep)", table: "deletes_arrow", check: CheckDeletionFile, object: "_deletions/0-", deep: true, breakIt: func(t *testing.T, dir string) {
			rewriteLatest(t, dir, func(f *meta.ManifestFile) { f.Manifest.Fragments[0].DeletionFile.NumDeletedRows = 2 })
		}},
		{name: "data file size", table: "plain", check: CheckDataFile, object: "data/", breakIt: func(t *testing.T, dir string) {
			matches, _ := filepath.Glob(filepath.Join(dir, "data", "*.lance"))
			fh, err := os.OpenFile(matches[0], os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = fh.Write([]byte{0})
			_ = fh.Close()
		}},
		{name: "index bitmap names a fragment never live", table: "indexed", check: CheckIndex, object: "id_idx", breakIt: func(t *testing.T, dir string) {
			rewriteLatest(t, dir, func(f *meta.ManifestFile) {
				ix := meta.FindIndex(f.Indices, "id_idx")[0]
				ix.FragmentBitmap = meta.EncodeBitmap(roaring.BitmapOf(0, 1, 2, 99))
			})
		}},
		{name: "index dataset_version above the version", table: "indexed", check: CheckIndex, object: "cat_idx", breakIt: func(t *testing.T, dir string) {
			rewriteLatest(t, dir, func(f *meta.ManifestFile) { meta.FindIndex(f.Indices, "cat_idx")[0].DatasetVersion = 99 })
		}},
		{name: "segments disagree", table: "indexed", check: CheckIndex, object: "id_idx", breakIt: func(t *testing.T, dir string) {
			rewriteLatest(t, dir, func(f *meta.ManifestFile) {
				seg := proto.Clone(meta.FindIndex(f.Indices, "id_idx")[0]).(*pb.IndexMetadata)
				seg.Uuid = meta.FindIndex(f.Indices, "cat_idx")[0].Uuid // an existing directory
				seg.Fields = []int32{2}
				f.Indices = append(f.Indices, seg)
			})
		}},
		{name: "timestamps go back", table: "plain", check: CheckChain, object: "_versions/", breakIt: func(t *testing.T, dir string) {
			rewriteLatest(t, dir, func(f *meta.ManifestFile) {
				f.Manifest.Timestamp = timestamppb.New(f.Manifest.Timestamp.AsTime().AddDate(-1, 0, 0))
			})
		}},
		{name: "tag of a version not retained", table: "tagged", check: CheckTag, object: "_refs/tags/late.json", breakIt: func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "_refs", "tags", "late.json"), []byte(`{"branch":null,"version":42}`), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "FRI old fragment still live", table: "plain", check: CheckFragReuse, object: "__lance_frag_reuse", breakIt: func(t *testing.T, dir string) {
			rewriteLatest(t, dir, func(f *meta.ManifestFile) { f.Indices = append(f.Indices, fri(t, 0, 9, 10)) })
		}},
		{name: "FRI rows disagree", table: "plain", check: CheckFragReuse, object: "group 0", breakIt: func(t *testing.T, dir string) {
			rewriteLatest(t, dir, func(f *meta.ManifestFile) { f.Indices = append(f.Indices, fri(t, 7, 2, 11)) })
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := lancedb.CorpusDir(t, tc.table)
			wantOK(t, "before", run(t, dir, Options{Deep: tc.deep}))
			tc.breakIt(t, dir)
			wantCheck(t, run(t, dir, Options{Deep: tc.deep}), tc.check, tc.object)
		})
	}
}

// fri is an FRI whose one group says fragment old (10 rows, none deleted)
// was rewritten into fragment new with newRows rows.
func fri(t *testing.T, old, new, newRows uint64) *pb.IndexMetadata {
	t.Helper()
	addrs := roaring64.New()
	for i := uint64(0); i < 10; i++ {
		addrs.Add(old<<32 | i)
	}
	raw, err := addrs.ToBytes()
	if err != nil {
		t.Fatal(err)
	}
	d := &pb.FragmentReuseIndexDetails{Content: &pb.FragmentReuseIndexDetails_Inline{Inline: &pb.FragmentReuseIndexDetails_InlineContent{
		Versions: []*pb.FragmentReuseIndexDetails_Version{{DatasetVersion: 3, Groups: []*pb.FragmentReuseIndexDetails_Group{{
			ChangedRowAddrs: raw,
			OldFragments:    []*pb.FragmentReuseIndexDetails_FragmentDigest{{Id: old, PhysicalRows: 10}},
			NewFragments:    []*pb.FragmentReuseIndexDetails_FragmentDigest{{Id: new, PhysicalRows: newRows}},
		}}}},
	}}}
	v, err := proto.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := meta.NewUUID()
	return &pb.IndexMetadata{Uuid: u, Name: meta.FragReuseIndexName, DatasetVersion: 3,
		IndexDetails: &anypb.Any{TypeUrl: meta.TypeURLFragReuse, Value: v}}
}

// TestFRIConsistentPasses: a well-formed FRI (old fragment gone, new one
// live with the surviving rows) is no violation, so the FRI checks are
// not simply always failing.
func TestFRIConsistentPasses(t *testing.T) {
	dir := lancedb.CorpusDir(t, "plain")
	rewriteLatest(t, dir, func(f *meta.ManifestFile) {
		// Fragment 2 stands in for the output of rewriting a gone
		// fragment 7 with 10 live rows.
		f.Manifest.MaxFragmentId = proto.Uint32(7)
		f.Indices = append(f.Indices, fri(t, 7, 2, 10))
	})
	wantOK(t, "consistent FRI", run(t, dir, Options{}))
}

// TestDeepIndexContent: deep verify reports each index's content check;
// a btree whose fragment bitmap leaves out a fragment it holds rows of is
// an index_content violation naming the index; an index kind compactord
// cannot read is a warning, not a violation.
func TestDeepIndexContent(t *testing.T) {
	dir := lancedb.CorpusDir(t, "indexed")
	if rep := run(t, dir, Options{}); rep.IndexContent != nil {
		t.Errorf("shallow verify checked index content: %+v", rep.IndexContent)
	}
	if rep := run(t, dir, Options{Deep: true}); rep.IndexContent != nil {
		t.Errorf("deep verify without the checker checked index content: %+v", rep.IndexContent)
	}
	deep := Options{Deep: true, IndexContent: index.ContentChecker}
	rep := run(t, dir, deep)
	wantOK(t, "indexed", rep)
	if len(rep.IndexContent) != 2 {
		t.Fatalf("index content: %+v", rep.IndexContent)
	}
	for _, c := range rep.IndexContent {
		if !c.Checked || c.Entries == 0 || len(c.Problems) != 0 {
			t.Errorf("index content: %+v", c)
		}
	}
	rewriteLatest(t, dir, func(f *meta.ManifestFile) {
		for _, ix := range f.Indices {
			switch ix.GetName() {
			case "id_idx":
				bm, _, err := meta.FragmentBitmap(ix)
				if err != nil || !bm.Contains(0) {
					t.Fatalf("id_idx bitmap %v %v", bm, err)
				}
				bm.Remove(0)
				ix.FragmentBitmap = meta.EncodeBitmap(bm)
			case "cat_idx":
				ix.IndexDetails = &anypb.Any{TypeUrl: "/lance.table.ZoneMapIndexDetails"}
			}
		}
	})
	rep = run(t, dir, deep)
	wantCheck(t, rep, CheckIndexContent, "index id_idx")
	if len(rep.Violations) != 1 || !strings.Contains(rep.Violations[0].Message, "the segment does not cover (fragments [0]; e.g. row 0:0)") {
		t.Errorf("violations %v", rep.Violations)
	}
	if len(rep.Warnings) != 1 || rep.Warnings[0].Check != CheckIndexContent || !strings.Contains(rep.Warnings[0].Object, "cat_idx") {
		t.Errorf("warnings %v", rep.Warnings)
	}
}

// TestDeepDecodesVectorIndexFiles: a vector index segment's index.idx and
// auxiliary.idx are Lance files deep verify decodes like a scalar
// segment's: on LanceDB's IVF_PQ and IVF_HNSW_SQ indexes deep verify
// passes, and an auxiliary.idx whose footer no longer points at its
// column metadata (its size unchanged, so the shallow check passes) is a
// violation naming it.
func TestDeepDecodesVectorIndexFiles(t *testing.T) {
	lancedb.Require(t)
	dir := t.TempDir()
	lancedb.MustRun(t, lancedb.Program{URI: dir, Steps: []lancedb.Step{
		lancedb.Create(lancedb.VectorSchema, lancedb.VectorRows(0, 600, "v")),
		lancedb.CreateVectorIndex("vec", "ivf_pq", "pq_idx", map[string]any{"numPartitions": 2, "numSubVectors": 4}),
		lancedb.Add(lancedb.VectorRows(600, 700, "v")),
	}})
	table := filepath.Join(dir, "t.lance")
	lancedb.MustRun(t, lancedb.Program{URI: dir, Steps: []lancedb.Step{
		lancedb.CreateVectorIndex("vec", "ivf_hnsw_sq", "hnsw_idx", map[string]any{"numPartitions": 1}),
	}})
	wantOK(t, "vector", run(t, table, Options{Deep: true}))

	aux, _ := filepath.Glob(filepath.Join(table, "_indices", "*", "auxiliary.idx"))
	if len(aux) != 2 {
		t.Fatalf("auxiliary.idx files: %v", aux)
	}
	data, err := os.ReadFile(aux[0])
	if err != nil {
		t.Fatal(err)
	}
	// The footer's first field, the column metadata's start, now past
	// the end of the file.
	binary.LittleEndian.PutUint64(data[len(data)-40:], uint64(len(data))*2)
	if err := os.WriteFile(aux[0], data, 0o644); err != nil {
		t.Fatal(err)
	}
	wantOK(t, "vector, shallow", run(t, table, Options{}))
	rep := run(t, table, Options{Deep: true})
	wantCheck(t, rep, CheckIndex, filepath.Base(filepath.Dir(aux[0]))+"/auxiliary.idx")
	if len(rep.Violations) != 1 || !strings.Contains(rep.Violations[0].Message, "does not decode") {
		t.Errorf("violations %v", rep.Violations)
	}
}
