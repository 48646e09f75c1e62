package cli

import (
	"encoding/json"
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
