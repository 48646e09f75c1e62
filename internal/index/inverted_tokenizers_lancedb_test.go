package index

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/testing/lancedb"
)

// tokenizerIndexes are full-text index configurations (Index.fts options)
// compactord reproduces, one per column d<i> of the test tables: LanceDB's
// default (simple, lower case, English stemming and stop words, ASCII
// folding, max 40 bytes), whitespace variants, custom stop words, n-grams,
// raw, and Spanish, French and German stemming and stop words.
var tokenizerIndexes = []map[string]any{
	{},
	{"baseTokenizer": "whitespace", "stem": false, "removeStopWords": false, "asciiFolding": false},
	{"baseTokenizer": "whitespace", "lowercase": true, "asciiFolding": false},
	{"customStopWords": []string{"alpha1", "run", "cafe"}},
	{"lowercase": false, "asciiFolding": false, "maxTokenLength": 8},
	{"baseTokenizer": "ngram", "ngramMinLength": 2, "ngramMaxLength": 3, "stem": false},
	{"baseTokenizer": "raw", "stem": false, "removeStopWords": false},
	{"language": "Spanish"},
	{"language": "French"},
	{"language": "German"},
}

// multilingualWords are words in many scripts and forms: accents, ß,
// Turkish dotted I, Greek with final sigma, Cyrillic, CJK, emoji, digits,
// a ligature, and English words that stem.
var multilingualWords = []string{"Café", "naïve", "Straße", "İstanbul", "ΣΊΣΥΦΟΣ", "Москва", "中文", "😀", "organizations",
	"Running", "RÉSUMÉ", "ünïcödé", "42", "①", "ﬁne", "Ёлка", "runs", "organization", "canciones", "rápidamente", "cantándole", "l'élève", "théâtralement", "Noël", "aujourd'hui", "Häuser", "Möglichkeiten"}

// multilingualText is row id's text: a null when id % 10 = 3, empty when
// id % 10 = 4, else three words of multilingualWords, a word of its own
// (w<id>), a shared one (alpha<id%5>), and stop words and repeats for
// every fourth row.
func multilingualText(id int64) any {
	switch id % 10 {
	case 3:
		return nil
	case 4:
		return ""
	}
	n := int64(len(multilingualWords))
	s := fmt.Sprintf("%s %s w%d alpha%d, %s", multilingualWords[id%n], multilingualWords[(id*7+3)%n], id, id%5, multilingualWords[(id*3+1)%n])
	if id%4 == 0 {
		s += " delta delta the and it's"
	}
	return s
}

func multilingualRows(lo, hi int64) []lancedb.Row {
	var out []lancedb.Row
	for i := lo; i < hi; i++ {
		r := lancedb.Row{"id": i}
		for c := range tokenizerIndexes {
			r[fmt.Sprintf("d%d", c)] = multilingualText(i)
		}
		out = append(out, r)
	}
	return out
}

func multilingualSchema() []lancedb.Column {
	cols := []lancedb.Column{{Name: "id", Type: "int64"}}
	for c := range tokenizerIndexes {
		cols = append(cols, lancedb.Column{Name: fmt.Sprintf("d%d", c), Type: "utf8", Nullable: true})
	}
	return cols
}

func createTokenizerIndexes() []lancedb.Step {
	var steps []lancedb.Step
	for c, o := range tokenizerIndexes {
		opts := map[string]any{"withPosition": false}
		for k, v := range o {
			opts[k] = v
		}
		steps = append(steps, lancedb.CreateVectorIndex(fmt.Sprintf("d%d", c), "fts", fmt.Sprintf("d%d_idx", c), opts))
	}
	return steps
}

// multilingualQueries: single terms in each script, several terms, a
// term only rows 300..399 hold (w350), a stop word, stemmed variants, and
// a stop word under custom stop words.
var multilingualQueries = []string{"alpha3", "café", "cafe", "straße", "strasse", "istanbul", "İstanbul", "σίσυφος", "москва", "中文",
	"😀", "running", "run", "organ", "42", "fine", "ёлка", "the", "w350", "w17", "alpha1 organizations", "résumé naïve w399", "delta",
	"Running quickly", "it's", "canción", "rápida", "cantar", "de la", "élève", "théâtral", "noël", "élèves", "haus", "möglich", "hauser"}

// tokenizerScores runs multilingualQueries on every column: per column
// and query, id → score.
func tokenizerScores(t *testing.T, f *lancedb.Fixture) [][]map[int64]float64 {
	t.Helper()
	steps := []lancedb.Step{lancedb.Open()}
	for c := range tokenizerIndexes {
		for _, q := range multilingualQueries {
			steps = append(steps, lancedb.TextSearch(q, fmt.Sprintf("d%d", c), 0, []string{"id"}))
		}
	}
	out := f.Run(t, steps...)
	res := make([][]map[int64]float64, len(tokenizerIndexes))
	k := 1
	for c := range tokenizerIndexes {
		for range multilingualQueries {
			rows, err := out.Rows(k)
			if err != nil {
				t.Fatal(err)
			}
			k++
			m := map[int64]float64{}
			for _, r := range rows {
				id, _ := r.Int("id")
				m[id], _ = r.Float("_score")
			}
			res[c] = append(res[c], m)
		}
	}
	return res
}

// sameScores fails the test where got and want (tokenizerScores) differ
// in rows or by more than 1e-4 in a score, and returns how many queries
// found rows.
func sameScores(t *testing.T, got, want [][]map[int64]float64, theirs string) int {
	t.Helper()
	found := 0
	for c := range tokenizerIndexes {
		for i, q := range multilingualQueries {
			g, w := got[c][i], want[c][i]
			if len(w) > 0 {
				found++
			}
			if len(g) != len(w) {
				t.Errorf("d%d %v %q: %d rows, %s %d", c, tokenizerIndexes[c], q, len(g), theirs, len(w))
				continue
			}
			for id, s := range w {
				if gs, ok := g[id]; !ok || math.Abs(gs-s) > 1e-4 {
					t.Errorf("d%d %v %q: id %d score %v (present %v), %s %v", c, tokenizerIndexes[c], q, id, gs, ok, theirs, s)
					break
				}
			}
		}
	}
	return found
}

// TestCatchUpFullTextTokenizersWithLanceDB: full-text indexes of every
// configuration in tokenizerIndexes over 300 rows of multilingual text,
// with 100 rows appended since, are caught up by compactord; LanceDB then
// counts no unindexed row and answers every query with the rows and BM25
// scores (within 1e-4) of a copy its own optimize() caught up.
func TestCatchUpFullTextTokenizersWithLanceDB(t *testing.T) {
	lancedb.Require(t)
	ours := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
	ours.Dir = filepath.Join(ours.URI, "t.lance")
	steps := append([]lancedb.Step{lancedb.Create(multilingualSchema(), multilingualRows(0, 300))}, createTokenizerIndexes()...)
	ours.Run(t, append(steps, lancedb.Add(multilingualRows(300, 400)))...)
	theirs := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
	theirs.Dir = filepath.Join(theirs.URI, "t.lance")
	copyDir(t, ours.Dir, theirs.Dir)
	theirs.Run(t, lancedb.Optimize(lancedb.OptimizeOpts{}))

	h := openHandle(t, ours.Dir)
	res, err := CatchUp(t.Context(), h, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Committed || len(res.Indices) != len(tokenizerIndexes) || len(res.Skipped) != 0 {
		t.Fatalf("catch-up %+v: want all %d indexes caught up", res, len(tokenizerIndexes))
	}
	for _, ix := range res.Indices {
		// 80 rows have text; under raw only those of less than 40 bytes
		// make a token.
		if want := 80; ix.Kind != KindInverted || ix.Rows != want && ix.Name != "d6_idx" || ix.Rows == 0 {
			t.Errorf("%s: %+v, want an inverted catch-up over %d docs", ix.Name, ix, want)
		}
	}
	checkTokenizerIndexes(t, ours)
	cs := checkAll(t, h)
	for c := range tokenizerIndexes {
		if r := cs[fmt.Sprintf("d%d_idx", c)]; !r.Checked || len(r.Problems) != 0 {
			t.Errorf("d%d_idx content check: %+v", c, r)
		}
	}
	want := tokenizerScores(t, theirs)
	if found := sameScores(t, tokenizerScores(t, ours), want, "LanceDB's optimize()"); found < len(tokenizerIndexes)*len(multilingualQueries)/2 {
		t.Fatalf("only %d queries found rows: the test data does not exercise the tokenizers", found)
	}
	// The stop word finds nothing under the default configuration, the
	// stemmed variant finds what the plain word does, and folding makes
	// café and cafe one term.
	q := func(s string) int {
		for i, x := range multilingualQueries {
			if x == s {
				return i
			}
		}
		t.Fatalf("no query %q", s)
		return 0
	}
	d := want[0]
	if len(d[q("the")]) != 0 || len(d[q("running")]) == 0 || len(d[q("running")]) != len(d[q("run")]) || len(d[q("café")]) != len(d[q("cafe")]) || len(d[q("w350")]) != 1 {
		t.Fatalf("LanceDB's default index answers are not what the data says: the %d, running %d, run %d, café %d, cafe %d, w350 %d rows",
			len(d[q("the")]), len(d[q("running")]), len(d[q("run")]), len(d[q("café")]), len(d[q("cafe")]), len(d[q("w350")]))
	}
}

// checkTokenizerIndexes fails the test unless LanceDB counts no
// unindexed row in any of the indexes.
func checkTokenizerIndexes(t *testing.T, f *lancedb.Fixture) {
	t.Helper()
	steps := []lancedb.Step{lancedb.Open()}
	for c := range tokenizerIndexes {
		steps = append(steps, lancedb.IndexStats(fmt.Sprintf("d%d_idx", c)))
	}
	out := f.Run(t, steps...)
	for c := range tokenizerIndexes {
		if st := stats(t, out, 1+c); st.NumUnindexedRows != 0 {
			t.Errorf("d%d_idx indexStats: %+v", c, st)
		}
	}
}

// TestRebuildFullTextTokenizersWithLanceDB: full-text indexes of every
// configuration in tokenizerIndexes, of two partitions (LanceDB's
// optimize() added one) over multilingual rows with deletes, are rebuilt
// into one partition each; LanceDB then counts no unindexed row and
// answers every query with the rows and scores (within 1e-4) of a copy on
// which it created the indexes afresh.
func TestRebuildFullTextTokenizersWithLanceDB(t *testing.T) {
	lancedb.Require(t)
	ours := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
	ours.Dir = filepath.Join(ours.URI, "t.lance")
	steps := append([]lancedb.Step{lancedb.Create(multilingualSchema(), multilingualRows(0, 300))}, createTokenizerIndexes()...)
	ours.Run(t, append(steps, lancedb.Add(multilingualRows(300, 400)), lancedb.Optimize(lancedb.OptimizeOpts{}), lancedb.Delete("id % 9 = 0"))...)
	theirs := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
	theirs.Dir = filepath.Join(theirs.URI, "t.lance")
	copyDir(t, ours.Dir, theirs.Dir)
	theirs.Run(t, createTokenizerIndexes()...)

	h := openHandle(t, ours.Dir)
	for c := range tokenizerIndexes {
		name := fmt.Sprintf("d%d_idx", c)
		res, err := Rebuild(t.Context(), h, name, RebuildOptions{})
		if err != nil || res.Kind != KindInverted || len(res.Removed) != 1 {
			t.Fatalf("rebuild %s: %+v, %v", name, res, err)
		}
	}
	checkTokenizerIndexes(t, ours)
	cs := checkAll(t, h)
	for c := range tokenizerIndexes {
		if r := cs[fmt.Sprintf("d%d_idx", c)]; !r.Checked || len(r.Problems) != 0 || r.Masked != 0 {
			t.Errorf("d%d_idx content check: %+v", c, r)
		}
	}
	sameScores(t, tokenizerScores(t, ours), tokenizerScores(t, theirs), "a fresh LanceDB index")
}

// otherLanguageFixture is a table of 120 rows whose full-text index doc_idx
// stems Turkish (which compactord does not reproduce) and covers the
// first 100.
func otherLanguageFixture(t *testing.T) *lancedb.Fixture {
	t.Helper()
	f := &lancedb.Fixture{URI: t.TempDir(), Table: "t"}
	f.Dir = filepath.Join(f.URI, "t.lance")
	schema := []lancedb.Column{{Name: "id", Type: "int64"}, {Name: "doc", Type: "utf8", Nullable: true}}
	f.Run(t, lancedb.Create(schema, invertedRows(0, 100)), lancedb.CreateVectorIndex("doc", "fts", "doc_idx", map[string]any{"language": "Turkish", "withPosition": false}),
		lancedb.Add(invertedRows(100, 120)))
	return f
}

// TestCatchUpSkipsOtherLanguages: an index compactord cannot reproduce
// (Turkish stemming) is left to LanceDB with the reason, nothing committed.
func TestCatchUpSkipsOtherLanguages(t *testing.T) {
	lancedb.Require(t)
	h := openHandle(t, otherLanguageFixture(t).Dir)
	v := mustRead(t, h).Manifest.GetVersion()
	res, err := CatchUp(t.Context(), h, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Committed || len(res.Skipped) != 1 || !strings.Contains(res.Skipped[0].Reason, "Turkish") || mustRead(t, h).Manifest.GetVersion() != v {
		t.Fatalf("catch-up of a Turkish-stemmed index: %+v; want it skipped naming the language, nothing committed", res)
	}
}
