package fts

// stemSpanish stems a token as LanceDB 0.39 does for language Spanish:
// Snowball Spanish as Snowball revision 97b1acc defines it (the frostem
// 1.20260804.1 crate LanceDB bundles), on the token's bytes like
// stemEnglish.
func stemSpanish(word string) string {
	var buf [48]byte
	e := &snowball{s: append(buf[:0], word...)}
	e.limit = len(e.s)

	// Regions: RV (pV), R1, R2.
	pV, p1, p2 := e.limit, e.limit, e.limit
	func() {
		e.cursor = 0
		if e.in(isSpanishVowel) {
			c := e.cursor
			if e.out(isSpanishVowel) && e.goTo(isSpanishVowel) {
				e.nextChar()
				pV = e.cursor
				return
			}
			e.cursor = c
			if e.in(isSpanishVowel) && e.goTo(func(r rune) bool { return !isSpanishVowel(r) }) {
				e.nextChar()
				pV = e.cursor
				return
			}
		}
		e.cursor = 0
		if !e.out(isSpanishVowel) {
			return
		}
		c := e.cursor
		if e.out(isSpanishVowel) && e.goTo(isSpanishVowel) {
			e.nextChar()
			pV = e.cursor
			return
		}
		e.cursor = c
		if !e.in(isSpanishVowel) || e.cursor >= e.limit {
			return
		}
		e.nextChar()
		pV = e.cursor
	}()
	func() {
		e.cursor = 0
		if !e.goTo(isSpanishVowel) {
			return
		}
		e.nextChar()
		if !e.goTo(func(r rune) bool { return !isSpanishVowel(r) }) {
			return
		}
		e.nextChar()
		p1 = e.cursor
		if !e.goTo(isSpanishVowel) {
			return
		}
		e.nextChar()
		if !e.goTo(func(r rune) bool { return !isSpanishVowel(r) }) {
			return
		}
		e.nextChar()
		p2 = e.cursor
	}()

	e.lb = 0
	e.cursor = e.limit
	e.spanishAttachedPronoun(pV)
	e.cursor = e.limit
	if !e.spanishStandardSuffix(p1, p2) {
		e.cursor = e.limit
		if !e.spanishYVerbSuffix(pV) {
			e.cursor = e.limit
			e.spanishVerbSuffix(pV)
		}
	}
	e.cursor = e.limit
	e.spanishResidualSuffix(pV)

	// Postlude: acute accents go.
	out := make([]byte, 0, e.limit)
	for _, r := range string(e.s[:e.limit]) {
		switch r {
		case 'á':
			r = 'a'
		case 'é':
			r = 'e'
		case 'í':
			r = 'i'
		case 'ó':
			r = 'o'
		case 'ú':
			r = 'u'
		}
		out = append(out, string(r)...)
	}
	if string(out) == word {
		return word
	}
	return string(out)
}

func isSpanishVowel(r rune) bool {
	switch r {
	case 'a', 'e', 'i', 'o', 'u', 'á', 'é', 'í', 'ó', 'ú', 'ü':
		return true
	}
	return false
}

// in steps forward over the next character if in(it).
func (e *snowball) in(in func(rune) bool) bool {
	if e.cursor >= e.limit || !in(e.runeAt(e.cursor)) {
		return false
	}
	e.nextChar()
	return true
}

// out steps forward over the next character if not in(it).
func (e *snowball) out(in func(rune) bool) bool {
	if e.cursor >= e.limit || in(e.runeAt(e.cursor)) {
		return false
	}
	e.nextChar()
	return true
}

// goTo moves forward to the next character that is in(it) (not past it).
func (e *snowball) goTo(in func(rune) bool) bool {
	for e.cursor < e.limit {
		if in(e.runeAt(e.cursor)) {
			return true
		}
		e.nextChar()
	}
	return false
}

func (e *snowball) spanishAttachedPronoun(pV int) {
	e.ket = e.cursor
	if e.amongB([]string{"la", "sela", "le", "me", "se", "lo", "selo", "las", "selas", "les", "los", "selos", "nos"}) < 0 {
		return
	}
	e.bra = e.cursor
	v := e.amongB([]string{"ando", "iendo", "yendo", "ándo", "iéndo", "ar", "er", "ir", "ár", "ér", "ír"})
	if v < 0 || pV > e.cursor {
		return
	}
	switch v {
	case 3:
		e.bra = e.cursor
		e.sliceFrom("ando")
	case 4:
		e.bra = e.cursor
		e.sliceFrom("iendo")
	case 8:
		e.bra = e.cursor
		e.sliceFrom("ar")
	case 9:
		e.bra = e.cursor
		e.sliceFrom("er")
	case 10:
		e.bra = e.cursor
		e.sliceFrom("ir")
	case 2: // yendo: only after u
		if !e.eqB("u") {
			return
		}
		e.sliceFrom("")
	default:
		e.sliceFrom("")
	}
}

var spanishStandardSuffixes = []string{"ica", "ancia", "encia", "adora", "osa", "ista", "iva", "anza", "logía", "idad", "able", "ible",
	"ante", "mente", "amente", "acion", "ucion", "ación", "ución", "ico", "ismo", "oso", "amiento", "imiento", "ivo", "ador",
	"icas", "ancias", "encias", "adoras", "osas", "istas", "ivas", "anzas", "logías", "idades", "ables", "ibles", "aciones",
	"uciones", "adores", "antes", "icos", "ismos", "osos", "amientos", "imientos", "ivos"}

var spanishStandardAction = []int{1, 2, 5, 2, 1, 1, 9, 1, 3, 8, 1, 1, 2, 7, 6, 2, 4, 2, 4, 1, 1, 1, 1, 1, 9, 2, 1, 2, 5, 2, 1, 1, 9, 1, 3, 8,
	1, 1, 2, 4, 2, 2, 1, 1, 1, 1, 1, 9}

// tryDeleteB deletes one of suffixes before the cursor if it starts in
// R2 (p2); the cursor ends at its start, or stays.
func (e *snowball) tryDeleteB(p2 int, suffixes ...string) int {
	c := e.cursor
	e.ket = e.cursor
	v := e.amongB(suffixes)
	if v < 0 {
		e.cursor = c
		return -1
	}
	e.bra = e.cursor
	if p2 > e.cursor {
		e.cursor = c
		return -1
	}
	e.sliceFrom("")
	return v
}

func (e *snowball) spanishStandardSuffix(p1, p2 int) bool {
	e.ket = e.cursor
	v := e.amongB(spanishStandardSuffixes)
	if v < 0 {
		return false
	}
	e.bra = e.cursor
	switch spanishStandardAction[v] {
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
		e.tryDeleteB(p2, "ic")
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
		e.sliceFrom("ente")
	case 6: // amente
		if p1 > e.cursor {
			return false
		}
		e.sliceFrom("")
		if e.tryDeleteB(p2, "ic", "ad", "os", "iv") == 3 {
			e.tryDeleteB(p2, "at")
		}
	case 7: // mente
		if p2 > e.cursor {
			return false
		}
		e.sliceFrom("")
		e.tryDeleteB(p2, "able", "ible", "ante")
	case 8: // idad
		if p2 > e.cursor {
			return false
		}
		e.sliceFrom("")
		e.tryDeleteB(p2, "ic", "abil", "iv")
	case 9: // iva, ivo
		if p2 > e.cursor {
			return false
		}
		e.sliceFrom("")
		e.tryDeleteB(p2, "at")
	}
	return true
}

func (e *snowball) spanishYVerbSuffix(pV int) bool {
	if e.cursor < pV {
		return false
	}
	lb := e.lb
	e.lb = pV
	e.ket = e.cursor
	v := e.amongB([]string{"ya", "ye", "yan", "yen", "yeron", "yendo", "yo", "yas", "yes", "yais", "yamos", "yó"})
	e.lb = lb
	if v < 0 {
		return false
	}
	e.bra = e.cursor
	if !e.eqB("u") {
		return false
	}
	e.sliceFrom("")
	return true
}

var spanishVerbSuffixesGU = []string{"en", "es", "éis", "emos"}

var spanishVerbSuffixes = []string{
	"aba", "ada", "ida", "ara", "iera", "ía", "aría", "ería", "iría", "ad", "ed", "id", "ase", "iese", "aste",
	"iste", "an", "aban", "aran", "ieran", "ían", "arían", "erían", "irían", "asen", "iesen", "aron", "ieron",
	"arán", "erán", "irán", "ado", "ido", "ando", "iendo", "ar", "er", "ir", "as", "abas", "adas", "idas",
	"aras", "ieras", "ías", "arías", "erías", "irías", "ases", "ieses", "abais", "arais", "ierais", "íais",
	"aríais", "eríais", "iríais", "aseis", "ieseis", "asteis", "isteis", "áis", "aréis", "eréis", "iréis",
	"ados", "idos", "amos", "ábamos", "áramos", "iéramos", "íamos", "aríamos", "eríamos", "iríamos", "aremos",
	"eremos", "iremos", "ásemos", "iésemos", "imos", "arás", "erás", "irás", "ís", "ará", "erá", "irá", "aré",
	"eré", "iré", "ió",
}

func (e *snowball) spanishVerbSuffix(pV int) {
	if e.cursor < pV {
		return
	}
	lb := e.lb
	e.lb = pV
	e.ket = e.cursor
	end := e.cursor
	gu := e.amongB(spanishVerbSuffixesGU)
	gn := end - e.cursor
	e.cursor = end
	v := e.amongB(spanishVerbSuffixes)
	if v >= 0 && end-e.cursor < gn {
		v = -1
	}
	if gu >= 0 && v < 0 {
		e.cursor = end - gn
	}
	e.lb = lb
	if gu < 0 && v < 0 {
		return
	}
	e.bra = e.cursor
	if v < 0 { // en, es, éis, emos: and a u between g and them
		c := e.cursor
		if e.eqB("u") && e.eqB("g") {
			e.cursor = c - 1
		} else {
			e.cursor = c
		}
		e.bra = e.cursor
	}
	e.sliceFrom("")
}

func (e *snowball) spanishResidualSuffix(pV int) {
	e.ket = e.cursor
	v := e.amongB([]string{"a", "e", "o", "os", "á", "é", "í", "ó"})
	if v < 0 {
		return
	}
	e.bra = e.cursor
	if pV > e.cursor {
		return
	}
	e.sliceFrom("")
	if v != 1 && v != 5 { // e, é: and a u after g
		return
	}
	e.ket = e.cursor
	if !e.eqB("u") {
		return
	}
	e.bra = e.cursor
	c := e.cursor
	if !e.eqB("g") {
		return
	}
	e.cursor = c
	if pV > e.cursor {
		return
	}
	e.sliceFrom("")
}
