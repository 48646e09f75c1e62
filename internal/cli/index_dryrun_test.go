package cli

import (
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/testing/lancedb"
)

// filesUnder is every file under dir with its size: what a dry run must leave
// as it found it.
func filesUnder(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out[p] = info.Size()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// index catchup --dry-run and index remap --dry-run print what the
// commands then do (the indexes, their fragments and rows; the segments
// to remap) and write nothing: no version, no segment file.
func TestIndexCatchupAndRemapDryRun(t *testing.T) {
	dir := lancedb.CorpusDir(t, "indexed")
	dry := func(args ...string) map[string]any {
		t.Helper()
		before := filesUnder(t, dir)
		m := runDoc(t, args...)
		if after := filesUnder(t, dir); !maps.Equal(before, after) {
			t.Fatalf("%v wrote files: %d before, %d after", args, len(before), len(after))
		}
		if m["dry_run"] != true {
			t.Fatalf("%v: %v", args, m)
		}
		return m
	}
	indices := func(m map[string]any) []map[string]any {
		var out []map[string]any
		for _, x := range m["indices"].([]any) {
			out = append(out, x.(map[string]any))
		}
		return out
	}

	// The catch-up of id_idx: fragment 3, 5 rows, as the commit then does.
	p := dry("index", "catchup", dir, "--indices", "id_idx", "--dry-run")
	ix := indices(p)
	if len(ix) != 1 || ix[0]["name"] != "id_idx" || ix[0]["rows"] != 5.0 || ix[0]["rebuild"] != false ||
		!slices.Equal(ix[0]["fragments"].([]any), []any{3.0}) || p["would_commit"] != true || p["read_version"] != 6.0 {
		t.Fatalf("catch-up plan: %v", p)
	}
	c := runDoc(t, "index", "catchup", dir, "--indices", "id_idx")
	if c["version"] != 7.0 || c["committed"] != true {
		t.Fatalf("catch-up after the dry run: %v", c)
	}
	if ci := indices(c); len(ci) != 1 || ci[0]["rows"] != ix[0]["rows"] {
		t.Fatalf("catch-up did other than its dry run said: %v", c)
	}
	p = dry("index", "catchup", dir, "--rebuild", "--dry-run")
	if ix = indices(p); len(ix) != 1 || ix[0]["name"] != "cat_idx" || ix[0]["rows"] != 35.0 || ix[0]["rebuild"] != true {
		t.Fatalf("rebuild plan: %v", p)
	}
	runDoc(t, "index", "catchup", dir)
	if p = dry("index", "catchup", dir, "--dry-run"); len(indices(p)) != 0 || p["would_commit"] != false {
		t.Fatalf("plan with every index caught up: %v", p)
	}

	// Without a fragment-reuse index there is nothing to remap.
	if p = dry("index", "remap", dir, "--dry-run"); p["fri_versions"] != 0.0 || len(indices(p)) != 0 || p["would_commit"] != false {
		t.Fatalf("remap plan without an FRI: %v", p)
	}
	if r := runDoc(t, "compact", dir, "--defer-remap=true"); r["groups"] == 0.0 {
		t.Fatalf("compact: %v", r)
	}
	p = dry("index", "remap", dir, "--dry-run")
	var names []string
	for _, x := range indices(p) {
		names = append(names, x["name"].(string))
		if len(x["segments"].([]any)) == 0 {
			t.Fatalf("remap plan names no segment: %v", p)
		}
	}
	if p["fri_versions"] != 1.0 || p["would_commit"] != true || len(names) == 0 {
		t.Fatalf("remap plan: %v", p)
	}
	r := runDoc(t, "index", "remap", dir)
	var done []string
	for _, x := range indices(r) {
		done = append(done, x["name"].(string))
	}
	if !slices.Equal(names, done) {
		t.Fatalf("remap did %v, its dry run said %v", done, names)
	}
}

// index remap --dry-run names every index kind the remap rewrites (vector,
// full-text and label-list as well as btree), not only the scalar ones,
// and skips none that the remap then rewrites; after the remap the FRI is
// gone.
func TestIndexRemapDryRunNamesEveryKind(t *testing.T) {
	lancedb.Require(t)
	schema := append(append([]lancedb.Column{}, lancedb.VectorSchema...),
		lancedb.Column{Name: "tags", Type: "list<int32>", Nullable: true}, lancedb.Column{Name: "doc", Type: "utf8", Nullable: true})
	rows := func(lo, hi int64) []lancedb.Row {
		rs := lancedb.VectorRows(lo, hi, "v")
		for _, r := range rs {
			id := r["id"].(int64)
			r["tags"] = []int32{int32(id % 3), int32(10 + id%4)}
			r["doc"] = fmt.Sprintf("alpha%d beta%d", id%5, id%7)
		}
		return rs
	}
	steps := []lancedb.Step{lancedb.Create(schema, rows(0, 200))}
	for lo := int64(200); lo < 800; lo += 200 {
		steps = append(steps, lancedb.Add(rows(lo, lo+200)))
	}
	steps = append(steps, lancedb.CreateIndex("id", "btree", "id_idx"), lancedb.CreateIndex("tags", "label_list", "tags_idx"),
		lancedb.CreateVectorIndex("doc", "fts", "doc_idx", nil),
		lancedb.CreateVectorIndex("vec", "ivf_pq", "vec_idx", map[string]any{"numPartitions": 2, "numSubVectors": 4}),
		lancedb.Delete("id % 3 = 0"))
	f := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
	f.Dir = filepath.Join(f.URI, "t.lance")
	f.Run(t, steps...)

	names := func(m map[string]any) []string {
		var out []string
		for _, x := range m["indices"].([]any) {
			out = append(out, x.(map[string]any)["name"].(string))
		}
		slices.Sort(out)
		return out
	}
	if r := runDoc(t, "compact", f.Dir, "--defer-remap=true"); r["groups"] == 0.0 {
		t.Fatalf("compact: %v", r)
	}
	want := []string{"doc_idx", "id_idx", "tags_idx", "vec_idx"}
	p := runDoc(t, "index", "remap", f.Dir, "--dry-run")
	if got := names(p); !slices.Equal(got, want) || len(p["skipped"].([]any)) != 0 || p["would_commit"] != true {
		t.Fatalf("remap plan: %v; want indices %v and none skipped", p, want)
	}
	r := runDoc(t, "index", "remap", f.Dir)
	if got := names(r); !slices.Equal(got, want) || r["skipped"] != nil {
		t.Fatalf("remap did %v (skipped %v), its dry run said %v", got, r["skipped"], want)
	}
	if p := runDoc(t, "index", "remap", f.Dir, "--dry-run"); p["fri_versions"] != 0.0 {
		t.Fatalf("after the remap: %v; want no FRI version left", p)
	}
	out := f.Run(t, lancedb.Open(), lancedb.IndexStats("vec_idx"), lancedb.IndexStats("doc_idx"), lancedb.IndexStats("tags_idx"))
	for k := 1; k <= 3; k++ {
		st, err := out.IndexStats(k)
		if err != nil || st.NumUnindexedRows != 0 || st.NumIndexedRows == 0 {
			t.Fatalf("LanceDB's indexStats (step %d) after the remap: %+v, %v", k, st, err)
		}
	}
}

// index catchup --dry-run names a full-text index whose tokenizer
// compactord does not reproduce (Turkish stemming) as skipped with the
// reason, as the catch-up then skips it, and plans the btree beside it.
func TestIndexCatchupDryRunSkipsUnreproducedTokenizer(t *testing.T) {
	lancedb.Require(t)
	schema := []lancedb.Column{{Name: "id", Type: "int64"}, {Name: "doc", Type: "utf8", Nullable: true}}
	rows := func(lo, hi int64) []lancedb.Row {
		var out []lancedb.Row
		for i := lo; i < hi; i++ {
			out = append(out, lancedb.Row{"id": i, "doc": fmt.Sprintf("kitaplar evler w%d", i)})
		}
		return out
	}
	f := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
	f.Dir = filepath.Join(f.URI, "t.lance")
	f.Run(t, lancedb.Create(schema, rows(0, 100)), lancedb.CreateIndex("id", "btree", "id_idx"),
		lancedb.CreateVectorIndex("doc", "fts", "doc_idx", map[string]any{"language": "Turkish", "withPosition": false}),
		lancedb.Add(rows(100, 120)))
	plan := runDoc(t, "index", "catchup", f.Dir, "--dry-run")
	real := runDoc(t, "index", "catchup", f.Dir)
	summary := func(m map[string]any) (names, skipped []string) {
		for _, x := range m["indices"].([]any) {
			names = append(names, x.(map[string]any)["name"].(string))
		}
		for _, x := range m["skipped"].([]any) {
			s := x.(map[string]any)
			skipped = append(skipped, s["name"].(string)+": "+s["reason"].(string))
		}
		return names, skipped
	}
	pn, ps := summary(plan)
	rn, rs := summary(real)
	if !slices.Equal(pn, []string{"id_idx"}) || len(ps) != 1 || !strings.HasPrefix(ps[0], "doc_idx: ") || !strings.Contains(ps[0], "Turkish") {
		t.Fatalf("catch-up plan: indices %v, skipped %v; want id_idx planned and doc_idx skipped naming the language", pn, ps)
	}
	if !slices.Equal(rn, pn) || !slices.Equal(rs, ps) {
		t.Fatalf("the catch-up did indices %v, skipped %v; its dry run said %v, %v", rn, rs, pn, ps)
	}
}
