package fts

import "strings"

// The Swedish, Norwegian and Danish stemmers as LanceDB 0.39 runs them:
// Snowball revision 97b1acc (the frostem 1.20260804.1 crate LanceDB
// bundles), on the token's bytes like stemEnglish.

func stemSwedish(word string) string {
	var buf [48]byte
	e := &snowball{s: append(buf[:0], word...)}
	e.limit = len(e.s)
	isV := func(r rune) bool { return strings.ContainsRune("aeiouyäåö", r) }

	// R1: after the first non-vowel following a vowel, at least 3 in.
	p1 := e.limit
	func() {
		e.cursor = 0
		if !e.hop(3) {
			return
		}
		x := e.cursor
		e.cursor = 0
		if !e.goTo(isV) {
			return
		}
		e.nextChar()
		if !e.goTo(func(r rune) bool { return !isV(r) }) {
			return
		}
		e.nextChar()
		p1 = max(e.cursor, x)
	}()

	etCondition := func() bool {
		c := e.cursor
		if !e.outB(isV) || !e.inB(isV) || e.cursor <= e.lb {
			return false
		}
		e.cursor = c
		if e.amongB([]string{"fab", "h", "pak", "rak", "stak", "kom", "iet", "cit", "dit", "alit", "ilit", "mit", "nit", "pit",
			"rit", "sit", "tit", "uit", "ivit", "kvit", "xit"}) >= 0 {
			return false
		}
		e.cursor = c
		return true
	}

	e.lb = 0
	e.cursor = e.limit
	// Main suffixes.
	if v, ok := e.amongInRegion(p1, []string{"a", "arna", "erna", "heterna", "orna", "ad", "e", "ade", "ande", "arne", "are", "aste",
		"en", "anden", "aren", "heten", "ern", "ar", "er", "heter", "or", "s", "as", "arnas", "ernas", "ornas", "es", "ades",
		"andes", "ens", "arens", "hetens", "erns", "at", "et", "andet", "het", "ast"}); ok {
		switch v {
		case 21: // s: with et before it, or after an s-ending
			c := e.cursor
			if e.eqB("et") && etCondition() {
				e.bra = e.cursor
				e.sliceFrom("")
			} else {
				e.cursor = c
				if e.inB(func(r rune) bool { return strings.ContainsRune("bcdfghjklmnoprtvy", r) }) {
					e.sliceFrom("")
				}
			}
		case 34: // et
			if etCondition() {
				e.sliceFrom("")
			}
		default:
			e.sliceFrom("")
		}
	}
	// Consonant pairs lose their last letter.
	e.cursor = e.limit
	if e.cursor >= p1 {
		lb := e.lb
		e.lb = p1
		if e.amongB([]string{"dd", "gd", "nn", "dt", "gt", "kt", "tt"}) >= 0 {
			e.cursor = e.limit
			e.ket = e.cursor
			if e.cursor > e.lb {
				e.prevChar()
				e.bra = e.cursor
				e.sliceFrom("")
			}
		}
		e.lb = lb
	}
	// Other suffixes.
	e.cursor = e.limit
	if v, ok := e.amongInRegion(p1, []string{"ig", "lig", "els", "fullt", "öst"}); ok {
		switch v {
		case 3:
			e.sliceFrom("full")
		case 4:
			if e.inB(func(r rune) bool { return strings.ContainsRune("iklnprtuv", r) }) {
				e.sliceFrom("ös")
			}
		default:
			e.sliceFrom("")
		}
	}
	if string(e.s[:e.limit]) == word {
		return word
	}
	return string(e.s[:e.limit])
}

// amongInRegion finds the longest of suffixes ending at the cursor within
// the region from p (setlimit tomark p), sets the slice to it and leaves
// the cursor at its start (with the backward limit as it was).
func (e *snowball) amongInRegion(p int, suffixes []string) (int, bool) {
	if e.cursor < p {
		return -1, false
	}
	lb := e.lb
	e.lb = p
	e.ket = e.cursor
	v := e.amongB(suffixes)
	e.lb = lb
	if v < 0 {
		return -1, false
	}
	e.bra = e.cursor
	return v, true
}

// nordicRegion is R1 as the Norwegian and Danish stemmers mark it (after
// an apostrophe, else after the first non-vowel following a vowel; at
// least 3 characters in), and false for words of under 3 characters,
// which they leave alone.
func (e *snowball) nordicRegion(isV func(rune) bool) (int, bool) {
	p1 := e.limit
	e.cursor = 0
	if e.goTo(func(r rune) bool { return r == '\'' }) {
		e.nextChar()
		p1 = e.cursor
	} else {
		e.cursor = 0
		if e.goTo(isV) {
			e.nextChar()
			if e.goTo(func(r rune) bool { return !isV(r) }) {
				e.nextChar()
				p1 = e.cursor
			}
		}
	}
	e.cursor = 0
	if !e.hop(3) {
		return 0, false
	}
	return max(p1, e.cursor), true
}

func stemNorwegian(word string) string {
	var buf [48]byte
	e := &snowball{s: append(buf[:0], word...)}
	e.limit = len(e.s)
	isV := func(r rune) bool { return strings.ContainsRune("aeêioòóôuyæåø", r) }
	p1, ok := e.nordicRegion(isV)
	if !ok {
		return word
	}
	e.lb = 0
	e.cursor = e.limit
	if v, ok := e.amongInRegion(p1, []string{"a", "e", "ede", "ande", "ende", "ane", "ene", "hetene", "erte", "en", "heten", "ar",
		"er", "heter", "s", "as", "es", "edes", "endes", "enes", "hetenes", "ens", "hetens", "ers", "ets", "et", "het", "ert", "ast"}); ok {
		switch v {
		case 8, 27: // erte, ert
			e.sliceFrom("er")
		case 23: // ers, unless after one of these
			switch e.amongB([]string{"ind", "kk", "nk", "amm", "omm", "kap", "skap", "pp", "lt", "ast", "øst", "v", "hav", "giv"}) {
			case -1, 6, 12, 13:
				e.sliceFrom("")
			}
		case 14: // s after an s-ending, r not after e, or k after a non-vowel
			c := e.cursor
			del := e.inB(func(r rune) bool { return strings.ContainsRune("bcdfghjlmnoptvyz", r) })
			if !del {
				e.cursor = c
				if e.eqB("r") {
					del = !e.eqB("e")
				}
			}
			if !del {
				e.cursor = c
				del = e.eqB("k") && e.outB(isV)
			}
			if del {
				e.sliceFrom("")
			}
		default:
			e.sliceFrom("")
		}
	}
	e.cursor = e.limit
	if _, ok := e.amongInRegion(p1, []string{"dt", "vt"}); ok {
		e.cursor = e.limit
		e.ket = e.cursor
		if e.cursor > e.lb {
			e.prevChar()
			e.bra = e.cursor
			e.sliceFrom("")
		}
	}
	e.cursor = e.limit
	if _, ok := e.amongInRegion(p1, []string{"leg", "eleg", "ig", "eig", "lig", "elig", "els", "lov", "elov", "slov", "hetslov"}); ok {
		e.sliceFrom("")
	}
	e.cursor = e.limit
	e.ket = e.cursor
	if e.eqB("'") {
		e.bra = e.cursor
		e.sliceFrom("")
	}
	if string(e.s[:e.limit]) == word {
		return word
	}
	return string(e.s[:e.limit])
}

func stemDanish(word string) string {
	var buf [48]byte
	e := &snowball{s: append(buf[:0], word...)}
	e.limit = len(e.s)
	isV := func(r rune) bool { return strings.ContainsRune("aeiouyæåø", r) }
	p1, ok := e.nordicRegion(isV)
	if !ok {
		return word
	}
	consonantPair := func() {
		c := e.cursor
		if _, ok := e.amongInRegion(p1, []string{"gd", "dt", "gt", "kt"}); !ok {
			e.cursor = c
			return
		}
		e.cursor = c
		e.ket = e.cursor
		if e.cursor > e.lb {
			e.prevChar()
			e.bra = e.cursor
			e.sliceFrom("")
		}
	}
	e.lb = 0
	e.cursor = e.limit
	if v, ok := e.amongInRegion(p1, []string{"hed", "ethed", "ered", "e", "erede", "ende", "erende", "ene", "erne", "ere", "en",
		"heden", "eren", "er", "heder", "erer", "s", "heds", "es", "endes", "erendes", "enes", "ernes", "eres", "ens", "hedens",
		"erens", "ers", "ets", "erets", "et", "eret"}); ok {
		if v != 16 || e.inB(func(r rune) bool { return strings.ContainsRune("abcdfghjklmnoprtvyzå'", r) }) {
			e.sliceFrom("")
		}
	}
	e.cursor = e.limit
	consonantPair()
	// Other suffixes.
	e.cursor = e.limit
	e.ket = e.cursor
	if e.eqB("st") {
		e.bra = e.cursor
		if e.eqB("ig") {
			e.sliceFrom("")
		}
	}
	e.cursor = e.limit
	if v, ok := e.amongInRegion(p1, []string{"ig", "lig", "elig", "els", "løst"}); ok {
		if v == 4 {
			e.sliceFrom("løs")
		} else {
			e.sliceFrom("")
			e.cursor = e.limit
			consonantPair()
		}
	}
	// Undouble a final consonant.
	e.cursor = e.limit
	if e.cursor >= p1 {
		lb := e.lb
		e.lb = p1
		e.ket = e.cursor
		ok := e.inB(func(r rune) bool { return strings.ContainsRune("bdfgklmnprst", r) })
		e.lb = lb
		if ok {
			e.bra = e.cursor
			ch := string(e.s[e.bra:e.ket])
			if e.eqB(ch) {
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
	if string(e.s[:e.limit]) == word {
		return word
	}
	return string(e.s[:e.limit])
}
