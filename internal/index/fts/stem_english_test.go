package fts

import (
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/testing/lancedb"
)

// englishWords is testdata/english_words.txt (Snowball's English test
// vocabulary: 29,414 words, a few with apostrophes) plus words that reach
// the stemmer's rarer rules: exceptions, the R1 prefixes, the -ing and
// -eed cases, y handling, and non-ASCII letters (never vowels).
func englishWords(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("testdata/english_words.txt")
	if err != nil {
		t.Fatal(err)
	}
	words := strings.Fields(string(b))
	words = append(words, strings.Fields(`added egged odded adding ebbing dying lying tying vying flying eying
		skis skies sky idly gently ugly early only singly news howe atlas cosmos bias andes
		inning outing canning herring earring evening evenings proceed exceed succeed proceeded exceedingly
		past pasted pasting paste universe universal university later lateral emerge emergency organ organic
		organize intern internal international interval interfere generous general communism arsenal
		ornithologists apologists geologist biologist ogist logist hopped hoped hoping hopping
		crying cry by say sayings yes yyy ayyy 'yell' 'tis o'clock rock'n'roll ''' '' y ' ys yy
		café naïve résumé façades über straße cafés naïveté ħotel éed éing yéd ñying
		ied ies ties cries sses ss us s is as
		a ab abc abed bed bled`)...)
	return words
}

// stemProbes are 20,000 pseudo-random strings over letters that steer
// the stemmer (vowels, y and Y, suffix letters, apostrophes, non-ASCII
// letters), a fixed sample.
func stemProbes() []string {
	const alphabet = "aeiouyYsdlngcbtrmpzhx'éßİ"
	letters := []rune(alphabet)
	rng := rand.New(rand.NewPCG(97, 0xb1acc))
	var out []string
	for range 20_000 {
		var b strings.Builder
		for range 1 + rng.IntN(12) {
			b.WriteRune(letters[rng.IntN(len(letters))])
		}
		out = append(out, b.String())
	}
	return out
}

// TestStemEnglishLanceDB: LanceDB (stem on, no stop words, whitespace
// tokens, not lower-cased) indexes every vocabulary word and every probe
// string as stemEnglish stems it: zero differences over 49,000+ words.
func TestStemEnglishLanceDB(t *testing.T) {
	lancedb.Require(t)
	words := append(englishWords(t), stemProbes()...)
	cfg := map[string]any{"baseTokenizer": "whitespace", "lowercase": false, "stem": true, "removeStopWords": false, "asciiFolding": false, "maxTokenLength": 1000}
	got := lanceBags(t, []map[string]any{cfg}, words)[0]
	diffs := 0
	for i, w := range words {
		want := bagOf([]string{stemEnglish(w)})
		if !sameBag(got[i], want) {
			if diffs++; diffs <= 20 {
				t.Errorf("%q: LanceDB %s, stemEnglish %s", w, bagString(got[i]), bagString(want))
			}
		}
	}
	if diffs > 0 {
		t.Fatalf("%d of %d words stem differently", diffs, len(words))
	}
	if len(words) < 49000 {
		t.Fatalf("only %d words", len(words))
	}
}

// TestStemEnglish pins a few stems (so that a wrong change shows without
// LanceDB too), as TestStemEnglishLanceDB found LanceDB 0.39 to stem them.
func TestStemEnglish(t *testing.T) {
	for in, want := range map[string]string{
		"running": "run", "added": "add", "dying": "die", "international": "internat", "organizations": "organiz",
		"ornithologists": "ornitholog", "lateral": "lateral", "generously": "generous", "hopping": "hop", "hoped": "hope",
		"skies": "sky", "evening": "evening", "proceeding": "proceed", "cries": "cri", "ties": "tie", "crying": "cri",
	} {
		if got := stemEnglish(in); got != want {
			t.Errorf("stemEnglish(%q) = %q, want %q", in, got, want)
		}
	}
}
