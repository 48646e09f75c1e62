package fts

import "strings"

// stemHungarian stems a token as LanceDB 0.39 does for language
// Hungarian: Snowball Hungarian as Snowball revision 97b1acc defines it
// (the frostem 1.20260804.1 crate LanceDB bundles), on the token's bytes
// like stemEnglish.
func stemHungarian(word string) string {
	var buf [48]byte
	e := &snowball{s: append(buf[:0], word...)}
	e.limit = len(e.s)
	isV := func(r rune) bool { return strings.ContainsRune("aeiouáéíóöőúüű", r) }

	// R1: after the first non-vowel if the word starts with a vowel, else
	// after the first vowel.
	p1 := e.limit
	e.cursor = 0
	if e.in(isV) {
		if e.goTo(func(r rune) bool { return !isV(r) }) {
			e.nextChar()
			p1 = e.cursor
		}
	} else {
		e.cursor = 0
		if e.goTo(isV) {
			e.nextChar()
			p1 = e.cursor
		}
	}

	double := func() bool {
		c := e.cursor
		ok := e.amongB([]string{"bb", "cc", "dd", "ff", "gg", "jj", "kk", "ll", "mm", "nn", "pp", "rr", "ccs", "ss", "zzs", "tt", "vv",
			"ggy", "lly", "nny", "tty", "ssz", "zz"}) >= 0
		e.cursor = c
		return ok
	}
	undouble := func() {
		if e.cursor <= e.lb {
			return
		}
		e.prevChar()
		e.ket = e.cursor
		if e.cursor <= e.lb {
			return
		}
		e.prevChar()
		e.bra = e.cursor
		e.sliceFrom("")
	}
	// step replaces the longest suffix of table in R1 with its
	// replacement, reporting whether it did.
	step := func(table [][2]string) bool {
		e.cursor = e.limit
		e.ket = e.cursor
		suffixes := make([]string, len(table))
		for i, x := range table {
			suffixes[i] = x[0]
		}
		v := e.amongB(suffixes)
		if v < 0 {
			return false
		}
		e.bra = e.cursor
		if p1 > e.cursor {
			return false
		}
		e.sliceFrom(table[v][1])
		return true
	}
	// withDouble deletes a suffix of suffixes in R1 after a double
	// consonant and then undoubles it.
	withDouble := func(suffixes []string) {
		e.cursor = e.limit
		e.ket = e.cursor
		if e.amongB(suffixes) < 0 {
			return
		}
		e.bra = e.cursor
		if p1 > e.cursor || !double() {
			return
		}
		e.sliceFrom("")
		undouble()
	}

	e.lb = 0
	withDouble([]string{"al", "el"})
	if step(hungarianCase) {
		e.ket = e.cursor
		if v := e.amongB([]string{"á", "é"}); v >= 0 {
			e.bra = e.cursor
			if p1 <= e.cursor {
				e.sliceFrom([]string{"a", "e"}[v])
			}
		}
	}
	step(hungarianCaseSpecial)
	step(hungarianCaseOther)
	withDouble([]string{"á", "é"})
	step(hungarianOwned)
	step(hungarianSingOwner)
	step(hungarianPlurOwner)
	step(hungarianPlural)
	if string(e.s[:e.limit]) == word {
		return word
	}
	return string(e.s[:e.limit])
}

var hungarianCase = [][2]string{
	{"ba", ""}, {"ra", ""}, {"be", ""}, {"re", ""}, {"ig", ""}, {"nak", ""}, {"nek", ""}, {"val", ""},
	{"vel", ""}, {"ul", ""}, {"ből", ""}, {"ről", ""}, {"től", ""}, {"nál", ""}, {"nél", ""}, {"ból", ""},
	{"ról", ""}, {"tól", ""}, {"ül", ""}, {"n", ""}, {"an", ""}, {"ban", ""}, {"en", ""}, {"ben", ""},
	{"képpen", ""}, {"on", ""}, {"ön", ""}, {"képp", ""}, {"kor", ""}, {"t", ""}, {"at", ""}, {"et", ""},
	{"ként", ""}, {"anként", ""}, {"enként", ""}, {"onként", ""}, {"ot", ""}, {"ért", ""}, {"öt", ""},
	{"hez", ""}, {"hoz", ""}, {"höz", ""}, {"vá", ""}, {"vé", ""},
}

var hungarianCaseSpecial = [][2]string{
	{"án", "a"}, {"én", "e"}, {"ánként", "a"},
}

var hungarianCaseOther = [][2]string{
	{"stul", ""}, {"astul", ""}, {"ástul", "a"}, {"stül", ""}, {"estül", ""}, {"éstül", "e"},
}

var hungarianOwned = [][2]string{
	{"éi", ""}, {"áéi", "a"}, {"ééi", "e"}, {"é", ""}, {"ké", ""}, {"aké", ""}, {"eké", ""}, {"oké", ""},
	{"áké", "a"}, {"éké", "e"}, {"öké", ""}, {"éé", "e"},
}

var hungarianSingOwner = [][2]string{
	{"a", ""}, {"ja", ""}, {"d", ""}, {"ad", ""}, {"ed", ""}, {"od", ""}, {"ád", "a"}, {"éd", "e"}, {"öd", ""},
	{"e", ""}, {"je", ""}, {"nk", ""}, {"unk", ""}, {"ánk", "a"}, {"énk", "e"}, {"ünk", ""}, {"uk", ""},
	{"juk", ""}, {"ájuk", "a"}, {"ük", ""}, {"jük", ""}, {"éjük", "e"}, {"m", ""}, {"am", ""}, {"em", ""},
	{"om", ""}, {"ám", "a"}, {"ém", "e"}, {"o", ""}, {"á", "a"}, {"é", "e"},
}

var hungarianPlurOwner = [][2]string{
	{"id", ""}, {"aid", ""}, {"jaid", ""}, {"eid", ""}, {"jeid", ""}, {"áid", "a"}, {"éid", "e"}, {"i", ""},
	{"ai", ""}, {"jai", ""}, {"ei", ""}, {"jei", ""}, {"ái", "a"}, {"éi", "e"}, {"itek", ""}, {"eitek", ""},
	{"jeitek", ""}, {"éitek", "e"}, {"ik", ""}, {"aik", ""}, {"jaik", ""}, {"eik", ""}, {"jeik", ""},
	{"áik", "a"}, {"éik", "e"}, {"ink", ""}, {"aink", ""}, {"jaink", ""}, {"eink", ""}, {"jeink", ""},
	{"áink", "a"}, {"éink", "e"}, {"aitok", ""}, {"jaitok", ""}, {"áitok", "a"}, {"im", ""}, {"aim", ""},
	{"jaim", ""}, {"eim", ""}, {"jeim", ""}, {"áim", "a"}, {"éim", "e"},
}

var hungarianPlural = [][2]string{
	{"k", ""}, {"ak", ""}, {"ek", ""}, {"ok", ""}, {"ák", "a"}, {"ék", "e"}, {"ök", ""},
}
