package fts

import "strings"

// stemPortuguese stems a token as LanceDB 0.39 does for language
// Portuguese: Snowball Portuguese as Snowball revision 97b1acc defines it
// (the frostem 1.20260804.1 crate LanceDB bundles), on the token's bytes
// like stemEnglish.
func stemPortuguese(word string) string {
	var buf [48]byte
	e := &snowball{s: append(buf[:0], strings.NewReplacer("ã", "a~", "õ", "o~").Replace(word)...)}
	e.limit = len(e.s)
	pV, p1, p2 := e.romanceRegions(isPortugueseVowel, "")

	e.lb = 0
	e.cursor = e.limit
	ok := e.portugueseStandardSuffix(pV, p1, p2)
	if !ok {
		e.cursor = e.limit
		if e.cursor >= pV {
			lb := e.lb
			e.lb = pV
			e.ket = e.cursor
			v := e.amongB(portugueseVerbSuffixes)
			e.lb = lb
			if v >= 0 {
				e.bra = e.cursor
				e.sliceFrom("")
				ok = true
			}
		}
	}
	e.cursor = e.limit
	if ok { // and an i after c in RV
		e.ket = e.cursor
		if e.eqB("i") {
			e.bra = e.cursor
			c := e.cursor
			if e.eqB("c") {
				e.cursor = c
				if pV <= e.cursor {
					e.sliceFrom("")
				}
			}
		}
	} else {
		e.ket = e.cursor
		if e.amongB([]string{"a", "i", "o", "os", "á", "í", "ó"}) >= 0 {
			e.bra = e.cursor
			if pV <= e.cursor {
				e.sliceFrom("")
			}
		}
	}
	// Residual form.
	e.cursor = e.limit
	e.ket = e.cursor
	switch e.amongB([]string{"e", "ç", "é", "ê"}) {
	case 0, 2, 3:
		e.bra = e.cursor
		if pV > e.cursor {
			break
		}
		e.sliceFrom("")
		e.ket = e.cursor
		c := e.cursor
		matched := false
		if e.eqB("u") {
			e.bra = e.cursor
			if e.eqB("g") {
				matched = true
			}
		}
		if !matched {
			e.cursor = c
			if e.eqB("i") {
				e.bra = e.cursor
				if e.eqB("c") {
					matched = true
				}
			}
		}
		if !matched {
			break
		}
		e.cursor = e.bra
		if pV <= e.cursor {
			e.sliceFrom("")
		}
	case 1:
		e.bra = e.cursor
		e.sliceFrom("c")
	}

	out := strings.NewReplacer("a~", "ã", "o~", "õ").Replace(string(e.s[:e.limit]))
	if out == word {
		return word
	}
	return out
}

func isPortugueseVowel(r rune) bool { return strings.ContainsRune("aeiouáéíóúâêô", r) }

var portugueseStandardSuffixes = []string{
	"ica", "ância", "ência", "logia", "ira", "adora", "osa", "ista", "iva", "eza", "idade", "ante", "mente",
	"amente", "ável", "ível", "ico", "ismo", "oso", "amento", "imento", "ivo", "aça~o", "uça~o", "ador", "icas",
	"ências", "logias", "iras", "adoras", "osas", "istas", "ivas", "ezas", "idades", "adores", "antes",
	"aço~es", "uço~es", "icos", "ismos", "osos", "amentos", "imentos", "ivos",
}

var portugueseStandardAction = []int{
	1, 1, 4, 2, 9, 1, 1, 1, 8, 1, 7, 1, 6, 5, 1, 1, 1, 1, 1, 1, 1, 8, 1, 3, 1, 1, 4, 2, 9, 1, 1, 1, 8, 1, 7, 1,
	1, 1, 3, 1, 1, 1, 1, 1, 8,
}

func (e *snowball) portugueseStandardSuffix(pV, p1, p2 int) bool {
	e.ket = e.cursor
	v := e.amongB(portugueseStandardSuffixes)
	if v < 0 {
		return false
	}
	e.bra = e.cursor
	switch portugueseStandardAction[v] {
	case 1:
		if p2 > e.cursor {
			return false
		}
		e.sliceFrom("")
	case 2:
		if p2 > e.cursor {
			return false
		}
		e.sliceFrom("log")
	case 3:
		if p2 > e.cursor {
			return false
		}
		e.sliceFrom("u")
	case 4:
		if p2 > e.cursor {
			return false
		}
		e.sliceFrom("ente")
	case 5: // amente
		if p1 > e.cursor {
			return false
		}
		e.sliceFrom("")
		if e.tryDeleteB(p2, "ic", "ad", "os", "iv") == 3 {
			e.tryDeleteB(p2, "at")
		}
	case 6: // mente
		if p2 > e.cursor {
			return false
		}
		e.sliceFrom("")
		e.tryDeleteB(p2, "ante", "avel", "ível")
	case 7: // idade
		if p2 > e.cursor {
			return false
		}
		e.sliceFrom("")
		e.tryDeleteB(p2, "ic", "abil", "iv")
	case 8: // iva, ivo
		if p2 > e.cursor {
			return false
		}
		e.sliceFrom("")
		e.tryDeleteB(p2, "at")
	case 9: // ira after e, in RV
		if pV > e.cursor || !e.eqB("e") {
			return false
		}
		e.sliceFrom("ir")
	}
	return true
}

var portugueseVerbSuffixes = []string{
	"ada", "ida", "ia", "aria", "eria", "iria", "ara", "era", "ira", "ava", "asse", "esse", "isse", "aste",
	"este", "iste", "ei", "arei", "erei", "irei", "am", "iam", "ariam", "eriam", "iriam", "aram", "eram",
	"iram", "avam", "em", "arem", "erem", "irem", "assem", "essem", "issem", "ado", "ido", "ando", "endo",
	"indo", "ara~o", "era~o", "ira~o", "ar", "er", "ir", "as", "adas", "idas", "ias", "arias", "erias", "irias",
	"aras", "eras", "iras", "avas", "es", "ardes", "erdes", "irdes", "ares", "eres", "ires", "asses", "esses",
	"isses", "astes", "estes", "istes", "is", "ais", "eis", "areis", "ereis", "ireis", "áreis", "éreis",
	"íreis", "ásseis", "ésseis", "ísseis", "áveis", "íeis", "aríeis", "eríeis", "iríeis", "ados", "idos",
	"amos", "áramos", "éramos", "íramos", "ávamos", "íamos", "aríamos", "eríamos", "iríamos", "emos", "aremos",
	"eremos", "iremos", "ássemos", "êssemos", "íssemos", "imos", "armos", "ermos", "irmos", "ámos", "arás",
	"erás", "irás", "eu", "iu", "ou", "ará", "erá", "irá",
}
