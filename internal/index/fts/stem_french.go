package fts

import "strings"

// stemFrench stems a token as LanceDB 0.39 does for language French:
// Snowball French as Snowball revision 97b1acc defines it (the frostem
// 1.20260804.1 crate LanceDB bundles), on the token's bytes like
// stemEnglish. Upper-case I, U, Y and H mark letters while it works, so
// (as in LanceDB) those letters of a token that is not lower-cased come
// out changed too.
func stemFrench(word string) string {
	var buf [48]byte
	e := &snowball{s: append(buf[:0], word...)}
	e.limit = len(e.s)

	// Elisions: l', qu', ... at the start go unless they are the word.
	e.cursor = 0
	if e.in(isFrenchElision) || e.eqF("qu") {
		if e.eqF("'") && e.cursor < e.limit {
			e.bra, e.ket = 0, e.cursor
			e.sliceFrom("")
		}
	}
	e.frenchPrelude()

	// Regions.
	pV, p1, p2 := e.limit, e.limit, e.limit
	func() {
		e.cursor = 0
		if e.in(isFrenchVowel) && e.in(isFrenchVowel) && e.cursor < e.limit {
			e.nextChar()
			pV = e.cursor
			return
		}
		e.cursor = 0
		if n := longestPrefix(e.s[:e.limit], []string{"col", "ni", "par", "tap"}); n > 0 {
			e.cursor = n
			if n != 2 || e.in(isFrenchVowel) {
				pV = e.cursor
				return
			}
		}
		e.cursor = 0
		if e.cursor >= e.limit {
			return
		}
		e.nextChar()
		if !e.goTo(isFrenchVowel) {
			return
		}
		e.nextChar()
		pV = e.cursor
	}()
	func() {
		e.cursor = 0
		notV := func(r rune) bool { return !isFrenchVowel(r) }
		if !e.goTo(isFrenchVowel) {
			return
		}
		e.nextChar()
		if !e.goTo(notV) {
			return
		}
		e.nextChar()
		p1 = e.cursor
		if !e.goTo(isFrenchVowel) {
			return
		}
		e.nextChar()
		if !e.goTo(notV) {
			return
		}
		e.nextChar()
		p2 = e.cursor
	}()

	e.lb = 0
	e.cursor = e.limit
	ok := e.frenchStandardSuffix(pV, p1, p2)
	if !ok {
		e.cursor = e.limit
		ok = e.frenchIVerbSuffix(pV)
	}
	if !ok {
		e.cursor = e.limit
		ok = e.frenchVerbSuffix(pV, p2)
	}
	e.cursor = e.limit
	if ok {
		e.ket = e.cursor
		if e.eqB("Y") {
			e.bra = e.cursor
			e.sliceFrom("i")
		} else if e.eqB("ç") {
			e.bra = e.cursor
			e.sliceFrom("c")
		}
	} else {
		e.frenchResidualSuffix(pV, p2)
	}

	// Undouble enn, onn, ett, ell, eill.
	e.cursor = e.limit
	if e.amongB([]string{"ell", "eill", "enn", "onn", "ett"}) >= 0 {
		e.cursor = e.limit
		e.ket = e.cursor
		if e.cursor > e.lb {
			e.prevChar()
			e.bra = e.cursor
			e.sliceFrom("")
		}
	}
	// Unaccent é or è before final non-vowels.
	e.cursor = e.limit
	n := 0
	for e.outB(isFrenchVowel) {
		n++
	}
	if n > 0 {
		e.ket = e.cursor
		if e.eqB("é") || e.eqB("è") {
			e.bra = e.cursor
			e.sliceFrom("e")
		}
	}

	// Postlude: the markers go back.
	var b strings.Builder
	s := string(e.s[:e.limit])
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "He"):
			b.WriteString("ë")
			i += 2
		case strings.HasPrefix(s[i:], "Hi"):
			b.WriteString("ï")
			i += 2
		case s[i] == 'H':
			i++
		case s[i] == 'I':
			b.WriteByte('i')
			i++
		case s[i] == 'U':
			b.WriteByte('u')
			i++
		case s[i] == 'Y':
			b.WriteByte('y')
			i++
		default:
			b.WriteByte(s[i])
			i++
		}
	}
	if b.String() == word {
		return word
	}
	return b.String()
}

func isFrenchVowel(r rune) bool {
	return strings.ContainsRune("aeiouyâàëéêèïîôûù", r)
}

func isFrenchElision(r rune) bool { return strings.ContainsRune("cdjlmnst", r) }

// eqF steps forward over s if the text at the cursor starts with it.
func (e *snowball) eqF(s string) bool {
	if e.cursor >= e.limit || !strings.HasPrefix(string(e.s[e.cursor:e.limit]), s) {
		return false
	}
	e.cursor += len(s)
	return true
}

// frenchPrelude marks u, i and y that act as consonants (U, I, Y) and
// splits ë and ï (He, Hi), scanning left to right.
func (e *snowball) frenchPrelude() {
	p := 0
	for {
		found := false
		for q := p; ; {
			if e.frenchMark(q) {
				p, found = q, true
				break
			}
			if q >= e.limit {
				break
			}
			e.cursor = q
			e.nextChar()
			q = e.cursor
		}
		if !found {
			return
		}
	}
}

// frenchMark applies the first prelude rule that matches at q.
func (e *snowball) frenchMark(q int) bool {
	e.cursor = q
	if e.in(isFrenchVowel) {
		e.bra = e.cursor
		c := e.cursor
		for _, m := range [][2]string{{"u", "U"}, {"i", "I"}} {
			e.cursor = c
			if e.eqF(m[0]) {
				e.ket = e.cursor
				if e.in(isFrenchVowel) {
					e.sliceFrom(m[1])
					return true
				}
			}
		}
		e.cursor = c
		if e.eqF("y") {
			e.ket = e.cursor
			e.sliceFrom("Y")
			return true
		}
	}
	for _, m := range [][2]string{{"ë", "He"}, {"ï", "Hi"}} {
		e.cursor = q
		e.bra = e.cursor
		if e.eqF(m[0]) {
			e.ket = e.cursor
			e.sliceFrom(m[1])
			return true
		}
	}
	e.cursor = q
	e.bra = e.cursor
	if e.eqF("y") {
		e.ket = e.cursor
		if e.in(isFrenchVowel) {
			e.sliceFrom("Y")
			return true
		}
	}
	e.cursor = q
	if e.eqF("q") {
		e.bra = e.cursor
		if e.eqF("u") {
			e.ket = e.cursor
			e.sliceFrom("U")
			return true
		}
	}
	return false
}

var frenchStandardSuffixes = []string{"iqUe", "atrice", "ance", "ence", "logie", "able", "isme", "euse", "iste", "ive", "if", "usion",
	"ation", "ution", "ateur", "iqUes", "atrices", "ances", "ences", "logies", "ables", "ismes", "euses", "istes", "ives", "ifs",
	"usions", "ations", "utions", "ateurs", "ments", "ements", "issements", "ités", "ment", "ement", "issement", "amment",
	"emment", "aux", "eaux", "eux", "oux", "ité"}

var frenchStandardAction = []int{1, 2, 1, 5, 3, 1, 1, 12, 1, 8, 8, 4, 2, 4, 2, 1, 2, 1, 5, 3, 1, 1, 12, 1, 8, 8, 4, 2, 4, 2, 16,
	6, 13, 7, 16, 6, 13, 14, 15, 10, 9, 1, 11, 7}

// r2DeleteOr deletes the slice if the cursor is in R2, else replaces it
// with s.
func (e *snowball) r2DeleteOr(p2 int, s string) {
	if p2 <= e.cursor {
		e.sliceFrom("")
	} else {
		e.sliceFrom(s)
	}
}

func (e *snowball) frenchStandardSuffix(pV, p1, p2 int) bool {
	e.ket = e.cursor
	v := e.amongB(frenchStandardSuffixes)
	if v < 0 {
		return false
	}
	e.bra = e.cursor
	switch frenchStandardAction[v] {
	case 1:
		if p2 > e.cursor {
			return false
		}
		e.sliceFrom("")
	case 2:
		if p2 > e.cursor {
			return false
		}
		e.sliceFrom("")
		e.ket = e.cursor
		if e.eqB("ic") {
			e.bra = e.cursor
			e.r2DeleteOr(p2, "iqU")
		}
	case 3:
		if p2 > e.cursor {
			return false
		}
		e.sliceFrom("log")
	case 4:
		if p2 > e.cursor {
			return false
		}
		e.sliceFrom("u")
	case 5:
		if p2 > e.cursor {
			return false
		}
		e.sliceFrom("ent")
	case 6: // ement
		if pV > e.cursor {
			return false
		}
		e.sliceFrom("")
		c := e.cursor
		e.ket = e.cursor
		w := e.amongB([]string{"iqU", "abl", "Ièr", "ièr", "eus", "iv"})
		if w < 0 {
			e.cursor = c
			break
		}
		e.bra = e.cursor
		switch w {
		case 5: // iv
			if p2 > e.cursor {
				break
			}
			e.sliceFrom("")
			e.ket = e.cursor
			if !e.eqB("at") {
				break
			}
			e.bra = e.cursor
			if p2 > e.cursor {
				break
			}
			e.sliceFrom("")
		case 4: // eus
			if p2 <= e.cursor {
				e.sliceFrom("")
			} else if p1 <= e.cursor {
				e.sliceFrom("eux")
			}
		case 0, 1: // iqU, abl
			if p2 <= e.cursor {
				e.sliceFrom("")
			}
		case 2, 3: // ièr
			if pV <= e.cursor {
				e.sliceFrom("i")
			}
		}
	case 7: // ité
		if p2 > e.cursor {
			return false
		}
		e.sliceFrom("")
		e.ket = e.cursor
		switch e.amongB([]string{"ic", "abil", "iv"}) {
		case 1:
			e.bra = e.cursor
			e.r2DeleteOr(p2, "abl")
		case 0:
			e.bra = e.cursor
			e.r2DeleteOr(p2, "iqU")
		case 2:
			e.bra = e.cursor
			if p2 <= e.cursor {
				e.sliceFrom("")
			}
		}
	case 8: // if, ive
		if p2 > e.cursor {
			return false
		}
		e.sliceFrom("")
		e.ket = e.cursor
		if !e.eqB("at") {
			break
		}
		e.bra = e.cursor
		if p2 > e.cursor {
			break
		}
		e.sliceFrom("")
		e.ket = e.cursor
		if !e.eqB("ic") {
			break
		}
		e.bra = e.cursor
		e.r2DeleteOr(p2, "iqU")
	case 9:
		e.sliceFrom("eau")
	case 10:
		if p1 > e.cursor {
			return false
		}
		e.sliceFrom("al")
	case 11:
		if !e.inB(func(r rune) bool { return strings.ContainsRune("bhjlnp", r) }) {
			return false
		}
		e.sliceFrom("ou")
	case 12: // euse
		if p2 <= e.cursor {
			e.sliceFrom("")
		} else if p1 <= e.cursor {
			e.sliceFrom("eux")
		} else {
			return false
		}
	case 13: // issement
		if p1 > e.cursor || !e.outB(isFrenchVowel) {
			return false
		}
		e.sliceFrom("")
	case 14: // amment: changed, then the verb suffixes
		if pV <= e.cursor {
			e.sliceFrom("ant")
		}
		return false
	case 15: // emment
		if pV <= e.cursor {
			e.sliceFrom("ent")
		}
		return false
	case 16: // ment after a vowel in RV: deleted, then the verb suffixes
		c := e.cursor
		if e.inB(isFrenchVowel) && pV <= e.cursor {
			e.cursor = c
			e.sliceFrom("")
		}
		return false
	}
	return true
}

var frenchIVerbSuffixes = []string{"ira", "ie", "isse", "issante", "i", "irai", "ir", "iras", "ies", "îmes", "isses", "issantes",
	"îtes", "is", "irais", "issais", "irions", "issions", "irons", "issons", "issants", "it", "irait", "issait", "issant",
	"iraIent", "issaIent", "irent", "issent", "iront", "ît", "iriez", "issiez", "irez", "issez"}

func (e *snowball) frenchIVerbSuffix(pV int) bool {
	if e.cursor < pV {
		return false
	}
	lb := e.lb
	e.lb = pV
	defer func() { e.lb = lb }()
	e.ket = e.cursor
	if e.amongB(frenchIVerbSuffixes) < 0 {
		return false
	}
	e.bra = e.cursor
	c := e.cursor
	if e.eqB("H") {
		return false
	}
	e.cursor = c
	if !e.outB(isFrenchVowel) {
		return false
	}
	e.sliceFrom("")
	return true
}

var frenchVerbSuffixes = []string{"a", "era", "aise", "asse", "ante", "ée", "ai", "erai", "er", "as", "eras", "âmes", "aises", "asses",
	"antes", "âtes", "ées", "ais", "eais", "erais", "ions", "erions", "assions", "erons", "ants", "és", "ait", "erait", "ant",
	"aIent", "eraIent", "èrent", "assent", "eront", "ât", "ez", "iez", "eriez", "assiez", "erez", "é"}

var frenchVerbAction = []int{3, 2, 4, 3, 3, 2, 3, 2, 2, 3, 2, 3, 4, 3, 3, 3, 2, 4, 2, 2, 1, 2, 3, 2, 3, 2, 3, 2, 3, 3, 2, 2, 3, 2, 3,
	2, 2, 2, 3, 2, 2}

func (e *snowball) frenchVerbSuffix(pV, p2 int) bool {
	if e.cursor < pV {
		return false
	}
	lb := e.lb
	e.lb = pV
	e.ket = e.cursor
	v := e.amongB(frenchVerbSuffixes)
	e.lb = lb
	if v < 0 {
		return false
	}
	e.bra = e.cursor
	switch frenchVerbAction[v] {
	case 1: // ions
		if p2 > e.cursor {
			return false
		}
	case 3: // and an e before in RV
		c := e.cursor
		if e.eqB("e") && pV <= e.cursor {
			e.bra = e.cursor
		} else {
			e.cursor = c
		}
	case 4: // ais, but not balais, mauvais, déplais
		c := e.cursor
		switch e.amongB([]string{"al", "épl", "auv"}) {
		case 0:
			if e.cursor > e.lb {
				e.prevChar()
				if e.cursor <= e.lb {
					return false
				}
			}
		case 1, 2:
			return false
		}
		e.cursor = c
	}
	e.sliceFrom("")
	return true
}

func (e *snowball) frenchResidualSuffix(pV, p2 int) {
	e.ket = e.cursor
	if e.eqB("s") {
		e.bra = e.cursor
		c := e.cursor
		if e.eqB("Hi") || e.outB(func(r rune) bool { return strings.ContainsRune("aiouès", r) }) {
			e.cursor = c
			e.sliceFrom("")
		} else {
			e.cursor = e.limit
		}
	}
	if e.cursor < pV {
		return
	}
	lb := e.lb
	e.lb = pV
	defer func() { e.lb = lb }()
	e.ket = e.cursor
	v := e.amongB([]string{"e", "Ière", "ière", "ion", "Ier", "ier"})
	if v < 0 {
		return
	}
	e.bra = e.cursor
	switch v {
	case 3: // ion
		if p2 > e.cursor || (!e.eqB("s") && !e.eqB("t")) {
			return
		}
		e.sliceFrom("")
	case 0:
		e.sliceFrom("")
	default:
		e.sliceFrom("i")
	}
}
