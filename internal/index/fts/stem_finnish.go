package fts

import (
	"slices"
	"strings"
)

// stemFinnish stems a token as LanceDB 0.39 does for language Finnish:
// Snowball Finnish as Snowball revision 97b1acc defines it (the frostem
// 1.20260804.1 crate LanceDB bundles), on the token's bytes like
// stemEnglish.
func stemFinnish(word string) string {
	var buf [48]byte
	e := &snowball{s: append(buf[:0], word...)}
	e.limit = len(e.s)
	isV := func(r rune) bool { return strings.ContainsRune("aeiouyäö", r) }
	isC := func(r rune) bool { return strings.ContainsRune("bcdfghjklmnpqrstvwxz", r) }
	notV := func(r rune) bool { return !isV(r) }

	p1, p2 := e.limit, e.limit
	func() {
		e.cursor = 0
		if !e.goTo(isV) {
			return
		}
		e.nextChar()
		if !e.goTo(notV) {
			return
		}
		e.nextChar()
		p1 = e.cursor
		if !e.goTo(isV) {
			return
		}
		e.nextChar()
		if !e.goTo(notV) {
			return
		}
		e.nextChar()
		p2 = e.cursor
	}()
	lv := func() bool { return e.amongB([]string{"aa", "ee", "ii", "oo", "uu", "ää", "öö"}) >= 0 }
	vi := func() bool { return e.amongB([]string{"'", "ai", "ei", "ii", "oi", "ui", "äi", "öi"}) >= 0 }
	either := func(a, b string) func() bool {
		return func() bool { return e.eqB(a) || e.eqB(b) }
	}

	e.lb = 0
	// Particles.
	e.cursor = e.limit
	if v, ok := e.amongInRegion(p1, []string{"pa", "sti", "kaan", "han", "kin", "hän", "kään", "ko", "pä", "kö"}); ok {
		if v == 1 && p2 <= e.cursor || v != 1 && e.inB(func(r rune) bool { return isV(r) || r == 'n' || r == 't' }) {
			e.sliceFrom("")
		}
	}
	// Possessives.
	e.cursor = e.limit
	if v, ok := e.amongInRegion(p1, []string{"nsa", "mme", "nne", "ni", "si", "an", "en", "än", "nsä"}); ok {
		switch v {
		case 4: // si, not after k
			if !e.eqB("k") {
				e.sliceFrom("")
			}
		case 3: // ni; and kse becomes ksi
			e.sliceFrom("")
			e.ket = e.cursor
			if e.eqB("kse") {
				e.bra = e.cursor
				e.sliceFrom("ksi")
			}
		case 5:
			if e.amongB([]string{"lla", "na", "ssa", "ta", "lta", "sta"}) >= 0 {
				e.sliceFrom("")
			}
		case 7:
			if e.amongB([]string{"llä", "nä", "ssä", "tä", "ltä", "stä"}) >= 0 {
				e.sliceFrom("")
			}
		case 6:
			if e.amongB([]string{"lle", "ine"}) >= 0 {
				e.sliceFrom("")
			}
		default:
			e.sliceFrom("")
		}
	}
	// Case endings.
	endingRemoved := false
	e.cursor = e.limit
	if e.cursor >= p1 {
		lb := e.lb
		e.lb = p1
		e.ket = e.cursor
		v := e.amongBCond(finnishCaseEndings, map[string]func() bool{
			"han": either("a", "'"), "den": vi, "seen": lv, "hen": either("e", "'"), "tten": vi, "hin": either("i", "'"),
			"siin": vi, "hon": either("o", "'"), "hun": either("u", "'"), "hän": either("ä", "'"),
			"hön": func() bool { return e.eqB("ö") || e.eqB("ø") || e.eqB("'") },
		})
		e.lb = lb
		if v != "" {
			e.bra = e.cursor
			del := true
			switch v {
			case "n": // illative after a long vowel or ie: that vowel's last letter goes too
				c := e.cursor
				if lv() || e.eqB("ie") {
					e.cursor = c
					if e.cursor > e.lb {
						e.prevChar()
						e.bra = e.cursor
					}
				}
				e.cursor = c
			case "a", "ä":
				del = e.inB(isV) && e.inB(isC)
			case "tta", "ttä":
				del = e.eqB("e")
			}
			if del {
				e.sliceFrom("")
				endingRemoved = true
			}
		}
	}
	// Other endings.
	e.cursor = e.limit
	if v, ok := e.amongInRegion(p2, []string{"eja", "mma", "imma", "mpa", "impa", "mmi", "immi", "mpi", "impi", "ejä", "mmä", "immä",
		"mpä", "impä"}); ok {
		if !slices.Contains([]int{1, 3, 5, 7, 10, 12}, v) || !e.eqB("po") {
			e.sliceFrom("")
		}
	}
	// Plurals.
	e.cursor = e.limit
	if endingRemoved {
		if _, ok := e.amongInRegion(p1, []string{"i", "j"}); ok {
			e.sliceFrom("")
		}
	} else if e.cursor >= p1 {
		lb := e.lb
		e.lb = p1
		e.ket = e.cursor
		ok := false
		if e.eqB("t") {
			e.bra = e.cursor
			c := e.cursor
			if e.inB(isV) {
				e.cursor = c
				e.sliceFrom("")
				ok = true
			}
		}
		e.lb = lb
		if ok {
			if v, ok := e.amongInRegion(p2, []string{"mma", "imma"}); ok {
				if v == 1 || !e.eqB("po") {
					e.sliceFrom("")
				}
			}
		}
	}
	// Tidy.
	e.cursor = e.limit
	if e.cursor >= p1 {
		lb := e.lb
		e.lb = p1
		if lv() {
			e.cursor = e.limit
			e.ket = e.cursor
			if e.cursor > e.lb {
				e.prevChar()
				e.bra = e.cursor
				e.sliceFrom("")
			}
		}
		e.cursor = e.limit
		e.ket = e.cursor
		if e.inB(func(r rune) bool { return strings.ContainsRune("aäei", r) }) {
			e.bra = e.cursor
			if e.inB(isC) {
				e.sliceFrom("")
			}
		}
		e.cursor = e.limit
		e.ket = e.cursor
		if e.eqB("j") {
			e.bra = e.cursor
			if e.eqB("o") || e.eqB("u") {
				e.sliceFrom("")
			}
		}
		e.cursor = e.limit
		e.ket = e.cursor
		if e.eqB("o") {
			e.bra = e.cursor
			if e.eqB("j") {
				e.sliceFrom("")
			}
		}
		e.lb = lb
		// Undouble a consonant before the final vowels.
		e.cursor = e.limit
		for e.cursor > e.lb {
			c := e.cursor
			e.prevChar()
			if !isV(e.runeAt(e.cursor)) {
				e.cursor = c
				break
			}
		}
		if e.cursor > e.lb {
			e.ket = e.cursor
			if e.inB(isC) {
				e.bra = e.cursor
				if e.eqB(string(e.s[e.bra:e.ket])) {
					e.sliceFrom("")
				}
			}
		}
		e.cursor = e.limit
		e.ket = e.cursor
		if e.eqB("'") {
			e.bra = e.cursor
			e.sliceFrom("")
		}
	}
	if string(e.s[:e.limit]) == word {
		return word
	}
	return string(e.s[:e.limit])
}

var finnishCaseEndings = []string{"a", "lla", "na", "ssa", "ta", "lta", "sta", "tta", "lle", "ine", "ksi", "n", "han", "den", "seen",
	"hen", "tten", "hin", "siin", "hon", "hun", "hän", "hön", "ä", "llä", "nä", "ssä", "tä", "ltä", "stä", "ttä"}

// amongBCond is amongB for suffixes some of which hold only when cond
// does (checked with the cursor before the suffix): the longest suffix
// that matches and holds wins; it returns that suffix ("" if none).
func (e *snowball) amongBCond(suffixes []string, cond map[string]func() bool) string {
	c := e.cursor
	order := slices.Clone(suffixes)
	slices.SortStableFunc(order, func(a, b string) int { return len(b) - len(a) })
	for _, s := range order {
		if c-e.lb < len(s) || string(e.s[c-len(s):c]) != s {
			continue
		}
		if f, ok := cond[s]; ok {
			e.cursor = c - len(s)
			if !f() {
				continue
			}
		}
		e.cursor = c - len(s)
		return s
	}
	e.cursor = c
	return ""
}
