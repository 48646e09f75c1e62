package index

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"google.golang.org/protobuf/proto"

	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/format/file"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

// checkAll runs CheckContent on the latest version and returns the
// results by index name.
func checkAll(t *testing.T, h *table.Handle) map[string]ContentCheck {
	t.Helper()
	out := map[string]ContentCheck{}
	cs, err := CheckContent(t.Context(), h.Bucket, mustRead(t, h), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		out[c.Name] = c
	}
	return out
}

// idEntries are btree entries of id values at row addresses.
func idEntries(ids []int64, addrs []uint64) *Entries {
	v := &file.Array{Type: file.DataType{Kind: file.KindInt64}, Len: len(ids)}
	for _, id := range ids {
		v.Values = le.AppendUint64(v.Values, uint64(id))
	}
	return &Entries{Values: v, Addrs: addrs}
}

// replaceSegments commits a CreateIndex replacing every segment of id_idx
// with btree segments of the given entries and fragment bitmaps.
func replaceSegments(t *testing.T, h *table.Handle, segs []*Entries, bitmaps []*roaring.Bitmap) {
	t.Helper()
	ctx := t.Context()
	read, naming, err := h.ReadForWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old := meta.FindIndex(read.Indices, "id_idx")
	var field *pb.Field
	for _, f := range read.Manifest.GetFields() {
		if f.GetName() == "id" {
			field = f
		}
	}
	op := &pb.Transaction_CreateIndex{RemovedIndices: old}
	var keys []string
	for i, e := range segs {
		w, err := WriteSegment(ctx, h.Bucket, KindBTree, field, e)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, w.Keys...)
		ix, err := SegmentMetadata("id_idx", old[0].GetFields(), KindBTree, old[0], read.Manifest.GetVersion(), bitmaps[i], w, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		op.NewIndices = append(op.NewIndices, ix)
	}
	txn := commit.NewTransaction(read.Manifest.GetVersion())
	txn.Operation = &pb.Transaction_CreateIndex_{CreateIndex: op}
	if _, err := h.Committer.Commit(ctx, &commit.Txn{Read: read, Naming: naming, Transaction: txn, Files: keys}); err != nil {
		t.Fatal(err)
	}
}

// TestCheckContentOnLanceDBTables: LanceDB's indexes on the ghost-row
// table (a fragment deleted whole, rows deleted through deletion vectors)
// agree with the data, the deleted rows counted as masked; so they do
// after a deferred compaction leaves an FRI pending, read through it.
func TestCheckContentOnLanceDBTables(t *testing.T) {
	lancedb.Require(t)
	f, _ := ghostFixture(t)
	h := openHandle(t, f.Dir)
	check := func(when string, masked uint64) {
		t.Helper()
		got := checkAll(t, h)
		for _, name := range []string{"id_idx", "cat_idx"} {
			c := got[name]
			if !c.Checked || len(c.Problems) != 0 || c.Entries != 40 {
				t.Errorf("%s: %s: %+v", when, name, c)
			}
			if c.Masked != masked {
				t.Errorf("%s: %s masks %d entries, want %d", when, name, c.Masked, masked)
			}
		}
	}
	// Fragment 1's 10 rows and ids 3, 25 and 33.
	check("as LanceDB wrote it", 13)
	deferredCompaction(t, h, []uint64{2, 3})
	check("through a pending FRI", 13)
}

// TestCheckContentFindsDamage: each way a segment can disagree with the
// data is reported, naming the segment and the fragment.
func TestCheckContentFindsDamage(t *testing.T) {
	lancedb.Require(t)
	src, _ := ghostFixture(t)
	// The entries LanceDB's id_idx holds: id i at fragment i/10, offset
	// i%10, over fragments 0..3.
	var ids []int64
	var addrs []uint64
	for i := int64(0); i < 40; i++ {
		ids = append(ids, i)
		addrs = append(addrs, meta.RowAddr(uint32(i/10), uint32(i%10)))
	}
	all := roaring.BitmapOf(0, 1, 2, 3)
	cases := []struct {
		name    string
		segs    func() ([]*Entries, []*roaring.Bitmap)
		problem string
	}{
		{"intact", func() ([]*Entries, []*roaring.Bitmap) {
			return []*Entries{idEntries(ids, addrs)}, []*roaring.Bitmap{all}
		}, ""},
		{"wrong value", func() ([]*Entries, []*roaring.Bitmap) {
			v := slices.Clone(ids)
			v[22] = 999
			return []*Entries{idEntries(v, addrs)}, []*roaring.Bitmap{all}
		}, "1 entries hold a value that is not their row's (fragments [2]; e.g. row 2:2)"},
		{"missing row", func() ([]*Entries, []*roaring.Bitmap) {
			return []*Entries{idEntries(slices.Delete(slices.Clone(ids), 37, 38), slices.Delete(slices.Clone(addrs), 37, 38))}, []*roaring.Bitmap{all}
		}, "1 live rows of covered fragments have no entry (fragments [3]; e.g. row 3:7)"},
		{"duplicate", func() ([]*Entries, []*roaring.Bitmap) {
			return []*Entries{idEntries(append(slices.Clone(ids), 4), append(slices.Clone(addrs), addrs[4]))}, []*roaring.Bitmap{all}
		}, "1 row addresses appear more than once (fragments [0]; e.g. row 0:4)"},
		{"past the end", func() ([]*Entries, []*roaring.Bitmap) {
			return []*Entries{idEntries(append(slices.Clone(ids), 50), append(slices.Clone(addrs), meta.RowAddr(2, 10)))}, []*roaring.Bitmap{all}
		}, "1 entries point past their fragment's rows (fragments [2]; e.g. row 2:10)"},
		{"uncovered", func() ([]*Entries, []*roaring.Bitmap) {
			return []*Entries{idEntries(ids, addrs)}, []*roaring.Bitmap{roaring.BitmapOf(0, 1, 2)}
		}, "10 entries point into live fragments the segment does not cover (fragments [3]; e.g. row 3:0)"},
		{"two segments", func() ([]*Entries, []*roaring.Bitmap) {
			return []*Entries{idEntries(ids, addrs), idEntries(ids[:10], addrs[:10])}, []*roaring.Bitmap{all, roaring.BitmapOf(0)}
		}, "both cover fragment 0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "t.lance")
			copyDir(t, src.Dir, dir)
			h := openHandle(t, dir)
			segs, bms := c.segs()
			replaceSegments(t, h, segs, bms)
			got := checkAll(t, h)
			if cat := got["cat_idx"]; len(cat.Problems) != 0 {
				t.Errorf("cat_idx, untouched: %v", cat.Problems)
			}
			ps := got["id_idx"].Problems
			if c.problem == "" {
				if len(ps) != 0 {
					t.Fatalf("problems %v, want none", ps)
				}
				return
			}
			if len(ps) != 1 || !strings.Contains(ps[0], c.problem) || !strings.HasPrefix(ps[0], "segment") && !strings.HasPrefix(ps[0], "segments") {
				t.Fatalf("problems %q, want one containing %q", ps, c.problem)
			}
		})
	}
}

// labelFixture is a LanceDB table of 300 rows whose tags list<int32> hold
// id % 5 and id % 7 (null when id % 11 = 0), with a label-list index
// tags_idx, then id % 13 = 0 deleted.
func labelFixture(t *testing.T) *lancedb.Fixture {
	t.Helper()
	dir := t.TempDir()
	f := &lancedb.Fixture{URI: dir, Table: "t", Dir: filepath.Join(dir, "t.lance")}
	schema := []lancedb.Column{{Name: "id", Type: "int64"}, {Name: "tags", Type: "list<int32>", Nullable: true}}
	var rows []lancedb.Row
	for i := int64(0); i < 300; i++ {
		var tags any = []int32{int32(i % 5), int32(i % 7)}
		if i%11 == 0 {
			tags = nil
		}
		rows = append(rows, lancedb.Row{"id": i, "tags": tags})
	}
	f.Run(t, lancedb.Create(schema, rows[:150]), lancedb.Add(rows[150:]), lancedb.CreateIndex("tags", "label_list", "tags_idx"), lancedb.Delete("id % 13 = 0"))
	return f
}

// TestCheckContentLabelList: LanceDB's label-list index agrees with the
// data; a copy missing one (label, row) entry, and one holding a label a
// row's list does not, are each reported.
func TestCheckContentLabelList(t *testing.T) {
	lancedb.Require(t)
	src := labelFixture(t)
	h := openHandle(t, src.Dir)
	c := checkAll(t, h)["tags_idx"]
	// Entries: per non-null row, its distinct labels (one when id%5 ==
	// id%7, i.e. id%35 < 5).
	var entries, masked uint64
	for i := 0; i < 300; i++ {
		if i%11 == 0 {
			continue
		}
		n := uint64(2)
		if i%35 < 5 {
			n = 1
		}
		entries += n
		if i%13 == 0 {
			masked += n
		}
	}
	if c.Kind != KindLabelList || !c.Checked || len(c.Problems) != 0 || c.Entries != entries || c.Masked != masked {
		t.Fatalf("LanceDB's label list: %+v, want %d entries, %d masked", c, entries, masked)
	}
	// The (label, row) pairs LanceDB's segment holds.
	read := mustRead(t, h)
	seg := meta.FindIndex(read.Indices, "tags_idx")[0]
	key := meta.IndexDir(meta.UUIDString(seg.GetUuid())) + BitmapLookupFile
	bm, err := ReadBitmap(readerOf(t, filepath.Join(src.Dir, key)))
	if err != nil {
		t.Fatal(err)
	}
	pairs, err := bm.Entries(nil)
	if err != nil {
		t.Fatal(err)
	}
	var labels []int64
	for i := range pairs.Len() {
		labels = append(labels, int64(int32(le.Uint32(pairs.Values.Values[4*i:]))))
	}
	int32Entries := func(labels []int64, addrs []uint64) *Entries {
		v := &file.Array{Type: file.DataType{Kind: file.KindInt32}, Len: len(labels)}
		for _, l := range labels {
			v.Values = le.AppendUint32(v.Values, uint32(l))
		}
		return &Entries{Values: v, Addrs: addrs}
	}
	// Row 1 (fragment 0, offset 1) holds labels 1 and 1: one entry. Row
	// 2's labels are 2 and 2 as well; give it label 6 too.
	drop := slices.IndexFunc(pairs.Addrs, func(a uint64) bool { return a == meta.RowAddr(0, 1) })
	for _, c := range []struct {
		name    string
		e       *Entries
		problem string
	}{
		{"missing label", int32Entries(slices.Delete(slices.Clone(labels), drop, drop+1), slices.Delete(slices.Clone(pairs.Addrs), drop, drop+1)),
			"1 live rows lack the entry of one of their labels (fragments [0]; e.g. row 0:1)"},
		{"extra label", int32Entries(append(slices.Clone(labels), 6), append(slices.Clone(pairs.Addrs), meta.RowAddr(0, 2))),
			"1 entries hold a value that is not their row's (fragments [0]; e.g. row 0:2)"},
		// Null lists: ids % 11 = 0 not deleted (id % 13 != 0), 25 of them
		// in fragments 0 and 1; the segment records none.
		{"lost null lists", &Entries{Values: int32Entries(labels, pairs.Addrs).Values, Addrs: pairs.Addrs, Keys: &pb.Field{Name: "item", LogicalType: "int32", Nullable: true}},
			"25 live rows are null lists the segment does not mark, or marked rows are not (fragments [0 1]; e.g. row 0:11)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "t.lance")
			copyDir(t, src.Dir, dir)
			h := openHandle(t, dir)
			ctx := t.Context()
			read, naming, err := h.ReadForWrite(ctx)
			if err != nil {
				t.Fatal(err)
			}
			old := meta.FindIndex(read.Indices, "tags_idx")
			var buf memBuf
			write := func() error { _, err := WriteBitmap(&buf, &pb.Field{LogicalType: "int32"}, c.e); return err }
			if c.e.Keys != nil {
				write = func() error { _, err := WriteLabelList(&buf, c.e); return err }
			}
			if err := write(); err != nil {
				t.Fatal(err)
			}
			u, id := meta.NewUUID()
			k := meta.IndexDir(id) + BitmapLookupFile
			if err := h.Bucket.Put(ctx, k, buf.b); err != nil {
				t.Fatal(err)
			}
			bits, _, _ := meta.FragmentBitmap(old[0])
			ix, err := SegmentMetadata("tags_idx", old[0].GetFields(), KindLabelList, old[0], read.Manifest.GetVersion(), bits,
				&Written{UUID: u, Files: []*pb.IndexFile{{Path: BitmapLookupFile, SizeBytes: uint64(len(buf.b))}}}, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			txn := commit.NewTransaction(read.Manifest.GetVersion())
			txn.Operation = &pb.Transaction_CreateIndex_{CreateIndex: &pb.Transaction_CreateIndex{NewIndices: []*pb.IndexMetadata{ix}, RemovedIndices: old}}
			if _, err := h.Committer.Commit(ctx, &commit.Txn{Read: read, Naming: naming, Transaction: txn, Files: []string{k}}); err != nil {
				t.Fatal(err)
			}
			ps := checkAll(t, h)["tags_idx"].Problems
			if len(ps) != 1 || !strings.Contains(ps[0], c.problem) {
				t.Fatalf("problems %q, want one containing %q", ps, c.problem)
			}
		})
	}
}

// rowIDFixture is a LanceDB table of 400 rows in two fragments: a vector
// v (null when id % 17 = 0) with an IVF_FLAT index v_idx, an IVF_HNSW_SQ
// index h_idx and an IVF_PQ index p_idx, and a text s (null, empty, stop
// words only or one word) with a full-text index s_idx; then id % 9 = 0
// deleted and 100 rows appended that no index covers.
func rowIDFixture(t *testing.T) *lancedb.Fixture {
	t.Helper()
	dir := t.TempDir()
	f := &lancedb.Fixture{URI: dir, Table: "t", Dir: filepath.Join(dir, "t.lance")}
	schema := []lancedb.Column{{Name: "id", Type: "int64"}, {Name: "v", Type: "vector[4]", Nullable: true}, {Name: "s", Type: "utf8", Nullable: true}}
	var rows []lancedb.Row
	for i := int64(0); i < 500; i++ {
		var v any = []float32{float32(i), 1, 2, float32(i % 3)}
		if i%17 == 0 {
			v = nil
		}
		var s any = "w" + string(rune('a'+i%5))
		switch {
		case i%7 == 0:
			s = nil
		case i%13 == 0:
			s = ""
		case i%19 == 0:
			s = "the a of"
		}
		rows = append(rows, lancedb.Row{"id": i, "v": v, "s": s})
	}
	f.Run(t, lancedb.Create(schema, rows[:200]), lancedb.Add(rows[200:400]),
		lancedb.CreateIndex("v", "ivf_flat", "v_idx"), lancedb.CreateIndex("v", "ivf_hnsw_sq", "h_idx"), lancedb.CreateIndex("v", "ivf_pq", "p_idx"), lancedb.CreateIndex("s", "fts", "s_idx"),
		lancedb.Delete("id % 9 = 0"), lancedb.Add(rows[400:]))
	return f
}

// recoverSegment commits a copy of index name's only segment (its files
// under a new uuid) with the fragment bitmap bits, replacing it.
func recoverSegment(t *testing.T, h *table.Handle, dir, name string, bits *roaring.Bitmap) {
	t.Helper()
	ctx := t.Context()
	read, naming, err := h.ReadForWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old := meta.FindIndex(read.Indices, name)[0]
	u, id := meta.NewUUID()
	var keys []string
	for _, f := range old.GetFiles() {
		data, err := os.ReadFile(filepath.Join(dir, meta.IndexDir(meta.UUIDString(old.GetUuid())), f.GetPath()))
		if err != nil {
			t.Fatal(err)
		}
		k := meta.IndexDir(id) + f.GetPath()
		if err := h.Bucket.Put(ctx, k, data); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	nm := proto.Clone(old).(*pb.IndexMetadata)
	nm.Uuid = u
	nm.FragmentBitmap = meta.EncodeBitmap(bits)
	txn := commit.NewTransaction(read.Manifest.GetVersion())
	txn.Operation = &pb.Transaction_CreateIndex_{CreateIndex: &pb.Transaction_CreateIndex{NewIndices: []*pb.IndexMetadata{nm}, RemovedIndices: []*pb.IndexMetadata{old}}}
	if _, err := h.Committer.Commit(ctx, &commit.Txn{Read: read, Naming: naming, Transaction: txn, Files: keys}); err != nil {
		t.Fatal(err)
	}
}

// TestCheckContentRowIDs: the row ids of LanceDB's vector and full-text
// indexes point at live rows of the fragments they cover (null vectors
// unindexed, rows without tokens without a doc, deleted rows masked),
// also through a pending FRI; a vector segment claiming a fragment it does
// not hold, or losing the claim to one it does, is reported.
func TestCheckContentRowIDs(t *testing.T) {
	lancedb.Require(t)
	src := rowIDFixture(t)
	var vecs, docs, vecMasked, docMasked uint64
	for i := 0; i < 400; i++ {
		if i%17 != 0 {
			vecs++
			if i%9 == 0 {
				vecMasked++
			}
		}
		if i%7 != 0 && i%13 != 0 && i%19 != 0 && i%5 != 4 { // "we" is a stop word
			docs++
			if i%9 == 0 {
				docMasked++
			}
		}
	}
	check := func(t *testing.T, h *table.Handle, when string) {
		t.Helper()
		got := checkAll(t, h)
		for name, want := range map[string][2]uint64{"v_idx": {vecs, vecMasked}, "h_idx": {vecs, vecMasked}, "p_idx": {vecs, vecMasked}, "s_idx": {docs, docMasked}} {
			c := got[name]
			if !c.Checked || len(c.Problems) != 0 || c.Entries != want[0] || c.Masked != want[1] || c.Note == "" {
				t.Errorf("%s: %s: %+v, want %d entries, %d masked", when, name, c, want[0], want[1])
			}
		}
	}
	h := openHandle(t, src.Dir)
	check(t, h, "as LanceDB wrote them")

	t.Run("fri", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "t.lance")
		copyDir(t, src.Dir, dir)
		h := openHandle(t, dir)
		deferredCompaction(t, h, []uint64{0, 1})
		check(t, h, "through a pending FRI")
	})
	t.Run("optimize", func(t *testing.T) {
		// LanceDB's own compaction, index remap and index optimize (the
		// appended fragment indexed): every row id still agrees.
		dir := t.TempDir()
		copyDir(t, filepath.Dir(src.Dir), dir)
		g := &lancedb.Fixture{URI: dir, Table: "t", Dir: filepath.Join(dir, "t.lance")}
		g.Run(t, lancedb.Optimize(lancedb.OptimizeOpts{}))
		gh := openHandle(t, g.Dir)
		for _, fr := range mustRead(t, gh).Manifest.GetFragments() {
			if fr.GetId() == 0 {
				t.Fatal("optimize did not compact fragment 0: the subtest checks nothing new")
			}
		}
		got := checkAll(t, gh)
		for _, name := range []string{"v_idx", "h_idx", "p_idx", "s_idx"} {
			if c := got[name]; !c.Checked || len(c.Problems) != 0 || c.Entries == 0 {
				t.Errorf("after optimize: %s: %+v", name, c)
			}
		}
	})
	for _, c := range []struct {
		name    string
		bits    *roaring.Bitmap
		problem string
	}{
		{"claims an unindexed fragment", roaring.BitmapOf(0, 1, 2), "live rows of covered fragments have no entry (fragments [2]; e.g. row 2:0)"},
		{"holds an uncovered fragment", roaring.BitmapOf(0), "entries point into live fragments the segment does not cover (fragments [1]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "t.lance")
			copyDir(t, src.Dir, dir)
			h := openHandle(t, dir)
			recoverSegment(t, h, dir, "v_idx", c.bits)
			ps := checkAll(t, h)["v_idx"].Problems
			if len(ps) != 1 || !strings.Contains(ps[0], c.problem) {
				t.Fatalf("problems %q, want one containing %q", ps, c.problem)
			}
		})
	}
}

// TestCheckContentTypesAndNulls: LanceDB's btree indexes on int64, utf8
// and float64 columns and a bitmap on int32, all with nulls, agree with
// the data; the rows deleted after the build are masked.
func TestCheckContentTypesAndNulls(t *testing.T) {
	lancedb.Require(t)
	dir := t.TempDir()
	steps := []lancedb.Step{lancedb.Create(lancedb.BasicSchema, nullyRows(0, 2000)), lancedb.Add(nullyRows(2000, 3000))}
	for _, x := range []struct{ col, typ, name string }{{"id", "btree", "id_idx"}, {"s", "btree", "s_idx"}, {"f", "btree", "f_idx"}, {"cat", "bitmap", "cat_idx"}} {
		steps = append(steps, lancedb.CreateIndex(x.col, x.typ, x.name))
	}
	steps = append(steps, lancedb.Delete("id % 10 = 3"))
	lancedb.MustRun(t, lancedb.Program{URI: dir, Table: "t", Steps: steps})
	got := checkAll(t, openHandle(t, filepath.Join(dir, "t.lance")))
	if len(got) != 4 {
		t.Fatalf("checked %d indexes", len(got))
	}
	for name, c := range got {
		if !c.Checked || len(c.Problems) != 0 || c.Entries != 3000 || c.Masked != 300 {
			t.Errorf("%s: %+v", name, c)
		}
	}
}

// TestCheckContentUnreadableSegment: a segment whose file is missing or
// does not decode is a problem naming the segment, not a failure of the
// check; the other index is still checked.
func TestCheckContentUnreadableSegment(t *testing.T) {
	lancedb.Require(t)
	src, _ := ghostFixture(t)
	for _, c := range []struct {
		name string
		file string
		edit func(p string) error
	}{
		{"missing", BTreeLookupFile, os.Remove},
		{"garbage", BTreeDataFile, func(p string) error { return os.WriteFile(p, []byte("not a lance file"), 0o644) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "t.lance")
			copyDir(t, src.Dir, dir)
			h := openHandle(t, dir)
			seg := meta.FindIndex(mustRead(t, h).Indices, "id_idx")[0]
			sid := meta.UUIDString(seg.GetUuid())
			if err := c.edit(filepath.Join(dir, meta.IndexDir(sid), c.file)); err != nil {
				t.Fatal(err)
			}
			got := checkAll(t, h)
			ps := got["id_idx"].Problems
			if len(ps) != 1 || !strings.HasPrefix(ps[0], "segment "+sid+" does not read") {
				t.Errorf("id_idx problems %q", ps)
			}
			if c := got["cat_idx"]; !c.Checked || len(c.Problems) != 0 || c.Entries != 40 {
				t.Errorf("cat_idx: %+v", c)
			}
		})
	}
}

// TestCheckContentUnknownLayout: a btree segment whose files are not
// page_data.lance and page_lookup.lance (another writer's layout) is not
// checked, with the reason, rather than reported as damaged.
func TestCheckContentUnknownLayout(t *testing.T) {
	lancedb.Require(t)
	f, _ := ghostFixture(t)
	h := openHandle(t, f.Dir)
	ctx := t.Context()
	read, naming, err := h.ReadForWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old := meta.FindIndex(read.Indices, "id_idx")[0]
	u, id := meta.NewUUID()
	k := meta.IndexDir(id) + "part_0_page_data.lance"
	if err := h.Bucket.Put(ctx, k, []byte("another layout")); err != nil {
		t.Fatal(err)
	}
	nm := proto.Clone(old).(*pb.IndexMetadata)
	nm.Uuid = u
	nm.Files = []*pb.IndexFile{{Path: "part_0_page_data.lance", SizeBytes: 14}}
	txn := commit.NewTransaction(read.Manifest.GetVersion())
	txn.Operation = &pb.Transaction_CreateIndex_{CreateIndex: &pb.Transaction_CreateIndex{NewIndices: []*pb.IndexMetadata{nm}, RemovedIndices: []*pb.IndexMetadata{old}}}
	if _, err := h.Committer.Commit(ctx, &commit.Txn{Read: read, Naming: naming, Transaction: txn, Files: []string{k}}); err != nil {
		t.Fatal(err)
	}
	c := checkAll(t, h)["id_idx"]
	if c.Checked || len(c.Problems) != 0 || !strings.Contains(c.Reason, "part_0_page_data.lance") {
		t.Errorf("id_idx: %+v", c)
	}
}
