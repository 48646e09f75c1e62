package fts

import (
	"errors"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/compactord/compactord/internal/testing/lancedb"
)

// TestTokenizerRefuses: configurations compactord cannot reproduce are
// refused in one line naming the option; the others are accepted.
func TestTokenizerRefuses(t *testing.T) {
	base := `{"lance_tokenizer":"text","base_tokenizer":"simple","language":"English","with_position":false,"max_token_length":40,"lower_case":true,"stem":true,"remove_stop_words":true,"custom_stop_words":null,"ascii_folding":true,"min_ngram_length":3,"max_ngram_length":3,"prefix_only":false,"block_size":128,"split_identifiers":false,"split_on_numerics":false,"preserve_original":false,"index_operators":false}`
	for _, c := range []struct{ from, to, want string }{
		{"", "", ""},
		{`"custom_stop_words":null`, `"custom_stop_words":["a"]`, ""},
		{`"base_tokenizer":"simple"`, `"base_tokenizer":"ngram"`, ""},
		{`"base_tokenizer":"simple"`, `"base_tokenizer":"raw"`, ""},
		{`"base_tokenizer":"simple"`, `"base_tokenizer":"whitespace"`, ""},
		{`"language":"English","with_position":false,"max_token_length":40,"lower_case":true,"stem":true,"remove_stop_words":true`,
			`"language":"French","with_position":false,"max_token_length":40,"lower_case":true,"stem":false,"remove_stop_words":false`, ""},
		{`"language":"English"`, `"language":"Turkish"`, "stemming"},
		{`"language":"English"`, `"language":"German"`, ""},
		{`"language":"English"`, `"language":"French"`, ""},
		{`"language":"English","with_position":false,"max_token_length":40,"lower_case":true,"stem":true`,
			`"language":"Turkish","with_position":false,"max_token_length":40,"lower_case":true,"stem":false`, "stop words"},
		{`"base_tokenizer":"simple"`, `"base_tokenizer":"jieba/default"`, "jieba"},
		{`"base_tokenizer":"simple"`, `"base_tokenizer":"icu"`, "icu"},
		{`"lance_tokenizer":"text"`, `"lance_tokenizer":"json"`, "json"},
		{`"split_identifiers":false`, `"split_identifiers":true`, "split_identifiers"},
		{`"with_position":false`, `"with_position":true`, ""},
		{`"base_tokenizer":"simple","language":"English","with_position":false`, `"base_tokenizer":"whitespace","language":"English","with_position":true`, ""},
		{`"base_tokenizer":"simple","language":"English","with_position":false`, `"base_tokenizer":"ngram","language":"English","with_position":true`, "with_position"},
		{`"base_tokenizer":"simple","language":"English","with_position":false`, `"base_tokenizer":"raw","language":"English","with_position":true`, "with_position"},
		{`"block_size":128`, `"block_size":128,"future_option":1`, "future_option"},
	} {
		raw := strings.Replace(base, c.from, c.to, 1)
		var p Params
		if err := jsonUnmarshal(raw, &p); err != nil {
			t.Fatal(err)
		}
		_, err := NewTokenizer(p)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.to, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n")):
			t.Errorf("%s: %v, want one line naming %s", c.to, err, c.want)
		}
	}
	if _, err := NewTokenizer(Params{Raw: []byte(base), BaseTokenizer: "ngram", MinNgramLength: 0, MaxNgramLength: 3}); err == nil || !strings.Contains(err.Error(), "ngram") {
		t.Errorf("ngram of length 0..3: %v", err)
	}
	tok, err := NewTokenizer(Params{Raw: []byte(base), BaseTokenizer: "simple", LowerCase: true})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := tok.Tokens("Hello, World-42 x_y Café"); err != nil || !slices.Equal(got, []string{"hello", "world", "42", "x", "y", "café"}) {
		t.Errorf("simple tokens %q (%v)", got, err)
	}
	if _, err := tok.Tokens("bad \xff utf-8"); err == nil || strings.Contains(err.Error(), "\n") {
		t.Errorf("text that is not UTF-8: %v", err)
	}
}

// tokenizerConfigs are Index.fts options (LanceDB's Node names) and the
// params LanceDB records for them; nil values are LanceDB's defaults.
var tokenizerConfigs = []map[string]any{
	{}, // LanceDB's default: simple, lower case, stem, stop words, ASCII folding, max 40 bytes
	{"stem": false, "removeStopWords": false, "asciiFolding": false},
	{"lowercase": false, "asciiFolding": false},
	{"lowercase": false, "stem": false},
	{"baseTokenizer": "whitespace"},
	{"baseTokenizer": "whitespace", "lowercase": false, "stem": false, "removeStopWords": false},
	{"customStopWords": []string{"run", "quick", "café", "the", "straße"}},
	{"customStopWords": []string{}, "stem": false},
	{"maxTokenLength": 5, "stem": false},
	{"maxTokenLength": 0, "stem": false},
	{"baseTokenizer": "raw"},
	{"baseTokenizer": "raw", "lowercase": false, "stem": false, "removeStopWords": false, "asciiFolding": false, "maxTokenLength": 1000},
	{"baseTokenizer": "ngram", "ngramMinLength": 2, "ngramMaxLength": 4},
	{"baseTokenizer": "ngram", "ngramMinLength": 1, "ngramMaxLength": 3, "prefixOnly": true, "stem": false},
	{"baseTokenizer": "ngram", "ngramMinLength": 3, "ngramMaxLength": 3, "lowercase": false, "stem": false, "removeStopWords": false, "asciiFolding": false},
	{"language": "French", "stem": false, "removeStopWords": false},
	{"language": "Spanish"},
	{"language": "French"},
	{"language": "French", "baseTokenizer": "whitespace", "lowercase": false},
	{"language": "German"},
	{"language": "Hungarian"},
	{"language": "Finnish"},
	{"language": "Romanian"},
	{"language": "Russian"},
	{"language": "Danish"},
	{"language": "Norwegian"},
	{"language": "Swedish"},
	{"language": "Portuguese"},
	{"language": "Italian"},
	{"language": "Spanish", "baseTokenizer": "whitespace", "lowercase": false, "asciiFolding": false},
}

// tokenizerDocs are texts in many scripts and shapes, plus generated ones
// mixing vocabulary words, stop words and sampled characters of every
// table.
func tokenizerDocs(t *testing.T) []string {
	docs := []string{
		"", " ", "...", "The quick brown fox jumps over the lazy dog", "Running runners ran; RUNNING quickly!",
		"It is what it is: the THE The tHe", "Café naïve résumé façade über jalapeño Ångström Øre Łódź Ħamrun",
		"Straße STRASSE straße groß GROẞ Maßstab", "İstanbul ISTANBUL ıstanbul İi Iı", "ΣΊΣΥΦΟΣ σίσυφος Ὀδυσσεύς ΐ",
		"Москва МОСКВА ёлка Ёлка объём", "中文分词 日本語のテキスト 한국어 텍스트", "emoji 😀😀 🇫🇷 👍🏽 family👨‍👩‍👧 ok",
		"digits 0123456789 ٠١٢٣ ①②③ ½ Ⅻ 2026-12-06 3.14159", "tabs\tand\nnewlines\r\nand\u00a0nbsp\u3000ideographic\u2003em",
		"ﬁne ﬂour ǅemal ǆ Ǆ ĳssel Œuvre œuvre Æsir", "o'clock rock'n'roll don't 'quoted' \"double\"",
		"averyveryveryveryverylongtokenthatexceedsfortybytesforsure short", "ééééééééééééééééééééé 21 é",
		"under_score camelCase kebab-case dot.ted", "\u0301\u0308 combining alone e\u0301 a\u0308",
		"organizations international lateral added dying evening proceedings skies",
		"the a an and are as at be but by for if in into is it no not of on or such that their then there these they this to was will with",
		"having haven have haves", "CAFÉ Café café cafe", "ẞ ß ss SS",
		"Los niños están jugando en el jardín; cantándole canciones alegremente, rápidamente y felizmente",
		"L'homme qu'il aimait: les élèves étudiaient théâtralement; Noël, naïveté, cœur, aujourd'hui, préférées",
		"Die Straße der Häuser; GROSSE Flüsse, schönsten Übungen, Möglichkeiten und Verantwortlichkeit, aufzeigend",
		"la organización nacional de trabajadores argüía que averiguáis y averigüemos bajo la lluvia",
	}
	words := englishWords(t)
	rng := rand.New(rand.NewPCG(2026, 12))
	var chars []rune
	for _, x := range lowerTable {
		chars = append(chars, x.r)
	}
	for _, x := range foldTable {
		chars = append(chars, x.r)
	}
	for _, x := range tokenRanges {
		chars = append(chars, x.lo, x.hi)
	}
	chars = append(chars, ' ', '\t', '-', '.', '\u00a0', '\u3000', '😀')
	for range 1500 {
		var b strings.Builder
		for w := range 1 + rng.IntN(12) {
			if w > 0 {
				b.WriteString([]string{" ", " ", " ", ", ", "\t", "-", "\u00a0"}[rng.IntN(7)])
			}
			switch rng.IntN(5) {
			case 0, 1:
				b.WriteString(words[rng.IntN(len(words))])
			case 2:
				w := words[rng.IntN(len(words))]
				b.WriteString(strings.ToUpper(w[:1]) + w[1:])
			case 3:
				b.WriteString(englishStopWords[rng.IntN(len(englishStopWords))])
			default:
				for range 1 + rng.IntN(4) {
					b.WriteRune(chars[rng.IntN(len(chars))])
				}
			}
		}
		docs = append(docs, b.String())
	}
	return docs
}

// TestTokenizerLanceDB: for every configuration of tokenizerConfigs,
// LanceDB's index holds each doc of tokenizerDocs with exactly the tokens
// (and counts) Tokens gives under the params LanceDB recorded.
func TestTokenizerLanceDB(t *testing.T) {
	lancedb.Require(t)
	docs := tokenizerDocs(t)
	configs := make([]map[string]any, len(tokenizerConfigs))
	for i, c := range tokenizerConfigs {
		configs[i] = maps.Clone(c)
	}
	bags, params := lanceBagsParams(t, configs, docs)
	for c := range configs {
		tok, err := NewTokenizer(params[c])
		if err != nil {
			t.Errorf("config %v (%s): %v", tokenizerConfigs[c], params[c].Raw, err)
			continue
		}
		diffs := 0
		for i, d := range docs {
			ts, err := tok.Tokens(d)
			if err != nil {
				t.Fatalf("config %v: %q: %v", tokenizerConfigs[c], d, err)
			}
			if got := bagOf(ts); !sameBag(got, bags[c][i]) {
				if diffs++; diffs <= 5 {
					t.Errorf("config %v: %q: Tokens %s, LanceDB %s", tokenizerConfigs[c], d, bagString(got), bagString(bags[c][i]))
				}
			}
		}
		if diffs > 0 {
			t.Errorf("config %v (%s): %d of %d docs differ", tokenizerConfigs[c], params[c].Raw, diffs, len(docs))
		}
	}
}

// TestStopWordsLanceDB: of the stop word lists LanceDB's crates carry
// for a language (ISO's and NLTK's), LanceDB (no stemming, no
// lower-casing, whitespace tokens) removes exactly compactord's list, for
// English, French, German and Spanish.
func TestStopWordsLanceDB(t *testing.T) {
	lancedb.Require(t)
	for _, c := range []struct {
		language, candidates string
		want                 []string
	}{
		{"English", "testdata/stopword_candidates.txt", englishStopWords},
		{"Spanish", "testdata/stopword_candidates_es.txt", spanishStopWords},
		{"French", "testdata/stopword_candidates_fr.txt", frenchStopWords},
		{"German", "testdata/stopword_candidates_de.txt", germanStopWords},
		{"Hungarian", "testdata/stopword_candidates_hu.txt", hungarianStopWords},
		{"Finnish", "testdata/stopword_candidates_fi.txt", finnishStopWords},
		{"Romanian", "testdata/stopword_candidates_ro.txt", romanianStopWords},
		{"Russian", "testdata/stopword_candidates_ru.txt", russianStopWords},
		{"Danish", "testdata/stopword_candidates_da.txt", danishStopWords},
		{"Norwegian", "testdata/stopword_candidates_no.txt", norwegianStopWords},
		{"Swedish", "testdata/stopword_candidates_sv.txt", swedishStopWords},
		{"Portuguese", "testdata/stopword_candidates_pt.txt", portugueseStopWords},
		{"Italian", "testdata/stopword_candidates_it.txt", italianStopWords},
	} {
		b, err := os.ReadFile(c.candidates)
		if err != nil {
			t.Fatal(err)
		}
		var words []string
		for _, w := range strings.Split(string(b), "\n") {
			if w != "" && !strings.Contains(w, " ") {
				words = append(words, w)
			}
		}
		cfg := map[string]any{"baseTokenizer": "whitespace", "language": c.language, "lowercase": false, "stem": false, "removeStopWords": true, "asciiFolding": false, "maxTokenLength": 1000}
		got := lanceBags(t, []map[string]any{cfg}, words)[0]
		var removed []string
		for i, w := range words {
			if len(got[i]) == 0 {
				removed = append(removed, w)
			}
		}
		want := slices.Sorted(slices.Values(c.want))
		slices.Sort(removed)
		if !slices.Equal(removed, want) {
			t.Errorf("%s: LanceDB removes %d of %d candidates: %q; compactord's list has %d: %q", c.language, len(removed), len(words), removed, len(want), want)
		}
	}
}

// FuzzTokens: any text, under LanceDB's default and the other base
// tokenizers, tokenizes without panicking into valid UTF-8 tokens, or is
// refused with ErrUntokenizable when it is not UTF-8.
func FuzzTokens(f *testing.F) {
	for _, s := range []string{"", "The quick brown fox", "Straße İstanbul ΣΊΣΥΦΟΣ", "'s's''", "yyyy", "ying", "eeds", "\xff\xfe", "a\u0301b", "ﬁ①😀"} {
		f.Add(s)
	}
	var toks []*Tokenizer
	for _, base := range []string{"simple", "whitespace", "raw", "ngram"} {
		tok, err := NewTokenizer(Params{Raw: []byte(`{}`), BaseTokenizer: base, Language: "English", LowerCase: true, Stem: true,
			RemoveStopWords: true, ASCIIFolding: true, MinNgramLength: 1, MaxNgramLength: 3})
		if err != nil {
			f.Fatal(err)
		}
		toks = append(toks, tok)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, tok := range toks {
			ts, err := tok.Tokens(s)
			if !utf8.ValidString(s) {
				if !errors.Is(err, ErrUntokenizable) {
					t.Fatalf("%q: %v, want ErrUntokenizable", s, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%q: %v", s, err)
			}
			for _, x := range ts {
				if !utf8.ValidString(x) {
					t.Fatalf("%q: token %q is not UTF-8", s, x)
				}
			}
		}
	})
}

// BenchmarkTokensDefault: LanceDB's default configuration over a doc of
// about 50 English words.
func BenchmarkTokensDefault(b *testing.B) {
	tok, err := NewTokenizer(Params{Raw: []byte(`{}`), BaseTokenizer: "simple", Language: "English", LowerCase: true, Stem: true,
		RemoveStopWords: true, ASCIIFolding: true, MaxTokenLength: new(40)})
	if err != nil {
		b.Fatal(err)
	}
	doc := strings.Repeat("The Quick brown foxes were running over the lazy dogs, organizations generously emerging; ", 4)
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		if _, err := tok.Tokens(doc); err != nil {
			b.Fatal(err)
		}
	}
}
