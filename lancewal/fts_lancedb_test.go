package lancewal

import (
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/compactord/compactord/internal/clock"
	"github.com/compactord/compactord/internal/commit"
	"github.com/compactord/compactord/internal/index"
	"github.com/compactord/compactord/internal/index/fts"
	"github.com/compactord/compactord/internal/merge"
	"github.com/compactord/compactord/internal/storage"
	"github.com/compactord/compactord/internal/table"
	"github.com/compactord/compactord/internal/testing/lancedb"
	"github.com/compactord/compactord/internal/trim"
)

var ftsOpts = map[string]any{"baseTokenizer": "whitespace", "stem": false, "removeStopWords": false, "asciiFolding": false}

// ftsPosOpts: a simple tokenizer with positions, whose max_token_length
// drops the word "extralong" (a position gap).
var ftsPosOpts = map[string]any{"baseTokenizer": "simple", "stem": false, "removeStopWords": false, "asciiFolding": false, "withPosition": true, "maxTokenLength": 7}

// ftsGenRows are generation g's rows: keys 0..4 (overwriting base rows)
// and 100g..100g+9, with words shared by all, by some and by one row.
func ftsGenRows(g int64) []lancedb.Row {
	var out []lancedb.Row
	for _, id := range append([]int64{0, 1, 2, 3, 4}, 100*g, 100*g+1, 100*g+2, 100*g+3, 100*g+4, 100*g+5, 100*g+6, 100*g+7, 100*g+8, 100*g+9) {
		out = append(out, lancedb.BasicRow(id, fmt.Sprintf("Gen%d common w%d extralong alpha%d common", g, id, id%3)))
	}
	return out
}

var ftsGenQueries = []string{"common", "gen1", "gen2", "alpha1", "w101", "w3", "v7", "alpha2 w202"}

// ftsGenPhrases are phrase queries for the index with positions: adjacent
// words, words across the dropped "extralong" (slop 1, then 0), and the
// wrong order.
var ftsGenPhrases = []lancedb.Step{lancedb.PhraseSearch("gen2 common", "s", 0, []string{"id"}), lancedb.PhraseSearch("w101 alpha2", "s", 1, []string{"id"}),
	lancedb.PhraseSearch("w101 alpha2", "s", 0, []string{"id"}), lancedb.PhraseSearch("common gen1", "s", 0, []string{"id"})}

// lsmTextScores runs ftsGenQueries (and, with positions, ftsGenPhrases)
// through LanceDB's LSM view or not: per query, id → score.
func lsmTextScores(t *testing.T, f *lancedb.Fixture, lsm, phrases bool) []map[int64]float64 {
	t.Helper()
	steps := []lancedb.Step{lancedb.Open()}
	for _, q := range ftsGenQueries {
		steps = append(steps, lancedb.TextSearch(q, "s", 0, []string{"id"}).With("lsm", lsm))
	}
	if phrases {
		for _, p := range ftsGenPhrases {
			steps = append(steps, maps.Clone(p).With("lsm", lsm))
		}
	}
	out := f.Run(t, steps...)
	var res []map[int64]float64
	for i := range len(steps) - 1 {
		rows, err := out.Rows(1 + i)
		if err != nil {
			t.Fatal(err)
		}
		m := map[int64]float64{}
		for _, r := range rows {
			id, _ := r.Int("id")
			m[id], _ = r.Float("_score")
		}
		res = append(res, m)
	}
	return res
}

// genSegments decodes the full-text copies of the table's generations, in
// generation order.
func genSegments(t *testing.T, dir string) []*fts.Segment {
	t.Helper()
	gens, _ := filepath.Glob(filepath.Join(dir, "_mem_wal", "*", "*_gen_*"))
	gen := func(p string) int {
		n, err := strconv.Atoi(p[strings.LastIndex(p, "_")+1:])
		if err != nil {
			t.Fatalf("generation directory %s", p)
		}
		return n
	}
	slices.SortFunc(gens, func(a, b string) int { return gen(a) - gen(b) })
	var out []*fts.Segment
	for _, g := range gens {
		segs, _ := filepath.Glob(filepath.Join(g, "_indices", "*", fts.MetadataFile))
		var seg *fts.Segment
		for _, md := range segs {
			d := filepath.Dir(md)
			s, err := fts.ReadSegment(func(n string) (io.ReaderAt, int64, error) {
				f, err := os.Open(filepath.Join(d, n))
				if err != nil {
					return nil, 0, err
				}
				t.Cleanup(func() { _ = f.Close() })
				st, err := f.Stat()
				if err != nil {
					return nil, 0, err
				}
				return f, st.Size(), nil
			})
			if err != nil {
				t.Fatalf("%s: %v", d, err)
			}
			seg = s
		}
		if seg == nil {
			t.Fatalf("generation %s has no full-text copy", g)
		}
		out = append(out, seg)
	}
	return out
}

// TestGoGenerationFullTextCopy: on two copies of a MemWAL table whose
// write spec maintains a whitespace full-text index, the same rows are
// written in two generations, by LanceDB's MemWAL writer on one and by
// the Go writer on the other. Each generation the Go writer flushed
// carries a full-text copy with LanceDB's docs, tokens, postings and
// impacts (block scores within a few ulps), LanceDB's LSM full-text
// search returns the same ids and scores (within 1e-4) on both tables, and
// merge, index catch-up and trim with no reader grace retire the Go
// writer's generations, after which LanceDB's base-table search finds
// their rows.
func TestGoGenerationFullTextCopy(t *testing.T) {
	lancedb.Require(t)
	t.Run("whitespace", func(t *testing.T) { testGoGenerationFullTextCopy(t, ftsOpts) })
	t.Run("positions", func(t *testing.T) { testGoGenerationFullTextCopy(t, ftsPosOpts) })
}

func testGoGenerationFullTextCopy(t *testing.T, opts map[string]any) {
	withPos := opts["withPosition"] == true
	setup := []lancedb.Step{lancedb.Create(lancedb.BasicSchema, lancedb.BasicRows(0, 20)), lancedb.CreateVectorIndex("s", "fts", "s_idx", opts),
		lancedb.SetPrimaryKey("id"), lancedb.SetLsmWriteSpec(lancedb.LsmWriteSpec{SpecType: "unsharded", MaintainedIndexes: []string{"s_idx"}})}
	theirs := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
	theirs.Dir = filepath.Join(theirs.URI, "t.lance")
	ours := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
	ours.Dir = filepath.Join(ours.URI, "t.lance")
	steps := slices.Clone(setup)
	for g := int64(1); g <= 2; g++ {
		steps = append(steps, lancedb.MergeInsert("id", ftsGenRows(g)), lancedb.CloseLsmWriters())
	}
	theirs.Run(t, steps...)
	ours.Run(t, setup...)

	ctx := t.Context()
	tbl, err := OpenTable(ctx, ours.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Close()
	shard, err := tbl.ShardFor(ctx, int64(0))
	if err != nil {
		t.Fatal(err)
	}
	w, err := tbl.OpenWriter(ctx, shard, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for g := int64(1); g <= 2; g++ {
		var rows []Row
		for _, r := range ftsGenRows(g) {
			rows = append(rows, Row(r))
		}
		if err := w.Upsert(ctx, rows); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// The copies hold what LanceDB's do (but for the random partition id).
	og, tg := genSegments(t, ours.Dir), genSegments(t, theirs.Dir)
	if len(og) != 2 || len(tg) != 2 {
		t.Fatalf("%d and %d generations", len(og), len(tg))
	}
	for g := range og {
		o, th := og[g].Partitions[0], tg[g].Partitions[0]
		if !slices.Equal(o.RowIDs, th.RowIDs) || !slices.Equal(o.NumTokens, th.NumTokens) || o.TotalTokens != th.TotalTokens || len(o.Tokens) != len(th.Tokens) {
			t.Fatalf("generation %d: docs %v %v, LanceDB's %v %v", g+1, o.RowIDs, o.NumTokens, th.RowIDs, th.NumTokens)
		}
		for tok, id := range th.Tokens {
			oid, ok := o.Tokens[tok]
			if !ok || oid != id || !slices.EqualFunc(o.Impacts[oid], th.Impacts[id], func(a, b []byte) bool { return string(a) == string(b) }) {
				t.Fatalf("generation %d token %q: id %d (present %v), LanceDB's %d, or impacts differ", g+1, tok, oid, ok, id)
			}
			a, err := o.Decode(oid, false)
			if err != nil {
				t.Fatal(err)
			}
			b, err := th.Decode(id, false)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(a.Docs, b.Docs) || !slices.Equal(a.Freqs, b.Freqs) || !slices.Equal(a.Positions, b.Positions) || (withPos && len(a.Positions) == 0) {
				t.Fatalf("generation %d token %q: postings differ", g+1, tok)
			}
			for i := range a.BlockScores {
				if d := int64(math.Float32bits(a.BlockScores[i])) - int64(math.Float32bits(b.BlockScores[i])); d < 0 || d > 5 {
					t.Fatalf("generation %d token %q: block score %v, LanceDB's %v", g+1, tok, a.BlockScores[i], b.BlockScores[i])
				}
			}
		}
	}

	got, want := lsmTextScores(t, ours, true, withPos), lsmTextScores(t, theirs, true, withPos)
	for i := range want {
		q := fmt.Sprint(i)
		if i < len(ftsGenQueries) {
			q = ftsGenQueries[i]
		}
		if len(got[i]) != len(want[i]) {
			t.Errorf("LSM search %q: %d rows, on LanceDB's generations %d", q, len(got[i]), len(want[i]))
			continue
		}
		for id, s := range want[i] {
			if g, ok := got[i][id]; !ok || math.Abs(g-s) > 1e-4 {
				t.Errorf("LSM search %q: id %d score %v (present %v), on LanceDB's generations %v", q, id, g, ok, s)
				break
			}
		}
	}
	// Generation 2 overwrote keys 0..4: gen1 is left in 100..109 only.
	// With positions, "w101 alpha2" matches row 101 across the dropped
	// word at slop 1 only.
	if len(want[0]) != 25 || len(want[1]) != 10 || len(want[2]) != 15 || len(want[6]) != 1 ||
		withPos && (len(want[8]) != 15 || len(want[9]) != 1 || len(want[10]) != 0 || len(want[11]) != 0) {
		t.Fatalf("LanceDB's LSM answers are not what the data says: common %d, gen1 %d, gen2 %d, v7 %d rows", len(want[0]), len(want[1]), len(want[2]), len(want[6]))
	}

	// merge, index catchup and trim with no reader grace retire them.
	b, err := storage.Open(ctx, "file://"+ours.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, err := commit.NewCommitter(commit.DefaultConfig(), b, clock.Real(), commit.NewMetrics(prometheus.NewRegistry()), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	h, err := table.New(b, c)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := merge.RunAll(ctx, h, merge.Env{MaxGenerations: 8}); err != nil || len(out.Landed) == 0 {
		t.Fatalf("merge: %v, %+v", err, out)
	}
	if cu, err := index.CatchUp(ctx, h, index.Options{}); err != nil || !cu.Committed || len(cu.Indices) != 1 {
		t.Fatalf("catch-up: %+v, %v", cu, err)
	}
	cfg := trim.DefaultConfig()
	cfg.ReaderGrace = 0
	res, err := trim.Run(ctx, b, cfg, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if res.DeletedGenerations != 2 {
		t.Fatalf("trim deleted %d generations, want 2", res.DeletedGenerations)
	}
	if gens, _ := filepath.Glob(filepath.Join(ours.Dir, "_mem_wal", "*", "*_gen_*")); len(gens) != 0 {
		t.Fatalf("generations left: %v", gens)
	}
	base := lsmTextScores(t, ours, false, withPos)
	for i := range want {
		q := fmt.Sprint(i)
		if !slices.Equal(slices.Sorted(maps.Keys(base[i])), slices.Sorted(maps.Keys(want[i]))) {
			t.Errorf("base-table search %q after the merge: ids %v, LanceDB's LSM search before %v", q, slices.Sorted(maps.Keys(base[i])), slices.Sorted(maps.Keys(want[i])))
		}
	}
}

// TestGoWriterRefusesUnreproducedFullText: a maintained full-text index
// whose tokenizer compactord does not reproduce (LanceDB's default
// stems) keeps the Go writer from claiming a shard, in one line naming
// the option, and nothing is written.
func TestGoWriterRefusesUnreproducedFullText(t *testing.T) {
	lancedb.Require(t)
	f := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
	f.Dir = filepath.Join(f.URI, "t.lance")
	f.Run(t, lancedb.Create(lancedb.BasicSchema, lancedb.BasicRows(0, 20)), lancedb.CreateIndex("s", "fts", "s_idx"),
		lancedb.SetPrimaryKey("id"), lancedb.SetLsmWriteSpec(lancedb.LsmWriteSpec{SpecType: "unsharded", MaintainedIndexes: []string{"s_idx"}}))
	ctx := t.Context()
	tbl, err := OpenTable(ctx, f.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Close()
	shard, err := tbl.ShardFor(ctx, int64(0))
	if err != nil {
		t.Fatal(err)
	}
	_, err = tbl.OpenWriter(ctx, shard, WriterOptions{})
	if err == nil || !strings.Contains(err.Error(), `maintained index "s_idx"`) || !strings.Contains(err.Error(), "stem") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("OpenWriter: %v; want one line naming s_idx and stem", err)
	}
	var written []string
	_ = filepath.WalkDir(filepath.Join(f.Dir, "_mem_wal"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			written = append(written, p)
		}
		return nil
	})
	if len(written) != 0 {
		t.Errorf("the refused writer wrote %v", written)
	}
}

// TestEnableMemWALMaintainsFullText: EnableMemWAL accepts a full-text
// index the writer can copy as maintained, and refuses, in one line
// naming the option, one whose tokenizer compactord does not reproduce.
func TestEnableMemWALMaintainsFullText(t *testing.T) {
	lancedb.Require(t)
	f := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
	f.Dir = filepath.Join(f.URI, "t.lance")
	f.Run(t, lancedb.Create(lancedb.BasicSchema, lancedb.BasicRows(0, 20)), lancedb.CreateVectorIndex("s", "fts", "s_idx", ftsOpts),
		lancedb.CreateIndex("s", "fts", "stem_idx").With("replace", false), lancedb.SetPrimaryKey("id"))
	ctx := t.Context()
	tbl, err := OpenTable(ctx, f.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Close()
	_, err = tbl.EnableMemWAL(ctx, Config{Sharding: Unsharded, MaintainedIndexes: []string{"s_idx", "stem_idx"}})
	if err == nil || !strings.Contains(err.Error(), `"stem_idx"`) || !strings.Contains(err.Error(), "stem") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("EnableMemWAL maintaining stem_idx: %v; want one line naming it and stem", err)
	}
	// LanceDB's LSM search takes one full-text index per column.
	f.Run(t, lancedb.Open(), lancedb.DropIndex("stem_idx"))
	cfg, err := tbl.EnableMemWAL(ctx, Config{Sharding: Unsharded, MaintainedIndexes: []string{"s_idx"}})
	if err != nil || !slices.Equal(cfg.MaintainedIndexes, []string{"s_idx"}) {
		t.Fatalf("EnableMemWAL maintaining s_idx: %+v, %v", cfg, err)
	}
	shard, err := cfg.ShardFor(int64(1))
	if err != nil {
		t.Fatal(err)
	}
	w, err := tbl.OpenWriter(ctx, shard, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Upsert(ctx, []Row{{"id": int64(500), "s": "fresh words", "cat": int32(1), "f": 1.5}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	out := f.Run(t, lancedb.Open(), lancedb.TextSearch("fresh", "s", 0, []string{"id"}).With("lsm", true))
	if rows, err := out.Rows(1); err != nil || len(rows) != 1 {
		t.Fatalf("LanceDB's LSM search for the Go writer's row: %v (%v)", rows, err)
	}
}
