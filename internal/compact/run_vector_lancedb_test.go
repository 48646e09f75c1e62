package compact

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/testing/lancedb"
)

// remapKinds are the vector index kinds compactord remaps, with each
// distance type.
func remapKinds() []struct {
	typ, distance string
	opts          map[string]any
} {
	var out []struct {
		typ, distance string
		opts          map[string]any
	}
	for _, typ := range []string{"ivf_flat", "ivf_pq", "ivf_pq4bit", "ivf_rq"} {
		for _, d := range []string{"l2", "cosine", "dot"} {
			o := map[string]any{"numPartitions": 4, "distanceType": d}
			if typ == "ivf_pq" {
				o["numSubVectors"] = 4
			}
			if typ == "ivf_pq4bit" {
				// 4-bit PQ: the type LanceDB builds is ivf_pq.
				o["numSubVectors"], o["numBits"] = 4, 4
			}
			out = append(out, struct {
				typ, distance string
				opts          map[string]any
			}{typ, d, o})
		}
	}
	return out
}

// vectorHits are the (id, distance) pairs of a vector search, nearest
// first, ties by id.
type vectorHit struct {
	id   int64
	dist float64
}

// searchAll runs the 50 query vectors through the vector index with every
// partition probed and returns each query's 10 hits.
func searchAll(t *testing.T, f *lancedb.Fixture, distance string, partitions int) [][]vectorHit {
	t.Helper()
	return searchAt(t, f, 0, distance, partitions)
}

// searchAt is searchAll on version v of the table (0: the latest).
func searchAt(t *testing.T, f *lancedb.Fixture, v uint64, distance string, partitions int) [][]vectorHit {
	t.Helper()
	return searchAtEf(t, f, v, distance, partitions, 0)
}

// searchAtEf is searchAt with an HNSW search list of ef (0: LanceDB's).
func searchAtEf(t *testing.T, f *lancedb.Fixture, v uint64, distance string, partitions, ef int) [][]vectorHit {
	t.Helper()
	steps := []lancedb.Step{lancedb.Open()}
	if v != 0 {
		steps[0] = lancedb.Checkout(v)
	}
	for q := range 50 {
		steps = append(steps, lancedb.VectorSearch(lancedb.VectorQuery{Vector: lancedb.VectorOf(int64(100000 + q)), Column: "vec", Limit: 10, Nprobes: partitions, Ef: ef, DistanceType: distance, Columns: []string{"id"}}))
	}
	out := f.Run(t, steps...)
	var all [][]vectorHit
	for q := range 50 {
		rows, err := out.Rows(1 + q)
		if err != nil {
			t.Fatal(err)
		}
		var hs []vectorHit
		for _, r := range rows {
			id, _ := r.Int("id")
			d, _ := r.Float("_distance")
			hs = append(hs, vectorHit{id, d})
		}
		slices.SortFunc(hs, func(a, b vectorHit) int {
			if a.dist != b.dist {
				if a.dist < b.dist {
					return -1
				}
				return 1
			}
			return int(a.id - b.id)
		})
		all = append(all, hs)
	}
	return all
}

// vectorDeletesTable is a table LanceDB builds: ids 0..999 in four
// fragments, a vector index vec_idx of typ over all of them, id % 7 = 0
// deleted, then fragment 2 (ids 500..749) deleted whole (it leaves the
// manifest; its rows stay in the index).
func vectorDeletesTable(t *testing.T, typ string, opts map[string]any) *lancedb.Fixture {
	t.Helper()
	return vectorDeletesTableWith(t, typ, opts, true)
}

// vectorDeletesTableWith is vectorDeletesTable, fragment 2 deleted whole
// only when wholeFragment is set.
func vectorDeletesTableWith(t *testing.T, typ string, opts map[string]any, wholeFragment bool) *lancedb.Fixture {
	t.Helper()
	steps := []lancedb.Step{lancedb.Create(lancedb.VectorSchema, lancedb.VectorRows(0, 250, "v"))}
	for lo := int64(250); lo < 1000; lo += 250 {
		steps = append(steps, lancedb.Add(lancedb.VectorRows(lo, lo+250, "v")))
	}
	steps = append(steps, lancedb.CreateVectorIndex("vec", typ, "vec_idx", opts), lancedb.Delete("id % 7 = 0"))
	if wholeFragment {
		steps = append(steps, lancedb.Delete("id >= 500 AND id < 750"))
	}
	f := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
	f.Dir = f.URI + "/t.lance"
	f.Run(t, steps...)
	return f
}

// TestRunRemapsVectorIndexesInline: on a table with an IVF_FLAT, IVF_PQ
// or IVF_RQ index (each distance type), rows deleted in every fragment and
// one fragment deleted whole, compactord's inline compaction rewrites the
// indexed fragments (none skipped) and remaps the vector index in the
// Rewrite; LanceDB then reports no unindexed row, and its search with
// every partition probed returns, for 50 queries, the same ids and
// distances as on a copy LanceDB's own optimize() compacted.
//
// IVF_RQ: LanceDB scores the rows of a partition's full blocks of 32
// through a quantized lookup table and the rest exactly, so a row's
// distance depends on its position, and LanceDB's remap keeps the rows of
// a fragment deleted whole (its mapping does not name them) where
// compactord drops them; the RQ table therefore loses no whole fragment,
// and its search is compared with LanceDB's remap only (rows moved alike),
// not with the search before.
func TestRunRemapsVectorIndexesInline(t *testing.T) {
	lancedb.Require(t)
	for _, k := range remapKinds() {
		t.Run(k.typ+"_"+k.distance, func(t *testing.T) {
			rq := k.typ == "ivf_rq"
			f := vectorDeletesTableWith(t, strings.TrimSuffix(k.typ, "4bit"), k.opts, !rq)
			twin := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
			twin.Dir = twin.URI + "/t.lance"
			copyTree(t, f.Dir, twin.Dir)
			before := searchAll(t, f, k.distance, 4)

			res, err := Run(t.Context(), openHandle(t, f.Dir), DefaultOptions(), Env{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Commit == nil || len(res.Plan.Skips) != 0 || res.RewrittenIndices != 1 {
				t.Fatalf("compaction: committed %v, skips %+v, %d indexes remapped; want a commit remapping vec_idx, nothing skipped", res.Commit != nil, res.Plan.Skips, res.RewrittenIndices)
			}
			remapped := lanceDBRemapVersion(t, twin)

			st := f.Run(t, lancedb.Open(), lancedb.IndexStats("vec_idx"))
			stats, err := st.IndexStats(1)
			if err != nil || stats == nil {
				t.Fatalf("index stats: %v %v", stats, err)
			}
			indexed := int64(1000 - 250 - 107)
			if rq {
				indexed = 1000 - 143
			}
			if stats.NumUnindexedRows != 0 || stats.NumIndexedRows != indexed {
				t.Fatalf("index stats %+v: want %d indexed, 0 unindexed", stats, indexed)
			}
			got, want := searchAll(t, f, k.distance, 4), searchAt(t, twin, remapped, k.distance, 4)
			if !rq {
				sameHits(t, got, before, "the search before compaction")
			}
			sameHits(t, got, want, "LanceDB's optimize() copy")
		})
	}
}

// lanceDBRemapVersion runs LanceDB's optimize() on f and returns the
// version of its compaction's Rewrite, which carries LanceDB's remap of
// vec_idx: optimize() then optimizes the index too, and that step may
// retrain it (it came back with one partition here), which is not the
// work a compaction does.
func lanceDBRemapVersion(t *testing.T, f *lancedb.Fixture) uint64 {
	t.Helper()
	r := f.Run(t, lancedb.Open(), lancedb.ListIndices(), lancedb.Optimize(lancedb.OptimizeOpts{}), lancedb.CurrentVersion())
	v0, err := r.Version(0)
	if err != nil {
		t.Fatal(err)
	}
	last, err := r.Version(3)
	if err != nil {
		t.Fatal(err)
	}
	uuidOf := func(r *lancedb.Results, i int) string {
		ixs, err := r.Indices(i)
		if err != nil {
			t.Fatal(err)
		}
		for _, ix := range ixs {
			if ix.Name == "vec_idx" {
				return ix.IndexUUID
			}
		}
		return ""
	}
	orig := uuidOf(r, 1)
	var steps []lancedb.Step
	for v := v0 + 1; v <= last; v++ {
		steps = append(steps, lancedb.Checkout(v), lancedb.ListIndices())
	}
	out := f.Run(t, steps...)
	for i := range int(last - v0) {
		if u := uuidOf(out, 2*i+1); u != orig && u != "" {
			return v0 + 1 + uint64(i)
		}
	}
	t.Fatalf("no version of LanceDB's optimize() (%d..%d) remapped vec_idx", v0+1, last)
	return 0
}

// sameHits fails unless got and want hold the same ids at the same
// distances (1e-5 relative) for every query. Rows tied with the last hit
// may differ (which of them fills the limit is the search's choice):
// there only the distances must agree.
func sameHits(t *testing.T, got, want [][]vectorHit, what string) {
	t.Helper()
	for q := range got {
		if len(got[q]) != 10 || len(got[q]) != len(want[q]) {
			t.Fatalf("query %d: %d hits, %s %d", q, len(got[q]), what, len(want[q]))
		}
		last := want[q][len(want[q])-1].dist
		for i := range got[q] {
			g, w := got[q][i], want[q][i]
			if (g.id != w.id && w.dist != last) || math.Abs(g.dist-w.dist) > 1e-5*math.Max(1e-6, math.Abs(w.dist)) {
				t.Fatalf("query %d hit %d: %s, %s %s", q, i, fmt.Sprint(g), what, fmt.Sprint(w))
			}
		}
	}
}

// TestDeferredVectorRemapDrainsFRI: a deferred compaction of an IVF_PQ
// table followed by index remap rewrites vec_idx through the FRI and
// leaves no FRI version; LanceDB's search with every partition probed
// returns what it did before (between the two too), its index stats count
// every live row, and its optimize() and later writes keep the index
// searchable.
func TestDeferredVectorRemapDrainsFRI(t *testing.T) {
	lancedb.Require(t)
	ctx := t.Context()
	f := vectorDeletesTable(t, "ivf_pq", map[string]any{"numPartitions": 4, "numSubVectors": 4})
	before := searchAll(t, f, "l2", 4)
	h := openHandle(t, f.Dir)
	res, err := Run(ctx, h, deferredOptions(), Env{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Commit == nil || res.FragReuse == nil || len(res.Plan.Skips) != 0 {
		t.Fatalf("deferred compaction: committed %v, FRI %v, skips %+v", res.Commit != nil, res.FragReuse != nil, res.Plan.Skips)
	}
	// Until index remap, LanceDB remaps the vector storage through the FRI
	// at load.
	sameHits(t, searchAll(t, f, "l2", 4), before, "the search before compaction")
	rr, err := index.RemapIndexes(ctx, h, index.RemapJobOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rr.Indices) != 1 || rr.Indices[0].Name != "vec_idx" || len(rr.Skipped) != 0 || rr.Trim == nil || !rr.Trim.Removed {
		t.Fatalf("index remap: %+v; want vec_idx remapped and the FRI removed", rr)
	}
	if want := 1000 - 250 - 107; rr.Indices[0].Entries != want {
		t.Fatalf("index remap kept %d rows, want %d", rr.Indices[0].Entries, want)
	}
	out := f.Run(t, lancedb.Open(), lancedb.IndexStats("vec_idx"))
	if st, err := out.IndexStats(1); err != nil || st == nil || st.NumUnindexedRows != 0 {
		t.Fatalf("index stats after the remap: %+v %v", st, err)
	}
	sameHits(t, searchAll(t, f, "l2", 4), before, "the search before compaction")

	f.Run(t, lancedb.Open(), lancedb.Add(lancedb.VectorRows(2000, 2100, "w")), lancedb.Optimize(lancedb.OptimizeOpts{}), lancedb.Delete("id = 2001"))
	want := map[int64]string{}
	for id := int64(0); id < 1000; id++ {
		if id%7 != 0 && (id < 500 || id >= 750) {
			want[id] = fmt.Sprintf("v%d", id)
		}
	}
	for id := int64(2000); id < 2100; id++ {
		if id != 2001 {
			want[id] = fmt.Sprintf("w%d", id)
		}
	}
	if r := selfRecall(t, f, want); r < 0.95 {
		t.Errorf("self-recall %.3f after LanceDB's writes and optimize(), want >= 0.95", r)
	}
	if d := lancedb.DiffByID(readByID(t, f.Run(t, lancedb.Open(), lancedb.ReadRows(lancedb.ReadOpts{})), 1), want); d != "" {
		t.Errorf("rows after LanceDB's writes and optimize(): %s", d)
	}
}

// recallAt10 is the mean share of the exact 10 nearest rows (an
// exhaustive search) that the index search with every partition probed
// returns, over the 50 query vectors, on version v of f (0: latest).
func recallAt10(t *testing.T, f *lancedb.Fixture, v uint64, distance string, partitions int) float64 {
	t.Helper()
	got := searchAt(t, f, v, distance, partitions)
	steps := []lancedb.Step{lancedb.Open()}
	if v != 0 {
		steps[0] = lancedb.Checkout(v)
	}
	for q := range 50 {
		steps = append(steps, lancedb.VectorSearch(lancedb.VectorQuery{Vector: lancedb.VectorOf(int64(100000 + q)), Column: "vec", Limit: 10, BypassIndex: true, DistanceType: distance, Columns: []string{"id"}}))
	}
	out := f.Run(t, steps...)
	hit := 0
	for q := range 50 {
		rows, err := out.Rows(1 + q)
		if err != nil {
			t.Fatal(err)
		}
		exact := map[int64]bool{}
		for _, r := range rows {
			id, _ := r.Int("id")
			exact[id] = true
		}
		for _, h := range got[q] {
			if exact[h.id] {
				hit++
			}
		}
	}
	return float64(hit) / 500
}

// TestRunRemapsHNSWIndexesInline: on a table with an IVF_HNSW_SQ or
// IVF_HNSW_PQ index (each distance type) and deletes, compactord's inline
// compaction remaps the index, rebuilding the graphs of the partitions
// that lost rows; LanceDB then searches it, counts no unindexed row, with
// a search list as long as the table returns the ids and distances of
// LanceDB's own remap (the same codes), and its recall@10 against an exhaustive search is within 0.01 of that at
// the Rewrite of LanceDB's own optimize() on a copy.
func TestRunRemapsHNSWIndexesInline(t *testing.T) {
	lancedb.Require(t)
	for _, typ := range []string{"ivf_hnsw_sq", "ivf_hnsw_pq"} {
		for _, d := range []string{"l2", "cosine", "dot"} {
			t.Run(typ+"_"+d, func(t *testing.T) {
				opts := map[string]any{"numPartitions": 2, "distanceType": d}
				if typ == "ivf_hnsw_pq" {
					opts["numSubVectors"] = 4
				}
				f := vectorDeletesTable(t, typ, opts)
				twin := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
				twin.Dir = twin.URI + "/t.lance"
				copyTree(t, f.Dir, twin.Dir)
				res, err := Run(t.Context(), openHandle(t, f.Dir), DefaultOptions(), Env{})
				if err != nil {
					t.Fatal(err)
				}
				if res.Commit == nil || len(res.Plan.Skips) != 0 || res.RewrittenIndices != 1 {
					t.Fatalf("compaction: committed %v, skips %+v, %d indexes remapped", res.Commit != nil, res.Plan.Skips, res.RewrittenIndices)
				}
				out := f.Run(t, lancedb.Open(), lancedb.IndexStats("vec_idx"))
				if st, err := out.IndexStats(1); err != nil || st == nil || st.NumUnindexedRows != 0 || st.NumIndexedRows != 1000-250-107 {
					t.Fatalf("index stats after compaction: %+v %v", st, err)
				}
				remapped := lanceDBRemapVersion(t, twin)
				// A search list as long as the table visits every node the
				// graphs reach: the remapped storage's codes decide it.
				sameHits(t, searchAtEf(t, f, 0, d, 2, 1000), searchAtEf(t, twin, remapped, d, 2, 1000), "LanceDB's remap, searched with ef 1000,")
				ours, theirs := recallAt10(t, f, 0, d, 2), recallAt10(t, twin, remapped, d, 2)
				t.Logf("recall@10: compactord %.3f, LanceDB %.3f", ours, theirs)
				if ours < theirs-0.01 {
					t.Errorf("recall@10 %.3f after compactord's remap, LanceDB's own %.3f", ours, theirs)
				}
			})
		}
	}
}

// TestRunRefusesCorruptVectorIndex: a vector index whose storage file is
// truncated or bit-flipped stops the inline compaction with a one-line
// error naming the index; nothing is committed.
func TestRunRefusesCorruptVectorIndex(t *testing.T) {
	lancedb.Require(t)
	for _, damage := range []string{"truncated", "flipped"} {
		t.Run(damage, func(t *testing.T) {
			f := vectorDeletesTable(t, "ivf_pq", map[string]any{"numPartitions": 4, "numSubVectors": 4})
			ps, err := filepath.Glob(filepath.Join(f.Dir, "_indices", "*", "auxiliary.idx"))
			if err != nil || len(ps) != 1 {
				t.Fatalf("storage files %v %v", ps, err)
			}
			b, err := os.ReadFile(ps[0])
			if err != nil {
				t.Fatal(err)
			}
			if damage == "truncated" {
				b = b[:len(b)/2]
			} else {
				for i := len(b) - 200; i < len(b)-60; i++ {
					b[i] ^= 0x5a
				}
			}
			if err := os.WriteFile(ps[0], b, 0o644); err != nil {
				t.Fatal(err)
			}
			h := openHandle(t, f.Dir)
			before, _, err := h.ReadForWrite(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			_, runErr := Run(t.Context(), h, DefaultOptions(), Env{})
			if runErr == nil || strings.Contains(runErr.Error(), "\n") || !strings.Contains(runErr.Error(), "vec_idx") {
				t.Fatalf("compaction over a %s vector index: %v; want a one-line error naming vec_idx", damage, runErr)
			}
			t.Logf("%s: %v", damage, runErr)
			after, _, err := h.ReadForWrite(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			// ReserveFragments may have landed; no Rewrite did.
			if v, v0 := after.Manifest.GetVersion(), before.Manifest.GetVersion(); v > v0+1 || len(after.Manifest.GetFragments()) != len(before.Manifest.GetFragments()) {
				t.Fatalf("version %d with %d fragments after a refused compaction of version %d with %d", v, len(after.Manifest.GetFragments()), v0, len(before.Manifest.GetFragments()))
			}
		})
	}
}
