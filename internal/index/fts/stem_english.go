package fts

import (
	"strings"
	"unicode/utf8"
)

// stemEnglish stems a token as LanceDB 0.39 does: its tokenizer stems
// English with the Snowball English (Porter2) algorithm as Snowball
// revision 97b1acc (August 2026, the frostem 1.20260804.1 crate) defines
// it, which differs from the older Porter2 of rust-stemmers and of the Go
// Snowball ports (more R1 prefixes such as "inter" and "organ", "ogist",
// no undoubling in "added", "dying" handled in Step 1b, ...).
//
// It works on the token's bytes the way Snowball's generated Rust does:
// positions are byte offsets, moves step over whole UTF-8 characters, and
// a character outside a-z is never a vowel. Tokens are valid UTF-8.
func stemEnglish(word string) string {
	if s, ok := englishExceptions[word]; ok {
		return s
	}
	var buf [48]byte
	e := &snowball{s: append(buf[:0], word...)}
	e.limit = len(e.s)
	if !e.hop(3) {
		return word
	}
	e.cursor = 0

	// Prelude: a leading apostrophe goes; y at the start or after a
	// vowel is consonant-like (Y) until the postlude.
	yFound := false
	if len(e.s) > 0 && e.s[0] == '\'' {
		e.bra, e.ket = 0, 1
		e.sliceFrom("")
	}
	if len(e.s) > 0 && e.s[0] == 'y' {
		e.s[0] = 'Y'
		yFound = true
	}
	for i := 0; i+1 < len(e.s); i++ {
		if isVowel(rune(e.s[i])) && e.s[i+1] == 'y' {
			e.s[i+1] = 'Y'
			yFound = true
		}
	}

	// Regions: R1 after the first non-vowel following a vowel (or after
	// one of a few prefixes), R2 the same within R1.
	p1, p2 := e.limit, e.limit
	e.cursor = 0
	func() {
		if n := longestPrefix(e.s[e.cursor:e.limit], englishR1Prefixes); n > 0 {
			e.cursor += n
		} else {
			if !e.goOutGrouping() {
				return
			}
			e.nextChar()
			if !e.goInGrouping() {
				return
			}
			e.nextChar()
		}
		p1 = e.cursor
		if !e.goOutGrouping() {
			return
		}
		e.nextChar()
		if !e.goInGrouping() {
			return
		}
		e.nextChar()
		p2 = e.cursor
	}()

	e.lb = 0
	e.cursor = e.limit
	e.step1a()
	e.cursor = e.limit
	e.step1b(p1)
	e.cursor = e.limit
	e.step1c()
	e.cursor = e.limit
	e.step2(p1)
	e.cursor = e.limit
	e.step3(p1, p2)
	e.cursor = e.limit
	e.step4(p2)
	e.cursor = e.limit
	e.step5(p1, p2)

	if yFound {
		for i, c := range e.s[:e.limit] {
			if c == 'Y' {
				e.s[i] = 'y'
			}
		}
	}
	if string(e.s[:e.limit]) == word {
		return word
	}
	return string(e.s[:e.limit])
}

// englishExceptions are whole words stemmed (or kept) specially.
var englishExceptions = map[string]string{
	"skis": "ski", "skies": "sky", "idly": "idl", "gently": "gentl", "ugly": "ugli", "early": "earli",
	"only": "onli", "singly": "singl", "sky": "sky", "news": "news", "howe": "howe", "atlas": "atlas",
	"cosmos": "cosmos", "bias": "bias", "andes": "andes",
}

// englishR1Prefixes end R1's exclusion zone early (or late) for words
// whose regions the general rule gets wrong.
var englishR1Prefixes = []string{"arsen", "commun", "emerg", "gener", "inter", "later", "organ", "past", "univers"}

func isVowel(r rune) bool {
	switch r {
	case 'a', 'e', 'i', 'o', 'u', 'y':
		return true
	}
	return false
}

func isVowelWXY(r rune) bool { return isVowel(r) || r == 'w' || r == 'x' || r == 'Y' }

func isValidLI(r rune) bool { return strings.ContainsRune("cdeghkmnrt", r) }

// snowball is the state of Snowball's generated stemmers: the word's
// bytes up to limit, a cursor, the backward limit lb and the slice
// [bra, ket) that replacements change.
type snowball struct {
	s                           []byte
	cursor, limit, lb, bra, ket int
}

func (e *snowball) nextChar() {
	e.cursor++
	for e.cursor < len(e.s) && !utf8.RuneStart(e.s[e.cursor]) {
		e.cursor++
	}
}

func (e *snowball) prevChar() {
	e.cursor--
	for e.cursor > 0 && !utf8.RuneStart(e.s[e.cursor]) {
		e.cursor--
	}
}

func (e *snowball) runeAt(i int) rune {
	r, _ := utf8.DecodeRune(e.s[i:e.limit])
	return r
}

// hop moves the cursor n characters forward, if there are that many.
func (e *snowball) hop(n int) bool {
	c := e.cursor
	for ; n > 0; n-- {
		if c >= e.limit {
			return false
		}
		c++
		for c < e.limit && !utf8.RuneStart(e.s[c]) {
			c++
		}
	}
	e.cursor = c
	return true
}

// hopBack moves the cursor n characters backward, if there are that many.
func (e *snowball) hopBack(n int) bool {
	c := e.cursor
	for ; n > 0; n-- {
		if c <= e.lb {
			return false
		}
		c--
		for c > e.lb && !utf8.RuneStart(e.s[c]) {
			c--
		}
	}
	e.cursor = c
	return true
}

// goOutGrouping moves forward to the next vowel (not past it).
func (e *snowball) goOutGrouping() bool {
	for e.cursor < e.limit {
		if isVowel(e.runeAt(e.cursor)) {
			return true
		}
		e.nextChar()
	}
	return false
}

// goInGrouping moves forward to the next non-vowel (not past it).
func (e *snowball) goInGrouping() bool {
	for e.cursor < e.limit {
		if !isVowel(e.runeAt(e.cursor)) {
			return true
		}
		e.nextChar()
	}
	return false
}

// inB steps back over the previous character if in(it).
func (e *snowball) inB(in func(rune) bool) bool {
	if e.cursor <= e.lb {
		return false
	}
	c := e.cursor
	e.prevChar()
	if !in(e.runeAt(e.cursor)) {
		e.cursor = c
		return false
	}
	return true
}

// outB steps back over the previous character if not in(it).
func (e *snowball) outB(in func(rune) bool) bool {
	if e.cursor <= e.lb {
		return false
	}
	c := e.cursor
	e.prevChar()
	if in(e.runeAt(e.cursor)) {
		e.cursor = c
		return false
	}
	return true
}

// goPastVowelB moves backward past the nearest preceding vowel.
func (e *snowball) goPastVowelB() bool {
	for e.cursor > e.lb {
		e.prevChar()
		if isVowel(e.runeAt(e.cursor)) {
			return true
		}
	}
	return false
}

// eqB steps back over s if the text before the cursor ends with it.
func (e *snowball) eqB(s string) bool {
	if e.cursor-e.lb < len(s) || string(e.s[e.cursor-len(s):e.cursor]) != s {
		return false
	}
	e.cursor -= len(s)
	return true
}

// amongB finds the longest of suffixes ending at the cursor, steps back
// over it and returns its index (-1: none).
func (e *snowball) amongB(suffixes []string) int {
	w := e.s[e.lb:e.cursor]
	if len(w) == 0 {
		return -1
	}
	last := w[len(w)-1]
	best, bestLen := -1, 0
	for i, s := range suffixes {
		n := len(s)
		if n <= bestLen || n > len(w) || s[n-1] != last {
			continue
		}
		if string(w[len(w)-n:]) == s {
			best, bestLen = i, n
		}
	}
	e.cursor -= bestLen
	return best
}

func longestPrefix(b []byte, prefixes []string) int {
	n := 0
	for _, p := range prefixes {
		if len(p) > n && len(b) >= len(p) && string(b[:len(p)]) == p {
			n = len(p)
		}
	}
	return n
}

// sliceFrom replaces [bra, ket) with s, in place.
func (e *snowball) sliceFrom(s string) {
	adj := len(s) - (e.ket - e.bra)
	n := e.limit + adj
	for len(e.s) < n {
		e.s = append(e.s, 0)
	}
	copy(e.s[e.bra+len(s):n], e.s[e.ket:e.limit])
	copy(e.s[e.bra:], s)
	e.s = e.s[:n]
	e.limit = n
	if e.cursor >= e.ket {
		e.cursor += adj
	} else if e.cursor > e.bra {
		e.cursor = e.bra
	}
	e.ket = e.bra + len(s)
}

// shortv: the text before the cursor ends in a short syllable.
func (e *snowball) shortv() bool {
	c := e.cursor
	if e.outB(isVowelWXY) && e.inB(isVowel) && e.outB(isVowel) {
		return true
	}
	e.cursor = c
	if e.outB(isVowel) && e.inB(isVowel) && e.cursor <= e.lb {
		return true
	}
	e.cursor = c
	return e.eqB("past")
}

func (e *snowball) step1a() {
	e.ket = e.cursor
	if e.cursor > e.lb && (e.s[e.cursor-1] == '\'' || e.s[e.cursor-1] == 's') {
		c := e.cursor
		if e.amongB([]string{"'", "'s'", "'s"}) >= 0 {
			e.bra = e.cursor
			e.sliceFrom("")
		} else {
			e.cursor = c
		}
	}
	e.ket = e.cursor
	switch e.amongB([]string{"ied", "s", "ies", "sses", "ss", "us"}) {
	case 3: // sses
		e.bra = e.cursor
		e.sliceFrom("ss")
	case 0, 2: // ied, ies
		e.bra = e.cursor
		c := e.cursor
		if e.hopBack(2) {
			e.sliceFrom("i")
		} else {
			e.cursor = c
			e.sliceFrom("ie")
		}
	case 1: // s: delete if a vowel precedes the letter before it
		e.bra = e.cursor
		if e.cursor <= e.lb {
			return
		}
		e.prevChar()
		if !e.goPastVowelB() {
			return
		}
		e.sliceFrom("")
	}
}

func (e *snowball) step1b(p1 int) {
	e.ket = e.cursor
	v := e.amongB([]string{"ed", "eed", "ing", "edly", "eedly", "ingly"})
	e.bra = e.cursor
	start := e.cursor
	switch v {
	case -1:
		return
	case 1, 4: // eed, eedly
		if p1 <= e.cursor {
			if e.cursor-2 > e.lb && e.s[e.cursor-1] == 'c' && e.amongB([]string{"succ", "proc", "exc"}) >= 0 && e.cursor <= e.lb {
				return
			}
			e.cursor = start
			e.sliceFrom("ee")
		}
		return
	case 2: // ing: a few exceptions, else as ed
		switch e.amongB([]string{"even", "cann", "inn", "earr", "herr", "out", "y"}) {
		case 6: // Cying at the start: dying, lying, tying, vying
			c := e.cursor
			if e.outB(isVowel) && e.cursor <= e.lb {
				e.cursor = c
				e.bra = e.cursor
				e.sliceFrom("ie")
				return
			}
		case -1:
		default:
			if e.cursor <= e.lb {
				return
			}
		}
	}
	// ed, edly, ing, ingly: delete if a vowel precedes, then tidy the end.
	e.cursor = start
	if !e.goPastVowelB() {
		return
	}
	e.cursor = start
	e.sliceFrom("")
	e.ket, e.bra = e.cursor, e.cursor
	end := e.cursor
	switch w := e.amongB([]string{"bb", "dd", "ff", "gg", "bl", "mm", "nn", "pp", "rr", "at", "tt", "iz"}); w {
	case 4, 9, 11: // bl, at, iz
		e.cursor = end
		e.sliceFrom("e")
		return
	case -1: // short word: add e
		e.cursor = end
		if e.cursor != p1 || !e.shortv() {
			return
		}
		e.cursor = end
		e.sliceFrom("e")
		return
	default: // double: undouble, except after a lone a/e/o at the start
		if e.inB(func(r rune) bool { return r == 'a' || r == 'e' || r == 'o' }) && e.cursor <= e.lb {
			return
		}
		e.cursor = end
		e.ket = e.cursor
		if e.cursor <= e.lb {
			return
		}
		e.prevChar()
		e.bra = e.cursor
		e.sliceFrom("")
	}
}

func (e *snowball) step1c() {
	e.ket = e.cursor
	if !e.eqB("y") && !e.eqB("Y") {
		return
	}
	e.bra = e.cursor
	if !e.outB(isVowel) || e.cursor <= e.lb {
		return
	}
	e.sliceFrom("i")
}

var step2Suffixes = []string{"anci", "enci", "ogi", "li", "bli", "abli", "alli", "fulli", "lessli", "ousli", "entli", "aliti", "biliti",
	"iviti", "tional", "ational", "alism", "ation", "ization", "izer", "ator", "iveness", "fulness", "ousness", "ogist"}

var step2Replace = []string{"ance", "ence", "og", "", "ble", "able", "al", "ful", "less", "ous", "ent", "al", "ble",
	"ive", "tion", "ate", "al", "ate", "ize", "ize", "ate", "ive", "ful", "ous", "og"}

func (e *snowball) step2(p1 int) {
	e.ket = e.cursor
	v := e.amongB(step2Suffixes)
	if v < 0 {
		return
	}
	e.bra = e.cursor
	if p1 > e.cursor {
		return
	}
	switch step2Suffixes[v] {
	case "ogi":
		if !e.eqB("l") {
			return
		}
	case "li":
		if !e.inB(isValidLI) {
			return
		}
	}
	e.sliceFrom(step2Replace[v])
}

var step3Suffixes = []string{"icate", "ative", "alize", "iciti", "ical", "tional", "ational", "ful", "ness"}

var step3Replace = []string{"ic", "", "al", "ic", "ic", "tion", "ate", "", ""}

func (e *snowball) step3(p1, p2 int) {
	e.ket = e.cursor
	v := e.amongB(step3Suffixes)
	if v < 0 {
		return
	}
	e.bra = e.cursor
	if p1 > e.cursor || (step3Suffixes[v] == "ative" && p2 > e.cursor) {
		return
	}
	e.sliceFrom(step3Replace[v])
}

var step4Suffixes = []string{"ic", "ance", "ence", "able", "ible", "ate", "ive", "ize", "iti", "al", "ism", "ion", "er",
	"ous", "ant", "ent", "ment", "ement"}

func (e *snowball) step4(p2 int) {
	e.ket = e.cursor
	v := e.amongB(step4Suffixes)
	if v < 0 {
		return
	}
	e.bra = e.cursor
	if p2 > e.cursor {
		return
	}
	if step4Suffixes[v] == "ion" && !e.eqB("s") && !e.eqB("t") {
		return
	}
	e.sliceFrom("")
}

func (e *snowball) step5(p1, p2 int) {
	e.ket = e.cursor
	switch e.amongB([]string{"e", "l"}) {
	case 0:
		e.bra = e.cursor
		if p2 > e.cursor {
			if p1 > e.cursor {
				return
			}
			c := e.cursor
			if e.shortv() {
				return
			}
			e.cursor = c
		}
		e.sliceFrom("")
	case 1:
		e.bra = e.cursor
		if p2 > e.cursor || !e.eqB("l") {
			return
		}
		e.sliceFrom("")
	}
}
