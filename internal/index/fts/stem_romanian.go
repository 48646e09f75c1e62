package fts

import "strings"

// stemRomanian stems a token as LanceDB 0.39 does for language Romanian:
// Snowball Romanian as Snowball revision 97b1acc defines it (the frostem
// 1.20260804.1 crate LanceDB bundles), on the token's bytes like
// stemEnglish.
func stemRomanian(word string) string {
	var buf [48]byte
	e := &snowball{s: append(buf[:0], strings.NewReplacer("ş", "ș", "ţ", "ț").Replace(word)...)}
	e.limit = len(e.s)
	isV := func(r rune) bool { return strings.ContainsRune("aeiouâîă", r) }

	// Prelude: u and i between vowels are consonants (U, I).
	p := 0
	for {
		found := false
		for q := p; ; {
			e.cursor = q
			if e.in(isV) {
				e.bra = e.cursor
				c := e.cursor
				for _, m := range [][2]string{{"u", "U"}, {"i", "I"}} {
					e.cursor = c
					if e.eqF(m[0]) {
						e.ket = e.cursor
						if e.in(isV) {
							e.sliceFrom(m[1])
							found = true
							break
						}
					}
				}
				if found {
					p = q
					break
				}
			}
			if q >= e.limit {
				break
			}
			e.cursor = q
			e.nextChar()
			q = e.cursor
		}
		if !found {
			break
		}
	}
	pV, p1, p2 := e.romanceRegions(isV, "")

	e.lb = 0
	// Step 0.
	e.cursor = e.limit
	e.ket = e.cursor
	if v := e.amongB(romanianStep0); v >= 0 {
		e.bra = e.cursor
		if p1 <= e.cursor {
			switch romanianStep0Action[v] {
			case 1:
				e.sliceFrom("")
			case 2:
				e.sliceFrom("a")
			case 3:
				e.sliceFrom("e")
			case 4:
				e.sliceFrom("i")
			case 5:
				if !e.eqB("ab") {
					e.sliceFrom("i")
				}
			case 6:
				e.sliceFrom("at")
			case 7:
				e.sliceFrom("ați")
			}
		}
	}
	// Standard suffixes, after combined ones.
	removed := false
	for {
		e.cursor = e.limit
		e.ket = e.cursor
		v := e.amongB(romanianCombo)
		if v < 0 {
			break
		}
		e.bra = e.cursor
		if p1 > e.cursor {
			break
		}
		e.sliceFrom([]string{"", "abil", "ibil", "iv", "ic", "at", "it"}[romanianComboAction[v]])
		removed = true
	}
	e.cursor = e.limit
	e.ket = e.cursor
	if v := e.amongB(romanianStandard); v >= 0 {
		e.bra = e.cursor
		if p2 <= e.cursor {
			switch romanianStandardAction[v] {
			case 1:
				e.sliceFrom("")
				removed = true
			case 2:
				if e.eqB("ț") {
					e.bra = e.cursor
					e.sliceFrom("t")
					removed = true
				}
			case 3:
				e.sliceFrom("ist")
				removed = true
			}
		}
	}
	// Verb suffixes, if no standard one went.
	e.cursor = e.limit
	if !removed && e.cursor >= pV {
		lb := e.lb
		e.lb = pV
		e.ket = e.cursor
		if v := e.amongB(romanianVerb); v >= 0 {
			e.bra = e.cursor
			if romanianVerbAction[v] == 2 || e.outB(isV) || e.eqB("u") {
				e.sliceFrom("")
			}
		}
		e.lb = lb
	}
	// Vowel suffix in RV.
	e.cursor = e.limit
	e.ket = e.cursor
	if e.amongB([]string{"a", "e", "ie", "i", "ă"}) >= 0 {
		e.bra = e.cursor
		if pV <= e.cursor {
			e.sliceFrom("")
		}
	}
	out := strings.NewReplacer("I", "i", "U", "u").Replace(string(e.s[:e.limit]))
	if out == word {
		return word
	}
	return out
}

var romanianStep0 = []string{
	"ea", "ația", "aua", "iua", "ație", "ele", "ile", "iile", "iei", "atei", "ii", "ului", "ul", "elor", "ilor",
	"iilor",
}

var romanianStep0Action = []int{
	3, 7, 2, 4, 7, 3, 5, 4, 4, 6, 4, 1, 1, 3, 4, 4,
}

var romanianCombo = []string{
	"icala", "iciva", "ativa", "itiva", "icale", "ațiune", "ițiune", "atoare", "itoare", "ătoare", "icitate",
	"abilitate", "ibilitate", "ivitate", "icive", "ative", "itive", "icali", "atori", "icatori", "itori",
	"ători", "icitati", "abilitati", "ivitati", "icivi", "ativi", "itivi", "icităi", "abilităi", "ivităi",
	"icități", "abilități", "ivități", "ical", "ator", "icator", "itor", "ător", "iciv", "ativ", "itiv",
	"icală", "icivă", "ativă", "itivă",
}

var romanianComboAction = []int{
	4, 4, 5, 6, 4, 5, 6, 5, 6, 5, 4, 1, 2, 3, 4, 5, 6, 4, 5, 4, 6, 5, 4, 1, 3, 4, 5, 6, 4, 1, 3, 4, 1, 3, 4, 5,
	4, 6, 5, 4, 5, 6, 4, 4, 5, 6,
}

var romanianStandard = []string{
	"ica", "abila", "ibila", "oasa", "ata", "ita", "anta", "ista", "uta", "iva", "ic", "ice", "abile", "ibile",
	"isme", "iune", "oase", "ate", "itate", "ite", "ante", "iste", "ute", "ive", "ici", "abili", "ibili",
	"iuni", "atori", "osi", "ati", "itati", "iti", "anti", "isti", "uti", "iști", "ivi", "ităi", "oși", "ități",
	"abil", "ibil", "ism", "ator", "os", "at", "it", "ant", "ist", "ut", "iv", "ică", "abilă", "ibilă", "oasă",
	"ată", "ită", "antă", "istă", "ută", "ivă",
}

var romanianStandardAction = []int{
	1, 1, 1, 1, 1, 1, 1, 3, 1, 1, 1, 1, 1, 1, 3, 2, 1, 1, 1, 1, 1, 3, 1, 1, 1, 1, 1, 2, 1, 1, 1, 1, 1, 1, 3, 1,
	3, 1, 1, 1, 1, 1, 1, 3, 1, 1, 1, 1, 1, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 1, 1,
}

var romanianVerb = []string{
	"ea", "ia", "esc", "ăsc", "ind", "ând", "are", "ere", "ire", "âre", "se", "ase", "sese", "ise", "use",
	"âse", "ește", "ăște", "eze", "ai", "eai", "iai", "sei", "ești", "ăști", "ui", "ezi", "ași", "seși",
	"aseși", "seseși", "iseși", "useși", "âseși", "iși", "uși", "âși", "ați", "eați", "iați", "eți", "iți",
	"arăți", "serăți", "aserăți", "seserăți", "iserăți", "userăți", "âserăți", "irăți", "urăți", "ârăți", "âți",
	"âi", "am", "eam", "iam", "em", "asem", "sesem", "isem", "usem", "âsem", "im", "ăm", "arăm", "serăm",
	"aserăm", "seserăm", "iserăm", "userăm", "âserăm", "irăm", "urăm", "ârăm", "âm", "au", "eau", "iau", "indu",
	"ându", "ez", "ească", "ară", "seră", "aseră", "seseră", "iseră", "useră", "âseră", "iră", "ură", "âră",
	"ează",
}

var romanianVerbAction = []int{
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 1, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 1, 1, 1, 1, 1, 2, 1, 2, 1, 1, 1, 1, 1,
	1, 2, 1, 1, 2, 2, 1, 2, 1, 2, 1, 1, 1, 1, 1, 1, 2, 1, 1, 1, 1, 2, 1, 2, 1, 1, 1, 2, 2, 1, 2, 1, 2, 1, 1, 1,
	1, 1, 1, 2, 1, 1, 1, 1, 1, 1, 1, 1, 2, 1, 2, 1, 1, 1, 1, 1, 1, 1,
}
