package fts

import "strings"

// stemRussian stems a token as LanceDB 0.39 does for language Russian:
// Snowball Russian as Snowball revision 97b1acc defines it (the frostem
// 1.20260804.1 crate LanceDB bundles), on the token's bytes like
// stemEnglish.
func stemRussian(word string) string {
	var buf [64]byte
	e := &snowball{s: append(buf[:0], strings.ReplaceAll(word, "ё", "е")...)}
	e.limit = len(e.s)
	isV := func(r rune) bool { return strings.ContainsRune("аеиоуыэюя", r) }
	notV := func(r rune) bool { return !isV(r) }

	pV, p2 := e.limit, e.limit
	func() {
		e.cursor = 0
		if !e.goTo(isV) {
			return
		}
		e.nextChar()
		pV = e.cursor
		if !e.goTo(notV) {
			return
		}
		e.nextChar()
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

	// Everything below works within RV (from pV).
	e.lb = pV
	e.cursor = e.limit
	afterA := func() bool { // the suffix follows а or я
		c := e.cursor
		if e.eqB("а") || e.eqB("я") {
			e.cursor = c
			return true
		}
		return false
	}
	// deleteGroups deletes the longest suffix of groups[0] (only after а
	// or я) or groups[1]; false if the longest match may not go.
	deleteGroups := func(first, second []string) bool {
		e.ket = e.cursor
		all := append(append([]string{}, first...), second...)
		v := e.amongB(all)
		if v < 0 {
			return false
		}
		e.bra = e.cursor
		if v < len(first) && !afterA() {
			return false
		}
		e.sliceFrom("")
		return true
	}
	if !deleteGroups([]string{"в", "вши", "вшись"}, []string{"ив", "ивши", "ившись", "ыв", "ывши", "ывшись"}) {
		e.cursor = e.limit
		e.ket = e.cursor
		if e.amongB([]string{"ся", "сь"}) >= 0 {
			e.bra = e.cursor
			e.sliceFrom("")
		}
		e.cursor = e.limit
		if deleteGroups(nil, russianAdjective) {
			e.cursor = e.limit
			deleteGroups([]string{"ем", "нн", "вш", "ющ", "щ"}, []string{"ивш", "ывш", "ующ"})
		} else {
			e.cursor = e.limit
			if !deleteGroups([]string{"ла", "на", "ете", "йте", "ли", "й", "л", "ем", "н", "ло", "но", "ет", "ют", "ны", "ть", "ешь", "нно"}, russianVerb) {
				e.cursor = e.limit
				deleteGroups(nil, russianNoun)
			}
		}
	}
	e.cursor = e.limit
	e.ket = e.cursor
	if e.eqB("и") {
		e.bra = e.cursor
		e.sliceFrom("")
	}
	// Derivational: ост, ость in R2.
	e.cursor = e.limit
	e.ket = e.cursor
	if e.amongB([]string{"ост", "ость"}) >= 0 {
		e.bra = e.cursor
		if p2 <= e.cursor {
			e.sliceFrom("")
		}
	}
	// Tidy up.
	e.cursor = e.limit
	e.ket = e.cursor
	switch e.amongB([]string{"ейш", "ейше", "н", "ь"}) {
	case 0, 1:
		e.bra = e.cursor
		e.sliceFrom("")
		e.ket = e.cursor
		if e.eqB("н") {
			e.bra = e.cursor
			if e.eqB("н") {
				e.sliceFrom("")
			}
		}
	case 2:
		e.bra = e.cursor
		if e.eqB("н") {
			e.sliceFrom("")
		}
	case 3:
		e.bra = e.cursor
		e.sliceFrom("")
	}
	if string(e.s[:e.limit]) == word {
		return word
	}
	return string(e.s[:e.limit])
}

var russianAdjective = []string{"ее", "ие", "ые", "ое", "ими", "ыми", "ей", "ий", "ый", "ой", "ем", "им", "ым", "ом", "его", "ого",
	"ему", "ому", "их", "ых", "ую", "юю", "ая", "яя", "ою", "ею"}

var russianVerb = []string{"ила", "ыла", "ена", "ейте", "уйте", "ите", "или", "ыли", "ей", "уй", "ил", "ыл", "им", "ым", "ен", "ило",
	"ыло", "ено", "ят", "ует", "уют", "ит", "ыт", "ены", "ить", "ыть", "ишь", "ую", "ю"}

var russianNoun = []string{"а", "ев", "ов", "ие", "ье", "е", "иями", "ями", "ами", "еи", "ии", "и", "ией", "ей", "ой", "ий", "й",
	"иям", "ям", "ием", "ем", "ам", "ом", "о", "у", "ах", "иях", "ях", "ы", "ь", "ию", "ью", "ю", "ия", "ья", "я"}
