package fts

import (
	"sort"
	"strings"
	"unicode/utf8"
)

// The character tables LanceDB 0.39's tokenizers apply (Rust's
// char::is_alphanumeric for the simple tokenizer, ASCII whitespace for the
// whitespace one, char::to_lowercase, and lance's NFKD-based ASCII
// folding) are not taken from Go's unicode package, whose Unicode version
// differs from Rust's: unicode_tables.go is generated from LanceDB itself
// (TestUnicodeTables -update-unicode probes every code point), and a sample is
// re-checked against LanceDB on every test run.

// runeRange is an inclusive range of code points.
type runeRange struct{ lo, hi rune }

// runeString maps a code point to the text it becomes.
type runeString struct {
	r rune
	s string
}

func inRanges(rs []runeRange, r rune) bool {
	i := sort.Search(len(rs), func(i int) bool { return rs[i].hi >= r })
	return i < len(rs) && rs[i].lo <= r
}

func lookup(t []runeString, r rune) (string, bool) {
	i := sort.Search(len(t), func(i int) bool { return t[i].r >= r })
	if i < len(t) && t[i].r == r {
		return t[i].s, true
	}
	return "", false
}

// isTokenRune: the simple tokenizer keeps r in tokens (it splits on
// every other character).
func isTokenRune(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
	}
	return inRanges(tokenRanges, r)
}

// isSplitSpace: the whitespace tokenizer splits on r.
func isSplitSpace(r rune) bool { return inRanges(spaceRanges, r) }

// lowerCase lower-cases a token as LanceDB's LowerCaser does: ASCII
// tokens byte by byte, others character by character (a character may
// become several).
func lowerCase(tok string) string {
	if isASCII(tok) {
		return strings.ToLower(tok)
	}
	var b strings.Builder
	for _, r := range tok {
		if s, ok := lookup(lowerTable, r); ok {
			b.WriteString(s)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// asciiFold folds a non-ASCII token character by character as LanceDB's
// AsciiFoldingFilter does (characters it leaves alone stay).
func asciiFold(tok string) string {
	if isASCII(tok) {
		return tok
	}
	var b strings.Builder
	for _, r := range tok {
		if s, ok := lookup(foldTable, r); ok {
			b.WriteString(s)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
