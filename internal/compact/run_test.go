package compact

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/compactord/compactord/gen/lancefilepb"
	pb "github.com/compactord/compactord/gen/lancepb"

	"github.com/compactord/compactord/internal/fri"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/meta"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/testing/lancedb"
	"github.com/compactord/compactord/internal/testing/tables"
)

// openHandle opens the Lance table in dir (see package lancetable).
func openHandle(t testing.TB, dir string) *table.Handle {
	t.Helper()
	return tables.Open(t, dir)
}

// indexedWithDeletes is a table LanceDB builds with five fragments of ten
// rows: a btree on id and a bitmap on cat over fragments 0-2, fragments 3
// and 4 appended after, fragment 1 deleted whole (it leaves the manifest
// but stays in both index bitmaps) and rows deleted in fragments 0, 2 and 3.
func indexedWithDeletes(t *testing.T) (*lancedb.Fixture, map[int64]string) {
	t.Helper()
	steps := []lancedb.Step{
		lancedb.Create(lancedb.BasicSchema, lancedb.BasicRows(0, 10)),
		lancedb.Add(lancedb.BasicRows(10, 20)),
		lancedb.Add(lancedb.BasicRows(20, 30)),
		lancedb.CreateIndex("id", "btree", "id_idx"),
		lancedb.CreateIndex("cat", "bitmap", "cat_idx"),
		lancedb.Add(lancedb.BasicRows(30, 40)),
		lancedb.Add(lancedb.BasicRows(40, 50)),
		lancedb.Delete("id >= 10 AND id < 20"),
		lancedb.Delete("id = 3 OR id = 25 OR id = 26 OR id = 33"),
	}
	want := map[int64]string{}
	for id := int64(0); id < 50; id++ {
		want[id] = fmt.Sprintf("v%d", id)
	}
	for id := int64(10); id < 20; id++ {
		delete(want, id)
	}
	for _, id := range []int64{3, 25, 26, 33} {
		delete(want, id)
	}
	f := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
	f.Dir = f.URI + "/t.lance"
	f.Results = f.Run(t, steps...)
	return f, want
}

func readByID(t *testing.T, res *lancedb.Results, i int) map[int64]string {
	t.Helper()
	rows, err := res.Rows(i)
	if err != nil {
		t.Fatal(err)
	}
	got, err := lancedb.RowsByID(rows)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func filter(want map[int64]string, keep func(int64) bool) map[int64]string {
	out := map[int64]string{}
	for k, v := range want {
		if keep(k) {
			out[k] = v
		}
	}
	return out
}

// TestRunDeferredWithLanceDB: a deferred compaction of a LanceDB table is
// read by LanceDB with the same rows, through its indexes too (which
// LanceDB remaps through our FRI version at load), the fully deleted
// fragment is recorded as removed, and LanceDB's own optimize() runs on
// the result and changes no row.
func TestRunDeferredWithLanceDB(t *testing.T) {
	lancedb.Require(t)
	f, want := indexedWithDeletes(t)
	h := openHandle(t, f.Dir)
	res, err := Run(t.Context(), h, deferredOptions(), Env{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Commit == nil {
		t.Fatalf("nothing committed; plan %+v", res.Plan)
	}
	// Fragments 0 and 2 (indexed) and 3 and 4 (not) make two groups.
	if len(res.Plan.Groups) != 2 {
		t.Fatalf("groups %+v, want 2", res.Plan.Groups)
	}
	if fmt.Sprint(res.Removed) != "[1]" {
		t.Fatalf("removed fragments %v, want [1]", res.Removed)
	}
	if res.Stats.RowsDropped != 4 || res.Stats.FragmentsCopied != 1 {
		t.Fatalf("stats %+v: want 4 rows dropped and fragment 4 copied", res.Stats)
	}
	head, _, err := meta.ReadLatest(t.Context(), h.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(head.Manifest.GetFragments()); n != 2 {
		t.Fatalf("%d fragments after compaction, want 2", n)
	}
	ix, err := fri.Load(t.Context(), h.Bucket, head)
	if err != nil || ix == nil {
		t.Fatalf("FRI: %v, %v", ix, err)
	}
	if len(ix.Versions) != 1 || ix.Versions[0].Removed == nil || !ix.Versions[0].Removed.Contains(1) {
		t.Fatalf("FRI versions %+v: want one with fragment 1 removed", ix.Versions)
	}

	steps := []lancedb.Step{
		lancedb.ReadRows(lancedb.ReadOpts{}),
		lancedb.ReadRows(lancedb.ReadOpts{Where: "id = 5 OR id = 12 OR id = 25 OR id = 27 OR id = 35"}),
		lancedb.IndexStats("id_idx"),
		lancedb.ReadRows(lancedb.ReadOpts{Where: "cat = 1"}),
		lancedb.ReadRows(lancedb.ReadOpts{Where: "id >= 8 AND id < 22"}),
	}
	out := f.Run(t, steps...)
	check := func(i int, want map[int64]string) {
		t.Helper()
		if d := lancedb.DiffByID(readByID(t, out, i), want); d != "" {
			t.Errorf("step %d (%v): %s", i, steps[i], d)
		}
	}
	check(0, want)
	check(1, filter(want, func(k int64) bool { return k == 5 || k == 12 || k == 25 || k == 27 || k == 35 }))
	// LanceDB reads the index bitmaps through our FRI version: the new
	// fragment of fragments 0 and 2 counts as indexed (17 live rows), the
	// one of 3 and 4 does not (19).
	st, err := out.IndexStats(2)
	if err != nil || st == nil {
		t.Fatalf("index stats: %v %v", st, err)
	}
	if st.NumIndexedRows != 17 || st.NumUnindexedRows != 19 {
		t.Errorf("before optimize: %d indexed, %d unindexed rows; want 17 and 19", st.NumIndexedRows, st.NumUnindexedRows)
	}
	check(3, filter(want, func(k int64) bool { return k%4 == 1 }))
	check(4, filter(want, func(k int64) bool { return k >= 8 && k < 22 }))

	// LanceDB 0.39's optimize() remaps a btree through its own compaction
	// only, not through a pending FRI version, so the FRI is absorbed
	// first (compactord's index job does this after every compaction).
	if _, err := index.RemapIndexes(t.Context(), h, index.RemapJobOptions{}); err != nil {
		t.Fatal(err)
	}
	afterOptimize(t, f, want)
}

// afterOptimize runs LanceDB's optimize() and checks that it changed no
// row and that the indexes answer right afterwards.
func afterOptimize(t *testing.T, f *lancedb.Fixture, want map[int64]string) {
	t.Helper()
	where := "id = 5 OR id = 12 OR id = 25 OR id = 27 OR id = 35 OR id = 40"
	steps := []lancedb.Step{
		lancedb.Open(),
		lancedb.Optimize(lancedb.OptimizeOpts{}),
		lancedb.ReadRows(lancedb.ReadOpts{}),
		lancedb.ReadRows(lancedb.ReadOpts{Where: "cat = 2"}),
		lancedb.ReadRows(lancedb.ReadOpts{Where: where}),
		lancedb.IndexStats("id_idx"),
	}
	out := f.Run(t, steps...)
	check := func(i int, want map[int64]string) {
		t.Helper()
		if d := lancedb.DiffByID(readByID(t, out, i), want); d != "" {
			t.Errorf("after optimize, step %d (%v): %s", i, steps[i], d)
		}
	}
	check(2, want)
	check(3, filter(want, func(k int64) bool { return k%4 == 2 }))
	check(4, filter(want, func(k int64) bool { return k == 5 || k == 12 || k == 25 || k == 27 || k == 35 || k == 40 }))
	st, err := out.IndexStats(5)
	if err != nil || st == nil {
		t.Fatalf("index stats: %v %v", st, err)
	}
	if st.NumUnindexedRows != 0 {
		t.Errorf("after optimize: %d unindexed rows", st.NumUnindexedRows)
	}
}

// TestRunInlineWithLanceDB: with the remap inline, the Rewrite carries
// the remapped segments (new uuids, no FRI), LanceDB reads the same rows
// and answers through the indexes right, before and after its optimize().
func TestRunInlineWithLanceDB(t *testing.T) {
	lancedb.Require(t)
	f, want := indexedWithDeletes(t)
	h := openHandle(t, f.Dir)
	before, _, err := meta.ReadLatest(t.Context(), h.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	o := DefaultOptions()
	o.DeferRemap = false
	res, err := Run(t.Context(), h, o, Env{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Commit == nil || res.RewrittenIndices != 2 || res.FragReuse != nil {
		t.Fatalf("commit %v, %d segments remapped, FRI %v: want a commit remapping id_idx and cat_idx without an FRI", res.Commit != nil, res.RewrittenIndices, res.FragReuse)
	}
	head, _, err := meta.ReadLatest(t.Context(), h.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	if len(meta.FindIndex(head.Indices, meta.FragReuseIndexName)) != 0 {
		t.Fatal("inline remap left an FRI")
	}
	for _, name := range []string{"id_idx", "cat_idx"} {
		a, b := meta.FindIndex(before.Indices, name), meta.FindIndex(head.Indices, name)
		if len(a) != 1 || len(b) != 1 || meta.UUIDString(a[0].GetUuid()) == meta.UUIDString(b[0].GetUuid()) {
			t.Fatalf("%s: segments %v -> %v, want one with a new uuid", name, a, b)
		}
	}
	where := "id = 5 OR id = 12 OR id = 25 OR id = 27 OR id = 35"
	steps := []lancedb.Step{
		lancedb.ReadRows(lancedb.ReadOpts{}),
		lancedb.ReadRows(lancedb.ReadOpts{Where: where}),
		lancedb.ReadRows(lancedb.ReadOpts{Where: "cat = 1"}),
		lancedb.IndexStats("id_idx"),
	}
	out := f.Run(t, steps...)
	for i, w := range map[int]map[int64]string{0: want,
		1: filter(want, func(k int64) bool { return k == 5 || k == 12 || k == 25 || k == 27 || k == 35 }),
		2: filter(want, func(k int64) bool { return k%4 == 1 })} {
		if d := lancedb.DiffByID(readByID(t, out, i), w); d != "" {
			t.Errorf("step %d (%v): %s", i, steps[i], d)
		}
	}
	st, err := out.IndexStats(3)
	if err != nil || st == nil || st.NumIndexedRows != 17 || st.NumUnindexedRows != 19 {
		t.Errorf("index stats %+v (%v): want 17 indexed, 19 unindexed", st, err)
	}
	afterOptimize(t, f, want)
}

// TestRunRebasesLanceDBDeletes: deletes LanceDB commits on the fragments
// being rewritten, after compactord read them and before its Rewrite
// lands, are rebased onto the new fragments (not retried): no deleted row
// comes back, through a scan or an index, and no live row is lost.
func TestRunRebasesLanceDBDeletes(t *testing.T) {
	lancedb.Require(t)
	f, want := indexedWithDeletes(t)
	h := openHandle(t, f.Dir)
	env := Env{BeforeCommit: func(ctx context.Context, p *Plan) error {
		// A row delete in fragments 0, 2 and 4, then fragment 3 whole.
		f.Run(t, lancedb.Open(), lancedb.Delete("id = 5 OR id = 27 OR id = 41"), lancedb.Delete("id >= 30 AND id < 40"))
		return nil
	}}
	res, err := Run(t.Context(), h, DefaultOptions(), env)
	if err != nil {
		t.Fatal(err)
	}
	if res.Rebased != 2 || res.Retried != 0 {
		t.Fatalf("rebased %d, retried %d; want 2 and 0", res.Rebased, res.Retried)
	}
	for _, id := range []int64{5, 27, 41} {
		delete(want, id)
	}
	for id := int64(30); id < 40; id++ {
		delete(want, id)
	}
	steps := []lancedb.Step{
		lancedb.Open(),
		lancedb.ReadRows(lancedb.ReadOpts{}),
		lancedb.ReadRows(lancedb.ReadOpts{Where: "id = 5 OR id = 6 OR id = 27 OR id = 28 OR id = 33 OR id = 41 OR id = 42"}),
		lancedb.ReadRows(lancedb.ReadOpts{Where: "cat = 1"}),
		lancedb.CountRows(""),
		lancedb.Optimize(lancedb.OptimizeOpts{}),
		lancedb.ReadRows(lancedb.ReadOpts{}),
	}
	out := f.Run(t, steps...)
	check := func(i int, want map[int64]string) {
		t.Helper()
		if d := lancedb.DiffByID(readByID(t, out, i), want); d != "" {
			t.Errorf("step %d (%v): %s", i, steps[i], d)
		}
	}
	check(1, want)
	check(2, filter(want, func(k int64) bool { return k == 5 || k == 6 || k == 27 || k == 28 || k == 33 || k == 41 || k == 42 }))
	check(3, filter(want, func(k int64) bool { return k%4 == 1 }))
	if n, err := out.Count(4); err != nil || n != int64(len(want)) {
		t.Errorf("countRows %d (%v), want %d", n, err, len(want))
	}
	check(6, want)
}

// fsstTables is the set of symbol tables of the FSST pages of column
// name in the data files of frags ("" for a page without FSST).
func fsstTables(t *testing.T, h *table.Handle, frags []*pb.DataFragment, name string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, fr := range frags {
		src, _, done, err := openFile(t.Context(), h.Bucket, fr)
		if err != nil {
			t.Fatal(err)
		}
		col := -1
		for _, f := range src.Schema.Fields {
			if f.Name == name {
				col = f.Column
			}
		}
		if col < 0 {
			t.Fatalf("fragment %d has no column %s", fr.GetId(), name)
		}
		for _, p := range src.Columns[col].GetPages() {
			a := &anypb.Any{}
			if err := proto.Unmarshal(p.GetEncoding().GetDirect().GetEncoding(), a); err != nil {
				t.Fatal(err)
			}
			pl := &lancefilepb.PageLayout{}
			if err := a.UnmarshalTo(pl); err != nil {
				t.Fatal(err)
			}
			out[string(pl.GetMiniBlockLayout().GetValueCompression().GetFsst().GetSymbolTable())]++
		}
		done()
	}
	return out
}

// TestRunKeepsFSSTWithLanceDB: LanceDB writes three fragments whose
// string column it FSST-compresses, with nulls, and deletes a row in ten;
// compactord's compaction writes that column's kept values still
// compressed, under the source pages' symbol tables (no page of the output
// has another), and LanceDB reads exactly the kept values and nulls.
func TestRunKeepsFSSTWithLanceDB(t *testing.T) {
	lancedb.Require(t)
	const per = 12000
	val := func(id int64) any {
		if id%7 == 0 {
			return nil
		}
		return fmt.Sprintf("https://example.com/users/%d/items/%d?session=%x", id%977, id, id*2654435761)
	}
	frag := func(k int64) []lancedb.Row {
		var rows []lancedb.Row
		for id := k * per; id < (k+1)*per; id++ {
			rows = append(rows, lancedb.Row{"id": id, "s": val(id), "cat": int32(id % 4), "f": float64(id)})
		}
		return rows
	}
	f := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
	f.Dir = f.URI + "/t.lance"
	f.Results = f.Run(t, lancedb.Create(lancedb.BasicSchema, frag(0)), lancedb.Add(frag(1)), lancedb.Add(frag(2)),
		lancedb.Delete("id % 10 = 3"))
	h := openHandle(t, f.Dir)
	before, _, err := meta.ReadLatest(t.Context(), h.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	srcTabs := fsstTables(t, h, before.Manifest.GetFragments(), "s")
	if srcTabs[""] > 0 || len(srcTabs) == 0 {
		t.Fatalf("LanceDB's pages of s: %d without FSST, %d tables; want FSST pages only", srcTabs[""], len(srcTabs))
	}
	res, err := Run(t.Context(), h, DefaultOptions(), Env{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Commit == nil || res.Stats.RowsRewritten == 0 {
		t.Fatalf("nothing rewritten: %+v", res.Stats)
	}
	head, _, err := meta.ReadLatest(t.Context(), h.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	for tab, n := range fsstTables(t, h, head.Manifest.GetFragments(), "s") {
		if srcTabs[tab] == 0 {
			t.Errorf("%d output pages of s have a symbol table no source page has (FSST %v)", n, tab != "")
		}
	}
	out := f.Run(t, lancedb.ReadRows(lancedb.ReadOpts{}))
	rows, err := out.Rows(0)
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for id := int64(0); id < 3*per; id++ {
		if id%10 != 3 {
			want++
		}
	}
	if len(rows) != want {
		t.Fatalf("LanceDB read %d rows, want %d", len(rows), want)
	}
	bad := 0
	for _, r := range rows {
		id, ok := r.Int("id")
		if !ok || id%10 == 3 {
			t.Fatalf("row %v: deleted or without an id", r)
		}
		if w, g := val(id), r["s"]; (w == nil) != (g == nil) || w != nil && w.(string) != r.Str("s") {
			if bad++; bad <= 5 {
				t.Errorf("id %d: s = %v, want %v", id, g, w)
			}
		}
	}
}
