package index

import (
	"bufio"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/format/file"
	"github.com/compactord/compactord/internal/fri"
	"github.com/compactord/compactord/internal/inspect"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/scan"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

// ghostFixture is the table of the ghost-row test, built by LanceDB:
// fragments 0..3 of ids 0..39 (cat = id % 4), a btree id_idx and a bitmap
// cat_idx over all four, then fragment 1 (ids 10..19) fully deleted (it
// leaves the manifest, its rows stay in both indexes) and ids 3, 25 and 33
// deleted through deletion vectors.
func ghostFixture(t *testing.T) (*lancedb.Fixture, map[int64]bool) {
	t.Helper()
	dir := t.TempDir()
	f := &lancedb.Fixture{URI: dir, Table: "t", Dir: filepath.Join(dir, "t.lance")}
	f.Run(t,
		lancedb.Create(lancedb.BasicSchema, lancedb.BasicRows(0, 10)),
		lancedb.Add(lancedb.BasicRows(10, 20)), lancedb.Add(lancedb.BasicRows(20, 30)), lancedb.Add(lancedb.BasicRows(30, 40)),
		lancedb.CreateIndex("id", "btree", "id_idx"), lancedb.CreateIndex("cat", "bitmap", "cat_idx"),
		lancedb.Delete("id >= 10 AND id < 20"), lancedb.Delete("id = 3 OR id = 25 OR id = 33"))
	deleted := map[int64]bool{3: true, 25: true, 33: true}
	for i := int64(10); i < 20; i++ {
		deleted[i] = true
	}
	return f, deleted
}

// deferredCompaction commits, the way a deferred compaction does, a
// Rewrite of the live rows of fragments olds (ascending) into one new
// fragment, with an FRI version carrying the read's removed fragments.
func deferredCompaction(t *testing.T, h *table.Handle, olds []uint64) (*fri.Version, uint64) {
	t.Helper()
	ctx := t.Context()
	read, naming, err := h.ReadForWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m := read.Manifest
	prev, err := fri.Load(ctx, h.Bucket, read)
	if err != nil {
		t.Fatal(err)
	}
	v, err := table.FileVersion(m)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := scan.Open(ctx, h.Bucket, scan.Options{Version: m.GetVersion()})
	if err != nil {
		t.Fatal(err)
	}
	name := table.DataFileName()
	key := meta.DataKey(name)
	wc, err := h.Bucket.NewWriter(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	bw := bufio.NewWriter(wc)
	w, err := file.NewWriter(bw, m.GetFields(), file.WriterOptions{Version: v})
	if err != nil {
		t.Fatal(err)
	}
	var rows uint64
	var oldFrags []fri.OldFragment
	var oldPB []*pb.DataFragment
	for _, id := range olds {
		for _, f := range m.GetFragments() {
			if f.GetId() == id {
				oldPB = append(oldPB, f)
			}
		}
	}
	deleted := map[uint64]*roaring.Bitmap{}
	err = tbl.Batches(ctx, func(b *scan.Batch) error {
		if !slices.Contains(olds, b.Fragment) {
			return nil
		}
		if deleted[b.Fragment] == nil {
			deleted[b.Fragment] = roaring.New()
		}
		live := map[int]bool{}
		for _, r := range b.Live {
			live[r] = true
		}
		for r := 0; r < b.NumRows; r++ {
			if !live[r] {
				deleted[b.Fragment].Add(uint32(b.Offset) + uint32(r))
			}
		}
		out := &file.Batch{NumRows: len(b.Live)}
		for _, c := range b.Columns {
			out.Columns = append(out.Columns, c.Take(b.Live))
		}
		rows += uint64(len(b.Live))
		return w.Write(out)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := wc.Close(); err != nil {
		t.Fatal(err)
	}
	for _, f := range oldPB {
		oldFrags = append(oldFrags, fri.OldFragment{ID: f.GetId(), PhysicalRows: f.GetPhysicalRows(), Deleted: deleted[f.GetId()]})
	}
	newID := uint64(m.GetMaxFragmentId()) + 1
	g, err := fri.BuildGroup(oldFrags, []fri.Digest{{ID: newID, PhysicalRows: rows}})
	if err != nil {
		t.Fatal(err)
	}
	ver := fri.Version{DatasetVersion: m.GetVersion(), Groups: []fri.Group{g}, Removed: fri.RemovedFragments(read, prev)}
	var prevMeta *pb.IndexMetadata
	if prev != nil {
		prevMeta = prev.Meta
	}
	fm, keys, err := fri.AppendVersion(ctx, h.Bucket, prev, prevMeta, ver, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	nf := &pb.DataFragment{Id: newID, Files: []*pb.DataFile{table.NewDataFile(name, v, w)}, PhysicalRows: rows}
	txn := commit.NewTransaction(m.GetVersion())
	txn.Operation = &pb.Transaction_Rewrite_{Rewrite: &pb.Transaction_Rewrite{Groups: []*pb.Transaction_Rewrite_RewriteGroup{{OldFragments: oldPB, NewFragments: []*pb.DataFragment{nf}}}}}
	cr, err := h.Committer.Commit(ctx, &commit.Txn{Read: read, Naming: naming, Transaction: txn, Files: append(keys, key), Extra: commit.Extra{FragReuse: fm}})
	if err != nil {
		t.Fatal(err)
	}
	return &ver, cr.Version
}

func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(out, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func mustRead(t *testing.T, h *table.Handle) *meta.ManifestFile {
	t.Helper()
	f, _, err := h.ReadForWrite(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// externalizeFRI replaces the FRI by one with the same content in
// _indices/{uuid}/details.binpb (a new uuid, as every FRI change has).
func externalizeFRI(t *testing.T, h *table.Handle) {
	t.Helper()
	ctx := t.Context()
	read, naming, err := h.ReadForWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old := meta.FindIndex(read.Indices, meta.FragReuseIndexName)[0]
	content, err := meta.FragReuseContent(ctx, h.Bucket, old)
	if err != nil {
		t.Fatal(err)
	}
	data, err := proto.Marshal(content)
	if err != nil {
		t.Fatal(err)
	}
	u, id := meta.NewUUID()
	key := meta.IndexDir(id) + fri.DetailsFileName
	if err := h.Bucket.Put(ctx, key, data); err != nil {
		t.Fatal(err)
	}
	d, err := proto.Marshal(&pb.FragmentReuseIndexDetails{Content: &pb.FragmentReuseIndexDetails_External{External: &pb.ExternalFile{Path: fri.DetailsFileName, Size: uint64(len(data))}}})
	if err != nil {
		t.Fatal(err)
	}
	nm := proto.Clone(old).(*pb.IndexMetadata)
	nm.Uuid = u
	nm.IndexDetails = &anypb.Any{TypeUrl: meta.TypeURLFragReuse, Value: d}
	txn := commit.NewTransaction(read.Manifest.GetVersion())
	txn.Operation = &pb.Transaction_CreateIndex_{CreateIndex: &pb.Transaction_CreateIndex{NewIndices: []*pb.IndexMetadata{nm}, RemovedIndices: []*pb.IndexMetadata{old}}}
	if _, err := h.Committer.Commit(ctx, &commit.Txn{Read: read, Naming: naming, Transaction: txn, Files: []string{key}}); err != nil {
		t.Fatal(err)
	}
}

// indexAddrs reads every entry of every segment of index name in version
// f, as stored.
func indexAddrs(t *testing.T, ctx context.Context, h *table.Handle, f *meta.ManifestFile, name string, full func(uint32) (uint64, bool)) []uint64 {
	t.Helper()
	var out []uint64
	for _, s := range meta.FindIndex(f.Indices, name) {
		e, err := ReadSegment(ctx, h.Bucket, s, full)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e.Addrs...)
	}
	return out
}

// idAt maps every live row address of version f to its id.
func idAt(t *testing.T, ctx context.Context, h *table.Handle, f *meta.ManifestFile) map[uint64]int64 {
	t.Helper()
	tbl, err := scan.Open(ctx, h.Bucket, scan.Options{Version: f.Manifest.GetVersion(), Columns: []string{"id"}})
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint64]int64{}
	err = tbl.Batches(ctx, func(b *scan.Batch) error {
		for _, r := range b.Live {
			out[meta.RowAddr(uint32(b.Fragment), uint32(b.Offset)+uint32(r))] = b.Columns[0].Int64s()[r]
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRemapGhostRowsOnLanceDBTable is the ghost-row test at the remap
// level (lance#7374) on a table LanceDB built: after a deferred compaction
// of fragments 2 and 3, the FRI version records the fully deleted
// fragment 1 in removed_fragments and the remap maps every address of it
// to deleted (an end-to-end search alone would pass with the bug: LanceDB
// masks the dead fragment by liveness). LanceDB reads the FRI with the
// additive field and answers indexed filters right; after the physical
// remap no segment holds an address of fragment 1, 2 or 3, every entry
// names the row it did before, LanceDB reports 0 unindexed rows, the FRI
// is trimmed away, and LanceDB's own optimize() runs and changes no row.
func TestRemapGhostRowsOnLanceDBTable(t *testing.T) {
	lancedb.Require(t)
	ctx := t.Context()
	f, deleted := ghostFixture(t)
	h := openHandle(t, f.Dir)
	before, _, err := h.ReadForWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	beforeIDs := idAt(t, ctx, h, before)

	ver, _ := deferredCompaction(t, h, []uint64{2, 3})
	if !ver.Removed.Equals(roaring.BitmapOf(1)) {
		t.Fatalf("removed_fragments = %v, want [1]", ver.Removed.ToArray())
	}
	after, _, err := h.ReadForWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ix, err := fri.Load(ctx, h.Bucket, after)
	if err != nil || ix == nil {
		t.Fatalf("Load: %v, %v", ix, err)
	}
	remap := ix.Remapper(0)
	// The ghost rows: every address of fragment 1 maps to deleted.
	for off := uint32(0); off < 10; off++ {
		if a, ok := remap(meta.RowAddr(1, off)); ok {
			t.Fatalf("ghost row: 1:%d passes through the FRI as %#x", off, a)
		}
	}
	afterIDs := idAt(t, ctx, h, after)
	// Every index entry remaps to the row it named, or to deleted when that
	// row was deleted: no entry of a deleted row survives the remap.
	full := func(frag uint32) (uint64, bool) { return ix.PhysicalRows(frag) }
	for _, name := range []string{"id_idx", "cat_idx"} {
		n := 0
		for _, a := range indexAddrs(t, ctx, h, after, name, full) {
			na, ok := remap(a)
			oldID, wasLive := beforeIDs[a]
			switch {
			case !wasLive && ok && afterIDs[na] != 0:
				t.Errorf("%s: entry %#x of a deleted row remaps to live row %#x (id %d)", name, a, na, afterIDs[na])
			case wasLive && !ok:
				t.Errorf("%s: entry %#x (id %d) remaps to deleted", name, a, oldID)
			case wasLive && afterIDs[na] != oldID:
				t.Errorf("%s: entry %#x (id %d) remaps to %#x (id %d)", name, a, oldID, na, afterIDs[na])
			}
			if ok {
				n++
			}
		}
		if want := 40 - len(deleted); n < want {
			t.Errorf("%s: %d entries survive the remap, want at least %d", name, n, want)
		}
	}

	// inspect shows the version with its removed fragments.
	doc, err := inspect.Build(ctx, h.Bucket, 0)
	if err != nil {
		t.Fatal(err)
	}
	if doc.FragReuse == nil || len(doc.FragReuse.Versions) != 1 || !slices.Equal(doc.FragReuse.Versions[0].RemovedFragments, []uint32{1}) {
		t.Errorf("inspect: frag_reuse %+v, want one version with removed_fragments [1]", doc.FragReuse)
	}

	// LanceDB opens the table with the FRI (field 4 included) and answers
	// indexed filters from the remapped-at-load indexes.
	q := indexedQueries(40, deleted)
	check := func(when string) {
		var order []string
		steps := []lancedb.Step{lancedb.IndexStats("id_idx"), lancedb.IndexStats("cat_idx"), lancedb.CountRows("")}
		for w := range q {
			order = append(order, w)
			steps = append(steps, lancedb.ReadRows(lancedb.ReadOpts{Where: w}))
		}
		steps = append(steps, lancedb.ReadRows(lancedb.ReadOpts{Where: "id >= 10 AND id < 20"}), lancedb.ReadRows(lancedb.ReadOpts{Where: "cat = 2"}))
		res := f.Run(t, steps...)
		for i := range 2 {
			s := stats(t, res, i)
			t.Logf("%s: index %d stats %+v", when, i, s)
			if s.NumUnindexedRows != 0 {
				t.Errorf("%s: index %d: %d unindexed rows, want 0", when, i, s.NumUnindexedRows)
			}
		}
		if n, _ := res.Count(2); n != int64(40-len(deleted)) {
			t.Errorf("%s: %d rows, want %d", when, n, 40-len(deleted))
		}
		for k, w := range order {
			if got := idsOf(t, res, 3+k); !sameIDs(got, q[w]) {
				t.Errorf("%s: where %s: %v, want %v", when, w, got, q[w])
			}
		}
		if got := idsOf(t, res, 3+len(order)); len(got) != 0 {
			t.Errorf("%s: the fully deleted fragment's ids come back: %v", when, got)
		}
		if got := idsOf(t, res, 4+len(order)); !sameIDs(got, want(0, 40, func(i int64) bool { return i%4 == 2 && !deleted[i] })) {
			t.Errorf("%s: cat = 2: %v", when, got)
		}
	}
	check("deferred")
	lookups := func(when string) {
		t.Helper()
		f := mustRead(t, h)
		ids := idAt(t, ctx, h, f)
		for _, tc := range []struct {
			index, key string
			want       []int64
		}{
			{"id_idx", "15", nil}, // a row of the fully deleted fragment
			{"id_idx", "25", nil}, // dropped by the compaction
			{"id_idx", "3", nil},  // deleted in place
			{"id_idx", "35", []int64{35}},
			{"id_idx", "4", []int64{4}},
			{"cat_idx", "2", want(0, 40, func(i int64) bool { return i%4 == 2 && !deleted[i] })},
			{"cat_idx", "1", want(0, 40, func(i int64) bool { return i%4 == 1 && !deleted[i] })},
		} {
			for _, only := range []bool{false, true} {
				res, err := Lookup(ctx, h.Bucket, f, tc.index, tc.key, LookupOptions{IndexOnly: only})
				if err != nil {
					t.Fatal(err)
				}
				var got []int64
				for _, a := range res.Addrs {
					id, ok := ids[a]
					if !ok {
						t.Errorf("%s: lookup %s = %s returns %#x, no live row", when, tc.index, tc.key, a)
					}
					got = append(got, id)
				}
				slices.Sort(got)
				if !sameIDs(got, tc.want) {
					t.Errorf("%s: lookup %s = %s (index only %v): ids %v, want %v", when, tc.index, tc.key, only, got, tc.want)
				}
			}
		}
	}
	lookups("deferred")
	// The same FRI with its details in an external file, as Lance writes
	// them above 200 KiB.
	externalizeFRI(t, h)
	check("deferred, external details")
	if ext, err := fri.Load(ctx, h.Bucket, mustRead(t, h)); err != nil || ext == nil || !ext.Versions[0].Removed.Equals(roaring.BitmapOf(1)) {
		t.Fatalf("external FRI: %v, %v", ext, err)
	}

	// LanceDB's own optimize() on a copy of the table as the deferred
	// compaction left it (FRI and all) runs and changes no row.
	cp := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
	cp.Dir = filepath.Join(cp.URI, "t.lance")
	copyDir(t, f.Dir, cp.Dir)
	opt := cp.Run(t, lancedb.ReadRows(lancedb.ReadOpts{}), lancedb.Optimize(lancedb.OptimizeOpts{}), lancedb.ReadRows(lancedb.ReadOpts{}), lancedb.IndexStats("id_idx"), lancedb.ReadRows(lancedb.ReadOpts{Where: "id >= 10 AND id < 20"}))
	o0, _ := opt.Rows(0)
	o2, _ := opt.Rows(2)
	b0, _ := lancedb.RowsByID(o0)
	b2, _ := lancedb.RowsByID(o2)
	if d := lancedb.DiffByID(b2, b0); d != "" || len(b0) != 40-len(deleted) {
		t.Errorf("optimize with the FRI in place: %d rows before, diff %s", len(b0), d)
	}
	if s := stats(t, opt, 3); s.NumUnindexedRows != 0 {
		t.Errorf("after LanceDB's optimize: %+v", s)
	}
	if got := idsOf(t, opt, 4); len(got) != 0 {
		t.Errorf("after LanceDB's optimize the fully deleted fragment's ids come back: %v", got)
	}

	// Physical remap, then the FRI trim.
	res, err := RemapIndexes(ctx, h, RemapJobOptions{Clock: clock.NewFake(time.UnixMilli(1_700_000_000_000))})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("remap: %+v trim %+v", res, res.Trim)
	if len(res.Indices) != 2 || res.Trim == nil || !res.Trim.Removed {
		t.Fatalf("remap result %+v, want both indexes remapped and the FRI removed", res)
	}
	final, _, err := h.ReadForWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(meta.FindIndex(final.Indices, meta.FragReuseIndexName)) != 0 {
		t.Error("the FRI is still there after the trim")
	}
	finalIDs := idAt(t, ctx, h, final)
	for _, name := range []string{"id_idx", "cat_idx"} {
		segs := meta.FindIndex(final.Indices, name)
		for _, s := range segs {
			if s.GetDatasetVersion() != res.ReadVersion && s.GetDatasetVersion() < res.ReadVersion {
				t.Errorf("%s: segment at dataset_version %d, want >= %d", name, s.GetDatasetVersion(), res.ReadVersion)
			}
			bm, _, _ := meta.FragmentBitmap(s)
			if bm.Contains(1) || bm.Contains(2) || bm.Contains(3) {
				t.Errorf("%s: bitmap %v names a gone fragment", name, bm.ToArray())
			}
		}
		addrs := indexAddrs(t, ctx, h, final, name, nil)
		// Fragment 1's 10 rows and the compaction's 2 deleted rows are
		// gone; id 3, deleted in place in fragment 0, stays (LanceDB masks
		// it with the deletion vector, as in every index it builds).
		if len(addrs) != 28 {
			t.Errorf("%s: %d entries after the remap, want 28", name, len(addrs))
		}
		for _, a := range addrs {
			frag, _ := meta.SplitRowAddr(a)
			if frag >= 1 && frag <= 3 {
				t.Errorf("%s: entry %#x in gone fragment %d", name, a, frag)
			}
			if _, live := finalIDs[a]; !live && a != meta.RowAddr(0, 3) {
				t.Errorf("%s: entry %#x is no live row", name, a)
			}
		}
	}
	check("remapped")
	lookups("remapped")

	// LanceDB's own optimize runs on the result and changes no row.
	want := lancedb.ReadOpts{}
	out := f.Run(t, lancedb.ReadRows(want), lancedb.Optimize(lancedb.OptimizeOpts{}), lancedb.ReadRows(want), lancedb.IndexStats("id_idx"))
	r0, _ := out.Rows(0)
	r2, _ := out.Rows(2)
	m0, _ := lancedb.RowsByID(r0)
	m2, _ := lancedb.RowsByID(r2)
	if d := lancedb.DiffByID(m2, m0); d != "" {
		t.Errorf("optimize changed rows: %s", d)
	}
	check("optimized")
}
