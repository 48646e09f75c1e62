package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/testing/lancedb"
)

// TestLanceIndexCatchupCLI: index catchup on LanceDB's indexed table adds
// a delta to the named index only, then to the other; a second run commits
// nothing; an unknown index name fails without committing.
func TestLanceIndexCatchupCLI(t *testing.T) {
	dir := lancedb.CorpusDir(t, "indexed")
	type out struct {
		Version   uint64
		Committed bool
		Indices   []struct {
			Name      string
			Fragments []uint32
			Rows      int
			Rebuilt   bool
		}
	}
	catchup := func(args ...string) out {
		t.Helper()
		r := run(t, "", append([]string{"index", "catchup", dir}, args...)...)
		if r.code != 0 {
			t.Fatalf("index catchup %v: exit %d: %s", args, r.code, r.stderr)
		}
		var o out
		if err := json.Unmarshal([]byte(strings.TrimSpace(r.stdout)), &o); err != nil {
			t.Fatalf("output %q: %v", r.stdout, err)
		}
		return o
	}
	if r := run(t, "", "index", "catchup", dir, "--indices", "nope"); r.code == 0 || !strings.Contains(r.stderr, "nope") {
		t.Fatalf("unknown index: exit %d: %s", r.code, r.stderr)
	}
	o := catchup("--indices", "id_idx")
	if !o.Committed || o.Version != 7 || len(o.Indices) != 1 || o.Indices[0].Name != "id_idx" || o.Indices[0].Rows != 5 || o.Indices[0].Fragments[0] != 3 {
		t.Fatalf("first catch-up: %+v", o)
	}
	o = catchup("--rebuild")
	if !o.Committed || o.Version != 8 || len(o.Indices) != 1 || o.Indices[0].Name != "cat_idx" || o.Indices[0].Rows != 35 || !o.Indices[0].Rebuilt {
		t.Fatalf("second catch-up: %+v", o)
	}
	if o = catchup(); o.Committed || len(o.Indices) != 0 {
		t.Fatalf("third catch-up: %+v", o)
	}
}

// TestLanceIndexRemapCLI: on LanceDB's indexed table with a fully deleted
// fragment, compact (deferred) leaves an FRI whose version inspect shows
// with the fragment in removed_fragments; index remap --no-trim remaps
// both indexes and keeps the FRI; index trim-fri then removes it; LanceDB
// reports 0 unindexed rows and reads the same rows throughout; a second
// remap and trim commit nothing; a directory without a Lance table is refused by
// trim-fri.
func TestLanceIndexRemapCLI(t *testing.T) {
	lancedb.Require(t)
	dir := t.TempDir()
	f := &lancedb.Fixture{URI: dir, Table: "t", Dir: filepath.Join(dir, "t.lance")}
	f.Run(t,
		lancedb.Create(lancedb.BasicSchema, lancedb.BasicRows(0, 10)),
		lancedb.Add(lancedb.BasicRows(10, 20)), lancedb.Add(lancedb.BasicRows(20, 30)),
		lancedb.CreateIndex("id", "btree", "id_idx"), lancedb.CreateIndex("cat", "bitmap", "cat_idx"),
		lancedb.Delete("id >= 10 AND id < 20"), lancedb.Delete("id = 3 OR id = 25"))
	want := map[int64]bool{}
	for i := int64(0); i < 30; i++ {
		if (i < 10 || i >= 20) && i != 3 && i != 25 {
			want[i] = true
		}
	}
	checkLanceDB := func(when string) {
		t.Helper()
		res := f.Run(t, lancedb.IndexStats("id_idx"), lancedb.IndexStats("cat_idx"), lancedb.ReadRows(lancedb.ReadOpts{Where: "id >= 0"}), lancedb.ReadRows(lancedb.ReadOpts{Where: "cat = 1"}))
		for i := range 2 {
			s, err := res.IndexStats(i)
			if err != nil || s == nil || s.NumUnindexedRows != 0 {
				t.Errorf("%s: index %d stats %+v, %v; want 0 unindexed rows", when, i, s, err)
			}
		}
		for step, pred := range map[int]func(int64) bool{2: func(int64) bool { return true }, 3: func(i int64) bool { return i%4 == 1 }} {
			rows, err := res.Rows(step)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, r := range rows {
				id, _ := r.Int("id")
				if !want[id] || !pred(id) {
					t.Errorf("%s: LanceDB returns id %d", when, id)
				}
				n++
			}
			exp := 0
			for id := range want {
				if pred(id) {
					exp++
				}
			}
			if n != exp {
				t.Errorf("%s: step %d: %d rows, want %d", when, step, n, exp)
			}
		}
	}
	one := func(args ...string) map[string]any {
		t.Helper()
		code, out, stderr := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		res := jsonLines(t, out)
		if len(res) != 1 {
			t.Fatalf("%v: %s", args, out)
		}
		return res[0]
	}
	if r := one("compact", f.Dir, "--defer-remap=true"); r["groups"] == float64(0) {
		t.Fatalf("compact: %v", r)
	}
	var doc struct {
		FragReuse *struct {
			Versions []struct {
				RemovedFragments []uint32 `json:"removed_fragments"`
			} `json:"versions"`
		} `json:"frag_reuse"`
	}
	code, out, stderr := runCLI(t, "inspect", f.Dir)
	if code != 0 || json.Unmarshal([]byte(out), &doc) != nil {
		t.Fatalf("inspect: exit %d: %s %s", code, out, stderr)
	}
	if doc.FragReuse == nil || len(doc.FragReuse.Versions) != 1 || len(doc.FragReuse.Versions[0].RemovedFragments) != 1 || doc.FragReuse.Versions[0].RemovedFragments[0] != 1 {
		t.Fatalf("inspect: frag_reuse %s", out)
	}
	checkLanceDB("compacted")
	lookup := func(when, name, key string, wantIDs ...int64) {
		t.Helper()
		code, out, stderr := runCLI(t, "index", "lookup", f.Dir, "--name", name, "--key", key, "--addresses")
		if code != 0 {
			t.Fatalf("%s: index lookup %s %s: exit %d: %s", when, name, key, code, stderr)
		}
		var got []int64
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if l == "" {
				continue
			}
			var row struct {
				ID   int64  `json:"id"`
				Frag *int64 `json:"_fragment"`
			}
			if err := json.Unmarshal([]byte(l), &row); err != nil || row.Frag == nil {
				t.Fatalf("%s: lookup line %q: %v", when, l, err)
			}
			got = append(got, row.ID)
		}
		if len(got) != len(wantIDs) {
			t.Fatalf("%s: lookup %s = %s: ids %v, want %v", when, name, key, got, wantIDs)
		}
		for i := range got {
			if got[i] != wantIDs[i] {
				t.Fatalf("%s: lookup %s = %s: ids %v, want %v", when, name, key, got, wantIDs)
			}
		}
	}
	lookups := func(when string) {
		t.Helper()
		lookup(when, "id_idx", "15")
		lookup(when, "id_idx", "25")
		lookup(when, "id_idx", "21", 21)
		lookup(when, "cat_idx", "1", 1, 5, 9, 21, 29)
	}
	lookups("compacted")

	r := one("index", "remap", f.Dir, "--no-trim")
	if ix, _ := r["indices"].([]any); len(ix) != 2 || r["trim"] != nil || r["fri_versions"] != float64(1) {
		t.Fatalf("index remap --no-trim: %v", r)
	}
	checkLanceDB("remapped")
	r = one("index", "trim-fri", f.Dir)
	if r["committed"] != true || r["removed"] != true {
		t.Fatalf("index trim-fri: %v", r)
	}
	checkLanceDB("trimmed")
	lookups("trimmed")
	if r = one("index", "remap", f.Dir); r["commits"] != float64(0) || r["fri_versions"] != float64(0) {
		t.Fatalf("second remap: %v", r)
	}
	if r = one("index", "trim-fri", f.Dir); r["committed"] != false {
		t.Fatalf("second trim: %v", r)
	}
	if code, _, stderr := runCLI(t, "index", "trim-fri", t.TempDir()); code == 0 || stderr == "" {
		t.Fatalf("trim-fri on a non-Lance directory: exit %d", code)
	}
}

// friDamagedIndex builds the table whose btree a LanceDB compaction
// damages: LanceDB writes 6×500 rows with a btree on id and a bitmap on
// cat and deletes id % 10 = 0; a deferred compact leaves an FRI version
// pending; LanceDB then deletes id % 3 = 0, so its optimize() picks the
// compacted fragment, and remaps the btree through its own row map only
// while the btree still holds the addresses from before the FRI. It
// returns the fixture and the live ids.
func friDamagedIndex(t *testing.T) (*lancedb.Fixture, map[int64]bool) {
	t.Helper()
	dir := t.TempDir()
	f := &lancedb.Fixture{URI: dir, Table: "t", Dir: filepath.Join(dir, "t.lance")}
	steps := []lancedb.Step{lancedb.Create(lancedb.BasicSchema, lancedb.BasicRows(0, 500))}
	for i := int64(1); i < 6; i++ {
		steps = append(steps, lancedb.Add(lancedb.BasicRows(500*i, 500*(i+1))))
	}
	steps = append(steps, lancedb.CreateIndex("id", "btree", "id_idx"), lancedb.CreateIndex("cat", "bitmap", "cat_idx"), lancedb.Delete("id % 10 = 0"))
	f.Run(t, steps...)
	if code, out, stderr := runCLI(t, "compact", f.Dir, "--defer-remap=true"); code != 0 || !strings.Contains(out, `"frag_reuse_index":"__lance_frag_reuse"`) {
		t.Fatalf("compact --defer-remap: exit %d: %s %s", code, out, stderr)
	}
	f.Run(t, lancedb.Delete("id % 3 = 0"), lancedb.Optimize(lancedb.OptimizeOpts{}))
	live := map[int64]bool{}
	for id := int64(0); id < 3000; id++ {
		if id%10 != 0 && id%3 != 0 {
			live[id] = true
		}
	}
	return f, live
}

// indexAnswers compares, on LanceDB, the counts its indexes answer
// (filters on id and cat, with both indexes covering every row) with a
// scan of every row, and returns the first difference ("" if none).
func indexAnswers(t *testing.T, f *lancedb.Fixture) string {
	t.Helper()
	preds := []struct {
		where string
		match func(id, cat int64) bool
	}{
		{"id >= 0", func(int64, int64) bool { return true }},
		{"id < 1000", func(id, _ int64) bool { return id < 1000 }},
		{"id = 7", func(id, _ int64) bool { return id == 7 }},
		{"cat = 0", func(_, c int64) bool { return c == 0 }},
		{"cat = 1", func(_, c int64) bool { return c == 1 }},
		{"cat = 3", func(_, c int64) bool { return c == 3 }},
	}
	steps := []lancedb.Step{lancedb.ReadRows(lancedb.ReadOpts{}), lancedb.IndexStats("id_idx"), lancedb.IndexStats("cat_idx")}
	for _, p := range preds {
		steps = append(steps, lancedb.CountRows(p.where))
	}
	res := f.Run(t, steps...)
	rows, err := res.Rows(0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		if s, err := res.IndexStats(i); err != nil || s == nil || s.NumUnindexedRows != 0 {
			t.Fatalf("index stats %d: %+v %v; the counts would not be the index's", i, s, err)
		}
	}
	for k, p := range preds {
		want := int64(0)
		for _, r := range rows {
			id, _ := r.Int("id")
			c, _ := r.Int("cat")
			if p.match(id, c) {
				want++
			}
		}
		got, err := res.Count(3 + k)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			return fmt.Sprintf("%s: the index answers %d rows, a scan %d", p.where, got, want)
		}
	}
	return ""
}

// TestLanceIndexRebuildCLI: on the table whose btree LanceDB's compaction
// damaged, verify --deep fails naming id_idx; index rebuild of both
// indexes makes LanceDB's index-answered counts equal a scan, a LanceDB
// delete and a merge-insert of an existing key work through the index,
// and verify --deep passes. Unknown and unsupported indexes are refused
// with one line and no commit.
func TestLanceIndexRebuildCLI(t *testing.T) {
	lancedb.Require(t)
	f, live := friDamagedIndex(t)
	if d := indexAnswers(t, f); !strings.Contains(d, "id >= 0: the index answers 0 rows") {
		t.Fatalf("the damaged table's btree answers correctly (%q): the scenario no longer damages it", d)
	}
	code, out, stderr := runCLI(t, "verify", f.Dir, "--deep")
	if code == 0 || !strings.Contains(stderr, "index_content") || !strings.Contains(stderr, "index id_idx") {
		t.Fatalf("verify --deep on the damaged table: exit %d: %s %s", code, out, stderr)
	}
	before := snapshot(t, f.Dir)
	for _, bad := range [][]string{{"--name", "nope"}, {"--name", "__lance_frag_reuse"}} {
		code, _, stderr := runCLI(t, append([]string{"index", "rebuild", f.Dir}, bad...)...)
		if code == 0 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, "no index") {
			t.Errorf("index rebuild %v: exit %d: %q", bad, code, stderr)
		}
	}
	if got := snapshot(t, f.Dir); strings.Join(got, "\n") != strings.Join(before, "\n") {
		t.Fatal("a refused rebuild changed the table")
	}
	for _, name := range []string{"id_idx", "cat_idx"} {
		code, out, stderr := runCLI(t, "index", "rebuild", f.Dir, "--name", name)
		if code != 0 {
			t.Fatalf("index rebuild %s: exit %d: %s", name, code, stderr)
		}
		res := jsonLines(t, out)
		if len(res) != 1 || res[0]["rows"] != float64(len(live)) || len(res[0]["removed"].([]any)) != 1 {
			t.Fatalf("index rebuild %s: %s", name, out)
		}
	}
	if d := indexAnswers(t, f); d != "" {
		t.Fatalf("after rebuild: %s", d)
	}
	// Through the rebuilt btree, a delete finds its row and a merge-insert
	// finds the existing key.
	res := f.Run(t, lancedb.Delete("id = 7"), lancedb.MergeInsert("id", []lancedb.Row{lancedb.BasicRow(11, "new11")}), lancedb.ReadRows(lancedb.ReadOpts{}))
	rows, err := res.Rows(2)
	if err != nil {
		t.Fatal(err)
	}
	n11 := 0
	for _, r := range rows {
		switch id, _ := r.Int("id"); id {
		case 7:
			t.Error("LanceDB's acknowledged delete of id 7 left the row")
		case 11:
			n11++
			if r.Str("s") != "new11" {
				t.Errorf("id 11 reads %q after the merge-insert", r.Str("s"))
			}
		}
	}
	if n11 != 1 || len(rows) != len(live)-1 {
		t.Errorf("after delete and merge-insert: %d copies of id 11, %d rows (want 1, %d)", n11, len(rows), len(live)-1)
	}
	if code, out, stderr := runCLI(t, "verify", f.Dir, "--deep"); code != 0 {
		t.Fatalf("verify --deep after rebuild: exit %d: %s %s", code, out, stderr)
	}
}

// TestLanceIndexRebuildLabelList: verify --deep checks LanceDB's
// label-list index and passes; index rebuild replaces it by one segment
// that verify --deep passes too and LanceDB answers array_has_any from.
func TestLanceIndexRebuildLabelList(t *testing.T) {
	lancedb.Require(t)
	dir := t.TempDir()
	f := &lancedb.Fixture{URI: dir, Table: "t", Dir: filepath.Join(dir, "t.lance")}
	var rows []lancedb.Row
	for i := int64(0); i < 100; i++ {
		rows = append(rows, lancedb.Row{"id": i, "tags": []int32{int32(i % 3), int32(i % 4)}})
	}
	f.Run(t, lancedb.Create([]lancedb.Column{{Name: "id", Type: "int64"}, {Name: "tags", Type: "list<int32>", Nullable: true}}, rows),
		lancedb.CreateIndex("tags", "label_list", "tags_idx"), lancedb.Delete("id % 9 = 0"))
	code, out, stderr := runCLI(t, "verify", f.Dir, "--deep", "--json")
	if code != 0 || !strings.Contains(out, `"name":"tags_idx","kind":"labellist","checked":true`) || !strings.Contains(out, `"problems":[]`) {
		t.Fatalf("verify --deep: exit %d: %s %s", code, out, stderr)
	}
	code, out, stderr = runCLI(t, "index", "rebuild", f.Dir, "--name", "tags_idx")
	if code != 0 || !strings.Contains(out, "labellist") {
		t.Fatalf("index rebuild of a label list: exit %d: %s %s", code, out, stderr)
	}
	code, out, stderr = runCLI(t, "verify", f.Dir, "--deep", "--json")
	if code != 0 || !strings.Contains(out, `"name":"tags_idx","kind":"labellist","checked":true`) || !strings.Contains(out, `"problems":[]`) {
		t.Fatalf("verify --deep after rebuild: exit %d: %s %s", code, out, stderr)
	}
	res := f.Run(t, lancedb.CountRows("array_has_any(tags, [CAST(2 AS INT)])"))
	want := int64(0)
	for i := int64(0); i < 100; i++ {
		if i%9 != 0 && (i%3 == 2 || i%4 == 2) {
			want++
		}
	}
	if n, err := res.Count(0); err != nil || n != want {
		t.Fatalf("LanceDB counts %d rows with label 2 after the rebuild (%v), want %d", n, err, want)
	}
}

// TestIndexRebuildBadInput: no table, no --name, or a table without that
// index: one line on stderr, a non-zero exit, nothing written.
func TestIndexRebuildBadInput(t *testing.T) {
	empty := t.TempDir()
	tbl := newTable(t)
	before := snapshot(t, tbl)
	for _, args := range [][]string{
		{"index", "rebuild", empty, "--name", "id_idx"},
		{"index", "rebuild", tbl},
		{"index", "rebuild", tbl, "--name", "id_idx"},
	} {
		r := run(t, "", args...)
		if r.code == 0 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || r.stderr == "" {
			t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
	if got := snapshot(t, tbl); strings.Join(got, "\n") != strings.Join(before, "\n") {
		t.Error("a refused rebuild changed the table")
	}
	if got, _ := os.ReadDir(empty); len(got) != 0 {
		t.Errorf("rebuild wrote into a directory without a table: %v", got)
	}
}

// TestIndexCreateOfAnExistingName: index create prints the version its own
// commit made; a second create of the same name on the same column and
// type is a no-op (created: false, the version it found the index in); on
// another column or of another type it is refused in one line naming both,
// and the table is unchanged.
func TestIndexCreateOfAnExistingName(t *testing.T) {
	dir := lancedb.CorpusDir(t, "plain")
	type out struct {
		Version uint64
		Created bool
	}
	create := func(column, typ string) (out, result) {
		t.Helper()
		r := run(t, "", "index", "create", dir, "--name", "n_idx", "--column", column, "--type", typ)
		var o out
		if r.code == 0 {
			if err := json.Unmarshal([]byte(strings.TrimSpace(r.stdout)), &o); err != nil {
				t.Fatalf("output %q: %v", r.stdout, err)
			}
		}
		return o, r
	}
	latest := func() uint64 {
		t.Helper()
		r := run(t, "", "inspect", dir)
		var doc struct{ Version uint64 }
		if err := json.Unmarshal([]byte(strings.TrimSpace(r.stdout)), &doc); err != nil || r.code != 0 {
			t.Fatalf("inspect: exit %d %v: %s", r.code, err, r.stderr)
		}
		return doc.Version
	}
	before := latest()
	first, r := create("id", "btree")
	if r.code != 0 || !first.Created || first.Version != before+1 {
		t.Fatalf("first create: exit %d %+v (head was %d): %s", r.code, first, before, r.stderr)
	}
	again, r := create("id", "btree")
	if r.code != 0 || again.Created || again.Version != first.Version {
		t.Fatalf("identical create: exit %d %+v, want a no-op at %d: %s", r.code, again, first.Version, r.stderr)
	}
	for _, c := range [][2]string{{"s", "btree"}, {"id", "bitmap"}} {
		_, r := create(c[0], c[1])
		if r.code == 0 || !strings.Contains(r.stderr, "n_idx exists on id as btree") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("create on %s as %s: exit %d: %q", c[0], c[1], r.code, r.stderr)
		}
	}
	if v := latest(); v != first.Version {
		t.Errorf("refused creates moved the table to version %d, want %d", v, first.Version)
	}
}
