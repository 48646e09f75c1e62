package fts

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// ErrUntokenizable marks text compactord does not tokenize exactly.
var ErrUntokenizable = errors.New("text compactord does not tokenize exactly")

// Tokenizer splits a doc into tokens exactly as LanceDB 0.39 does for the
// configurations NewTokenizer accepts.
type Tokenizer struct {
	base      string // simple, whitespace, raw or ngram
	lower     bool
	maxLen    int // tokens of this many bytes or more are dropped (-1: none)
	stem      bool
	stemmer   func(string) string
	stopWords map[string]bool // nil: none removed
	fold      bool
	// ngram lengths in characters, and whether only a doc's prefixes count
	minGram, maxGram int
	prefixOnly       bool
	// stems caches the stemmer (words repeat: stemming them again costs
	// several times a lookup), up to maxCachedStems words; safe for
	// concurrent Tokens calls.
	stems  sync.Map
	nstems atomic.Int64
}

const maxCachedStems = 1 << 16

// NewTokenizer checks that compactord reproduces the tokenizer of params
// exactly and returns it, or says in one line why not.
//
// LanceDB's pipeline is: base tokenizer, then remove tokens of
// max_token_length bytes or more, lower-case, stem, remove stop words
// (so a stop word is matched in its stemmed form), ASCII-fold. compactord
// reproduces the simple, whitespace, raw and ngram base tokenizers, every
// option of that pipeline for the languages of the languages table
// (stemming and stop words of other languages are refused), and custom
// stop words. Refused: icu, jieba, lindera and other base tokenizers, the
// json lance_tokenizer and the newer splitting options; positions
// (TokenPositions) only with the simple and whitespace base tokenizers.
func NewTokenizer(p Params) (*Tokenizer, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(p.Raw, &raw); err != nil {
		return nil, fmt.Errorf("tokenizer params: %v", err)
	}
	// Options compactord does not implement must be at their defaults;
	// checked in a fixed order so that the reason is always the same.
	for _, kd := range [][2]string{
		{"split_identifiers", "false"}, {"split_on_numerics", "false"}, {"preserve_original", "false"}, {"index_operators", "false"}} {
		k, def := kd[0], kd[1]
		if v, ok := raw[k]; ok && string(v) != def {
			return nil, fmt.Errorf("tokenizer %s=%s is not reproduced by compactord (left to LanceDB)", k, v)
		}
	}
	known := map[string]bool{"lance_tokenizer": true, "base_tokenizer": true, "language": true, "with_position": true, "max_token_length": true,
		"lower_case": true, "stem": true, "remove_stop_words": true, "custom_stop_words": true, "ascii_folding": true, "min_ngram_length": true,
		"max_ngram_length": true, "prefix_only": true, "block_size": true, "split_identifiers": true, "split_on_numerics": true,
		"preserve_original": true, "index_operators": true}
	for k := range raw {
		if !known[k] {
			return nil, fmt.Errorf("tokenizer parameter %q is unknown to compactord", k)
		}
	}
	if p.LanceTokenizer != "" && p.LanceTokenizer != "text" {
		return nil, fmt.Errorf("lance_tokenizer %q is not reproduced by compactord", p.LanceTokenizer)
	}
	if p.WithPosition && p.BaseTokenizer != "simple" && p.BaseTokenizer != "whitespace" {
		return nil, fmt.Errorf("tokenizer with_position=true with base_tokenizer %q is not reproduced by compactord (left to LanceDB)", p.BaseTokenizer)
	}
	t := &Tokenizer{base: p.BaseTokenizer, lower: p.LowerCase, maxLen: -1, stem: p.Stem, fold: p.ASCIIFolding}
	switch p.BaseTokenizer {
	case "simple", "whitespace", "raw":
	case "ngram":
		if p.MinNgramLength <= 0 || p.MaxNgramLength < p.MinNgramLength {
			return nil, fmt.Errorf("ngram lengths %d..%d are invalid", p.MinNgramLength, p.MaxNgramLength)
		}
		t.minGram, t.maxGram, t.prefixOnly = p.MinNgramLength, p.MaxNgramLength, p.PrefixOnly
	default:
		return nil, fmt.Errorf("base_tokenizer %q is not reproduced by compactord (left to LanceDB)", p.BaseTokenizer)
	}
	// Only the stemmer and the built-in stop words depend on the language.
	lang, langOK := languages[p.Language]
	if !langOK && (p.Stem || (p.RemoveStopWords && p.CustomStopWords == nil)) {
		what := "stemming"
		if !p.Stem {
			what = "stop words"
		}
		return nil, fmt.Errorf("language %q: %s is not reproduced by compactord (only %s; left to LanceDB)", p.Language, what,
			strings.Join(slices.Sorted(maps.Keys(languages)), ", "))
	}
	t.stemmer = lang.stem
	if p.RemoveStopWords {
		t.stopWords = map[string]bool{}
		words := lang.stopWords
		if p.CustomStopWords != nil {
			words = p.CustomStopWords
		}
		for _, w := range words {
			t.stopWords[w] = true
		}
	}
	if p.MaxTokenLength != nil {
		if *p.MaxTokenLength < 0 {
			return nil, fmt.Errorf("max_token_length %d is invalid", *p.MaxTokenLength)
		}
		t.maxLen = *p.MaxTokenLength
	}
	return t, nil
}

// Tokens returns doc's tokens in order. A doc compactord cannot tokenize
// exactly (text that is not UTF-8, which LanceDB never holds) is an
// error.
func (t *Tokenizer) Tokens(doc string) ([]string, error) {
	if !utf8.ValidString(doc) {
		return nil, fmt.Errorf("%w: the text is not UTF-8", ErrUntokenizable)
	}
	var out []string
	emit := func(w string) {
		if w, ok := t.filter(w); ok {
			out = append(out, w)
		}
	}
	switch t.base {
	case "simple", "whitespace":
		for _, w := range t.baseTokens(doc) {
			emit(w)
		}
	case "raw":
		emit(doc)
	case "ngram":
		for _, w := range ngrams(doc, t.minGram, t.maxGram, t.prefixOnly) {
			emit(w)
		}
	}
	return out, nil
}

// TokenPositions returns doc's tokens with their positions: the index of
// each in the base tokenizer's stream, so that a token a filter drops (too
// long, a stop word) leaves a gap, as tantivy counts positions. Only the
// simple and whitespace base tokenizers are reproduced with positions.
func (t *Tokenizer) TokenPositions(doc string) ([]string, []uint32, error) {
	if t.base != "simple" && t.base != "whitespace" {
		return nil, nil, fmt.Errorf("%w: positions under the %s base tokenizer", ErrUntokenizable, t.base)
	}
	if !utf8.ValidString(doc) {
		return nil, nil, fmt.Errorf("%w: the text is not UTF-8", ErrUntokenizable)
	}
	var toks []string
	var pos []uint32
	for i, w := range t.baseTokens(doc) {
		if w, ok := t.filter(w); ok {
			toks = append(toks, w)
			pos = append(pos, uint32(i))
		}
	}
	return toks, pos, nil
}

// eachBaseToken calls f with each token of doc as the simple or
// whitespace base tokenizer splits it, before any filter, and its index.
func (t *Tokenizer) eachBaseToken(doc string, f func(i int, w string) error) error {
	if !utf8.ValidString(doc) {
		return fmt.Errorf("%w: the text is not UTF-8", ErrUntokenizable)
	}
	for i, w := range t.baseTokens(doc) {
		if err := f(i, w); err != nil {
			return err
		}
	}
	return nil
}

// baseTokens splits doc as the simple or whitespace base tokenizer does,
// before any filter.
func (t *Tokenizer) baseTokens(doc string) []string {
	if t.base == "whitespace" {
		return strings.FieldsFunc(doc, isSplitSpace)
	}
	return strings.FieldsFunc(doc, func(r rune) bool { return !isTokenRune(r) })
}

// filter runs one base token through LanceDB's filters in their order:
// false when one drops it.
func (t *Tokenizer) filter(w string) (string, bool) {
	if t.maxLen >= 0 && len(w) >= t.maxLen {
		return "", false
	}
	if t.lower {
		w = lowerCase(w)
	}
	if t.stem {
		w = t.stemCached(w)
	}
	if t.stopWords[w] {
		return "", false
	}
	if t.fold {
		w = asciiFold(w)
	}
	return w, true
}

func (t *Tokenizer) stemCached(w string) string {
	if s, ok := t.stems.Load(w); ok {
		return s.(string)
	}
	s := t.stemmer(w)
	if t.nstems.Load() < maxCachedStems {
		if _, loaded := t.stems.LoadOrStore(w, s); !loaded {
			t.nstems.Add(1)
		}
	}
	return s
}

// language is what compactord reproduces of one of LanceDB's languages.
type language struct {
	stem      func(string) string
	stopWords []string
}

// languages compactord stems and removes built-in stop words for, each
// checked against LanceDB over a vocabulary (TestStem*LanceDB,
// Test*StopWordsLanceDB).
var languages = map[string]language{
	"English":    {stemEnglish, englishStopWords},
	"Spanish":    {stemSpanish, spanishStopWords},
	"French":     {stemFrench, frenchStopWords},
	"German":     {stemGerman, germanStopWords},
	"Portuguese": {stemPortuguese, portugueseStopWords},
	"Italian":    {stemItalian, italianStopWords},
	"Swedish":    {stemSwedish, swedishStopWords},
	"Norwegian":  {stemNorwegian, norwegianStopWords},
	"Danish":     {stemDanish, danishStopWords},
	"Russian":    {stemRussian, russianStopWords},
	"Romanian":   {stemRomanian, romanianStopWords},
	"Finnish":    {stemFinnish, finnishStopWords},
	"Hungarian":  {stemHungarian, hungarianStopWords},
}

// ngrams are doc's character n-grams of minGram..maxGram characters, by
// start then length (only those starting at 0 if prefixOnly).
func ngrams(doc string, minGram, maxGram int, prefixOnly bool) []string {
	starts := make([]int, 0, len(doc)+1)
	for i := range doc {
		starts = append(starts, i)
	}
	starts = append(starts, len(doc))
	var out []string
	for s := 0; s+minGram < len(starts); s++ {
		if prefixOnly && s > 0 {
			break
		}
		for n := minGram; n <= maxGram && s+n < len(starts); n++ {
			out = append(out, doc[starts[s]:starts[s+n]])
		}
	}
	return out
}
