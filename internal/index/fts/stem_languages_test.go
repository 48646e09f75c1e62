package fts

import (
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/testing/lancedb"
)

// TestStemSpanishLanceDB: LanceDB (language Spanish, stem on, no stop
// words, whitespace tokens, not lower-cased) indexes every word of
// testdata/spanish_words.txt (Snowball's Spanish test vocabulary, as
// shipped in kljensen/snowball's tests) and 20,000 pseudo-random strings
// over letters that steer the stemmer as stemSpanish stems them.
func TestStemSpanishLanceDB(t *testing.T) {
	stemLanguageLanceDB(t, "Spanish", stemSpanish, "testdata/spanish_words.txt", "aeiouáéíóúüñyglrsndmtcbvAÉ")
}

// TestStemFrenchLanceDB: as TestStemSpanishLanceDB, for French
// (testdata/french_words.txt, Snowball's French test vocabulary) and
// stemFrench.
func TestStemFrenchLanceDB(t *testing.T) {
	stemLanguageLanceDB(t, "French", stemFrench, "testdata/french_words.txt", "aeiouyâàëéêèïîôûùçqlsnrtmHIUY'xbdv")
}

// stemLanguageLanceDB compares stem with LanceDB's stemming of language
// over the vocabulary file and 20,000 pseudo-random strings over letters.
func stemLanguageLanceDB(t *testing.T, language string, stem func(string) string, vocabulary, alphabet string) {
	lancedb.Require(t)
	b, err := os.ReadFile(vocabulary)
	if err != nil {
		t.Fatal(err)
	}
	words := strings.Fields(string(b))
	letters := []rune(alphabet)
	rng := rand.New(rand.NewPCG(34, uint64(len(language))))
	for range 20_000 {
		var sb strings.Builder
		for range 1 + rng.IntN(12) {
			sb.WriteRune(letters[rng.IntN(len(letters))])
		}
		words = append(words, sb.String())
	}
	cfg := map[string]any{"baseTokenizer": "whitespace", "language": language, "lowercase": false, "stem": true, "removeStopWords": false, "asciiFolding": false, "maxTokenLength": 1000}
	got := lanceBags(t, []map[string]any{cfg}, words)[0]
	diffs := 0
	for i, w := range words {
		if want := bagOf([]string{stem(w)}); !sameBag(got[i], want) {
			if diffs++; diffs <= 20 {
				t.Errorf("%q: LanceDB %s, ours %s", w, bagString(got[i]), bagString(want))
			}
		}
	}
	if diffs > 0 || len(words) < 40000 {
		t.Fatalf("%d of %d words stem differently", diffs, len(words))
	}
}

// TestStemGermanLanceDB: as TestStemSpanishLanceDB, for German
// (testdata/german_words.txt, Snowball's German vocabulary from
// snowball-data) and stemGerman.
func TestStemGermanLanceDB(t *testing.T) {
	stemLanguageLanceDB(t, "German", stemGerman, "testdata/german_words.txt", "aeiouyäöüßqnrstlkgdhUYé'")
}

// TestStemItalianLanceDB: as TestStemSpanishLanceDB, for Italian
// (testdata/italian_words.txt, Snowball's Italian vocabulary from
// snowball-data) and stemItalian.
func TestStemItalianLanceDB(t *testing.T) {
	stemLanguageLanceDB(t, "Italian", stemItalian, "testdata/italian_words.txt", "aeiouàèìòùáéíóúqhcgnrtsldv'IU")
}

// TestStemPortugueseLanceDB: as TestStemSpanishLanceDB, for Portuguese
// (testdata/portuguese_words.txt, Snowball's Portuguese vocabulary from
// snowball-data) and stemPortuguese.
func TestStemPortugueseLanceDB(t *testing.T) {
	stemLanguageLanceDB(t, "Portuguese", stemPortuguese, "testdata/portuguese_words.txt", "aeiouáéíóúâêôãõçgcrsdmntlv~")
}

// TestStemSwedishLanceDB: as TestStemSpanishLanceDB, for Swedish
// (testdata/swedish_words.txt, from snowball-data) and stemSwedish.
func TestStemSwedishLanceDB(t *testing.T) {
	stemLanguageLanceDB(t, "Swedish", stemSwedish, "testdata/swedish_words.txt", "aeiouyäåösthknrlgdfbcmpvx")
}

// TestStemNorwegianLanceDB and TestStemDanishLanceDB: as
// TestStemSpanishLanceDB, for Norwegian and Danish (vocabularies from
// snowball-data).
func TestStemNorwegianLanceDB(t *testing.T) {
	stemLanguageLanceDB(t, "Norwegian", stemNorwegian, "testdata/norwegian_words.txt", "aeêioòóôuyæåøsrktdvlgnhp'")
}

func TestStemDanishLanceDB(t *testing.T) {
	stemLanguageLanceDB(t, "Danish", stemDanish, "testdata/danish_words.txt", "aeiouyæåøsrktdglnhbmpf'")
}

// TestStemRussianLanceDB: as TestStemSpanishLanceDB, for Russian
// (testdata/russian_words.txt, from snowball-data) and stemRussian.
func TestStemRussianLanceDB(t *testing.T) {
	stemLanguageLanceDB(t, "Russian", stemRussian, "testdata/russian_words.txt", "аеиоуыэюяёвшсьнмлйтхщгкр")
}

// TestStemRomanianLanceDB: as TestStemSpanishLanceDB, for Romanian
// (testdata/romanian_words.txt, from snowball-data) and stemRomanian.
func TestStemRomanianLanceDB(t *testing.T) {
	stemLanguageLanceDB(t, "Romanian", stemRomanian, "testdata/romanian_words.txt", "aeiouâîăşţșțblcvtnrmIU")
}

// TestStemFinnishLanceDB: as TestStemSpanishLanceDB, for Finnish
// (testdata/finnish_words.txt, from snowball-data) and stemFinnish.
func TestStemFinnishLanceDB(t *testing.T) {
	stemLanguageLanceDB(t, "Finnish", stemFinnish, "testdata/finnish_words.txt", "aeiouyäöøtnksljhmpvdr'")
}

// TestStemHungarianLanceDB: as TestStemSpanishLanceDB, for Hungarian
// (testdata/hungarian_words.txt, from snowball-data) and stemHungarian.
func TestStemHungarianLanceDB(t *testing.T) {
	stemLanguageLanceDB(t, "Hungarian", stemHungarian, "testdata/hungarian_words.txt", "aeiouáéíóöőúüűbcdgklnrstvyzjk")
}
