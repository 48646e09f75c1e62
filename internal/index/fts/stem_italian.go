package fts

import "strings"

// stemItalian stems a token as LanceDB 0.39 does for language Italian:
// Snowball Italian as Snowball revision 97b1acc defines it (the frostem
// 1.20260804.1 crate LanceDB bundles), on the token's bytes like
// stemEnglish.
func stemItalian(word string) string {
	var buf [48]byte
	e := &snowball{s: append(buf[:0], word...)}
	e.limit = len(e.s)

	// Elisions: l', dell', ... at the start go unless they are the word.
	if n := longestPrefix(e.s[:e.limit], italianElisions); n > 0 && n < e.limit {
		e.bra, e.ket = 0, n
		e.sliceFrom("")
	}
	// Prelude: acute accents become grave, the u of qu is a consonant
	// (U), and so are u and i between vowels (U, I).
	e.cursor = 0
	for {
		e.bra = e.cursor
		n := longestPrefix(e.s[e.cursor:e.limit], []string{"qu", "á", "é", "í", "ó", "ú"})
		if n == 0 {
			if e.cursor >= e.limit {
				break
			}
			e.nextChar()
			continue
		}
		e.cursor += n
		e.ket = e.cursor
		e.sliceFrom(map[string]string{"qu": "qU", "á": "à", "é": "è", "í": "ì", "ó": "ò", "ú": "ù"}[string(e.s[e.bra:e.ket])])
	}
	p := 0
	for {
		found := false
		for q := p; ; {
			e.cursor = q
			if e.in(isItalianVowel) {
				e.bra = e.cursor
				c := e.cursor
				for _, m := range [][2]string{{"u", "U"}, {"i", "I"}} {
					e.cursor = c
					if e.eqF(m[0]) {
						e.ket = e.cursor
						if e.in(isItalianVowel) {
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

	pV, p1, p2 := e.romanceRegions(isItalianVowel, "divan")

	e.lb = 0
	e.cursor = e.limit
	// Attached pronouns after a gerund (deleted) or an infinitive (-e).
	e.ket = e.cursor
	if e.amongB(italianPronouns) >= 0 {
		e.bra = e.cursor
		if v := e.amongB([]string{"ando", "endo", "ar", "er", "ir"}); v >= 0 && pV <= e.cursor {
			if v < 2 {
				e.sliceFrom("")
			} else {
				e.sliceFrom("e")
			}
		}
	}
	e.cursor = e.limit
	if !e.italianStandardSuffix(pV, p1, p2) {
		e.cursor = e.limit
		if e.cursor >= pV {
			lb := e.lb
			e.lb = pV
			e.ket = e.cursor
			v := e.amongB(italianVerbSuffixes)
			e.lb = lb
			if v >= 0 {
				e.bra = e.cursor
				e.sliceFrom("")
			}
		}
	}
	// Vowel suffix.
	e.cursor = e.limit
	e.ket = e.cursor
	if e.inB(func(r rune) bool { return strings.ContainsRune("aeioàèìò", r) }) {
		e.bra = e.cursor
		if pV <= e.cursor {
			e.sliceFrom("")
			e.ket = e.cursor
			if e.eqB("i") {
				e.bra = e.cursor
				if pV <= e.cursor {
					e.sliceFrom("")
				}
			}
		}
	}
	e.cursor = e.limit
	e.ket = e.cursor
	if e.eqB("h") {
		e.bra = e.cursor
		if e.inB(func(r rune) bool { return r == 'c' || r == 'g' }) && pV <= e.cursor {
			e.sliceFrom("")
		}
	}

	// Postlude.
	out := strings.NewReplacer("I", "i", "U", "u").Replace(string(e.s[:e.limit]))
	if out == word {
		return word
	}
	return out
}

func isItalianVowel(r rune) bool { return strings.ContainsRune("aeiouàèìòù", r) }

var italianElisions = []string{"all'", "d'", "dall'", "dell'", "gl'", "l'", "m'", "nell'", "quell'", "quest'", "s'", "sull'", "t'", "tutt'", "un'", "v'"}

var italianPronouns = []string{
	"la", "cela", "gliela", "mela", "tela", "vela", "le", "cele", "gliele", "mele", "tele", "vele", "ne",
	"cene", "gliene", "mene", "sene", "tene", "vene", "ci", "li", "celi", "glieli", "meli", "teli", "veli",
	"gli", "mi", "si", "ti", "vi", "lo", "celo", "glielo", "melo", "telo", "velo",
}

// romanceRegions computes RV (pV), R1 and R2 as the Spanish, Italian and
// Portuguese stemmers do (exception: a prefix whose end is RV's start).
func (e *snowball) romanceRegions(isV func(rune) bool, exception string) (pV, p1, p2 int) {
	pV, p1, p2 = e.limit, e.limit, e.limit
	notV := func(r rune) bool { return !isV(r) }
	func() {
		e.cursor = 0
		if e.in(isV) {
			c := e.cursor
			if e.out(isV) && e.goTo(isV) {
				e.nextChar()
				pV = e.cursor
				return
			}
			e.cursor = c
			if e.in(isV) && e.goTo(notV) {
				e.nextChar()
				pV = e.cursor
				return
			}
		}
		e.cursor = 0
		if exception != "" && e.eqF(exception) {
			pV = e.cursor
			return
		}
		e.cursor = 0
		if !e.out(isV) {
			return
		}
		c := e.cursor
		if e.out(isV) && e.goTo(isV) {
			e.nextChar()
			pV = e.cursor
			return
		}
		e.cursor = c
		if !e.in(isV) || e.cursor >= e.limit {
			return
		}
		e.nextChar()
		pV = e.cursor
	}()
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
	return pV, p1, p2
}

var italianStandardSuffixes = []string{
	"ica", "logia", "osa", "ista", "iva", "anza", "enza", "ice", "atrice", "iche", "logie", "abile", "ibile",
	"usione", "azione", "uzione", "atore", "ose", "ante", "mente", "amente", "iste", "ive", "anze", "enze",
	"ici", "atrici", "ichi", "abili", "ibili", "ismi", "usioni", "azioni", "uzioni", "atori", "osi", "anti",
	"amenti", "imenti", "isti", "ivi", "ico", "ismo", "oso", "amento", "imento", "ivo", "ità", "istà", "istè",
	"istì",
}

var italianStandardAction = []int{
	1, 3, 1, 1, 9, 1, 5, 1, 1, 1, 3, 1, 1, 4, 2, 4, 2, 1, 1, 1, 7, 1, 9, 1, 5, 1, 1, 1, 1, 1, 1, 4, 2, 4, 2, 1,
	1, 6, 6, 1, 9, 1, 1, 1, 6, 6, 9, 8, 1, 1, 1,
}

func (e *snowball) italianStandardSuffix(pV, p1, p2 int) bool {
	e.ket = e.cursor
	v := e.amongB(italianStandardSuffixes)
	if v < 0 {
		return false
	}
	e.bra = e.cursor
	switch italianStandardAction[v] {
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
	case 6:
		if pV > e.cursor {
			return false
		}
		e.sliceFrom("")
	case 7: // amente
		if p1 > e.cursor {
			return false
		}
		e.sliceFrom("")
		if e.tryDeleteB(p2, "ic", "abil", "os", "iv") == 3 {
			e.tryDeleteB(p2, "at")
		}
	case 8: // ità
		if p2 > e.cursor {
			return false
		}
		e.sliceFrom("")
		e.tryDeleteB(p2, "ic", "abil", "iv")
	case 9: // ivo
		if p2 > e.cursor {
			return false
		}
		e.sliceFrom("")
		if e.tryDeleteB(p2, "at") >= 0 {
			e.tryDeleteB(p2, "ic")
		}
	}
	return true
}

var italianVerbSuffixes = []string{
	"isca", "enda", "ata", "ita", "uta", "ava", "eva", "iva", "erebbe", "irebbe", "isce", "ende", "are", "ere",
	"ire", "asse", "ate", "avate", "evate", "ivate", "ete", "erete", "irete", "ite", "ereste", "ireste", "ute",
	"erai", "irai", "isci", "endi", "erei", "irei", "assi", "ati", "iti", "eresti", "iresti", "uti", "avi",
	"evi", "ivi", "isco", "ando", "endo", "Yamo", "iamo", "avamo", "evamo", "ivamo", "eremo", "iremo", "assimo",
	"ammo", "emmo", "eremmo", "iremmo", "immo", "ano", "iscano", "avano", "evano", "ivano", "eranno", "iranno",
	"ono", "iscono", "arono", "erono", "irono", "erebbero", "irebbero", "assero", "essero", "issero", "ato",
	"ito", "uto", "avo", "evo", "ivo", "ar", "ir", "erà", "irà", "erò", "irò",
}
