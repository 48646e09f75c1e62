package fts

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// ErrUntokenizable marks text compactord does not tokenize exactly.
var ErrUntokenizable = errors.New("text compactord does not tokenize exactly")

// Tokenizer splits a doc into tokens exactly as LanceDB 0.39 does for the
// configurations NewTokenizer accepts.
type Tokenizer struct {
	whitespace bool // base tokenizer whitespace (else simple)
	lower      bool
	maxLen     int // tokens of this many bytes or more are dropped (0: none)
	fold       bool
}

// Stemming stays LanceDB's: the Go Snowball English stemmer at hand
// (github.com/kljensen/snowball v0.10.0) follows older Snowball rules than
// LanceDB's rust-stemmers and gave other stems for 8 of 4,190 vocabulary
// words (added, apologists, international, intervals, lateral, organic,
// organizations, ornithologists: newer R1 exceptions and suffixes), and
// LanceDB removes stop words after stemming ("haven" goes as "have"), so
// stop words depend on the stemmer too.
//
// NewTokenizer checks that compactord reproduces the tokenizer of params
// exactly and returns it, or says in one line why not: it implements the
// simple and whitespace base tokenizers, lower_case and max_token_length,
// and ascii_folding over ASCII text (other text is refused per doc by
// Tokens); stemming, stop words (built-in or custom), ngram, raw, icu,
// jieba, lindera and the newer splitting options are refused.
func NewTokenizer(p Params) (*Tokenizer, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(p.Raw, &raw); err != nil {
		return nil, fmt.Errorf("tokenizer params: %v", err)
	}
	// Options compactord does not implement must be at their defaults;
	// checked in a fixed order so that the reason is always the same.
	for _, kd := range [][2]string{{"stem", "false"}, {"remove_stop_words", "false"}, {"custom_stop_words", "null"},
		{"prefix_only", "false"}, {"split_identifiers", "false"}, {"split_on_numerics", "false"}, {"preserve_original", "false"}, {"index_operators", "false"}} {
		k, def := kd[0], kd[1]
		if v, ok := raw[k]; ok && string(v) != def && !(k == "custom_stop_words" && string(v) == "[]") {
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
	t := &Tokenizer{lower: p.LowerCase, fold: p.ASCIIFolding}
	switch p.BaseTokenizer {
	case "simple":
	case "whitespace":
		t.whitespace = true
	default:
		return nil, fmt.Errorf("base_tokenizer %q is not reproduced by compactord (left to LanceDB)", p.BaseTokenizer)
	}
	if p.MaxTokenLength != nil {
		t.maxLen = *p.MaxTokenLength
	}
	return t, nil
}

// Tokens returns doc's tokens in order. A doc compactord cannot tokenize
// exactly (non-ASCII text under ascii_folding or lower_case, whose
// Unicode tables it does not carry) is an error.
func (t *Tokenizer) Tokens(doc string) ([]string, error) {
	if t.fold || t.lower {
		for i := 0; i < len(doc); i++ {
			if doc[i] >= 0x80 {
				return nil, fmt.Errorf("%w: non-ASCII text under ascii_folding or lower_case", ErrUntokenizable)
			}
		}
	}
	split := func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }
	if t.whitespace {
		split = func(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\f' }
	} else {
		for _, r := range doc {
			if r >= 0x80 {
				return nil, fmt.Errorf("%w: non-ASCII text under the simple tokenizer", ErrUntokenizable)
			}
		}
	}
	var out []string
	for _, w := range strings.FieldsFunc(doc, split) {
		if t.maxLen > 0 && len(w) >= t.maxLen {
			continue
		}
		if t.lower {
			w = strings.ToLower(w)
		}
		out = append(out, w)
	}
	return out, nil
}
