package fts

import "strings"

// stemGerman stems a token as LanceDB 0.39 does for language German:
// Snowball German as Snowball revision 97b1acc defines it (the frostem
// 1.20260804.1 crate LanceDB bundles), on the token's bytes like
// stemEnglish.
func stemGerman(word string) string {
	var buf [48]byte
	e := &snowball{s: append(buf[:0], word...)}
	e.limit = len(e.s)

	// Prelude: u and y between vowels are consonants (U, Y); then ß, ae,
	// oe, ue become ss, ä, ö, ü (not the ue of qu).
	p := 0
	for {
		found := false
		for q := p; ; {
			e.cursor = q
			if e.in(isGermanVowel) {
				e.bra = e.cursor
				c := e.cursor
				for _, m := range [][2]string{{"u", "U"}, {"y", "Y"}} {
					e.cursor = c
					if e.eqF(m[0]) {
						e.ket = e.cursor
						if e.in(isGermanVowel) {
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
	e.cursor = 0
	for {
		e.bra = e.cursor
		n := longestPrefix(e.s[e.cursor:e.limit], []string{"ß", "ae", "oe", "ue", "qu"})
		if n == 0 {
			if e.cursor >= e.limit {
				break
			}
			e.nextChar()
			continue
		}
		e.cursor += n
		e.ket = e.cursor
		switch string(e.s[e.bra:e.ket]) {
		case "ß":
			e.sliceFrom("ss")
		case "ae":
			e.sliceFrom("ä")
		case "oe":
			e.sliceFrom("ö")
		case "ue":
			e.sliceFrom("ü")
		}
	}

	// Regions: R1 at least 3 characters in.
	p1, p2 := e.limit, e.limit
	func() {
		e.cursor = 0
		if !e.hop(3) {
			return
		}
		x := e.cursor
		e.cursor = 0
		notV := func(r rune) bool { return !isGermanVowel(r) }
		if !e.goTo(isGermanVowel) {
			return
		}
		e.nextChar()
		if !e.goTo(notV) {
			return
		}
		e.nextChar()
		p1 = e.cursor
		if p1 < x {
			p1 = x
		}
		if !e.goTo(isGermanVowel) {
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
	e.germanStep1(p1)
	e.cursor = e.limit
	e.germanStep2(p1)
	e.cursor = e.limit
	e.germanStep3(p1, p2)
	e.cursor = e.limit
	e.ket = e.cursor
	if e.amongB([]string{"'", "'sch", "'s"}) >= 0 {
		e.bra = e.cursor
		if e.cursor > e.lb {
			e.prevChar()
			if e.cursor > e.lb {
				e.sliceFrom("")
			}
		}
	}

	// Postlude.
	var b strings.Builder
	for _, r := range string(e.s[:e.limit]) {
		switch r {
		case 'Y':
			r = 'y'
		case 'U', 'ü':
			r = 'u'
		case 'ä':
			r = 'a'
		case 'ö':
			r = 'o'
		}
		b.WriteRune(r)
	}
	if b.String() == word {
		return word
	}
	return b.String()
}

func isGermanVowel(r rune) bool { return strings.ContainsRune("aeiouyäöü", r) }

func (e *snowball) germanStep1(p1 int) {
	e.ket = e.cursor
	v := e.amongB([]string{"e", "em", "en", "erinnen", "erin", "ln", "ern", "er", "s", "es", "lns"})
	if v < 0 {
		return
	}
	e.bra = e.cursor
	if p1 > e.cursor {
		return
	}
	switch v {
	case 1: // em, but not -system
		if e.eqB("syst") {
			return
		}
		e.sliceFrom("")
	case 3, 4, 6, 7: // erinnen, erin, ern, er
		e.sliceFrom("")
	case 0, 2, 9: // e, en, es; and the s of -nis
		e.sliceFrom("")
		e.ket = e.cursor
		if e.eqB("s") {
			e.bra = e.cursor
			if e.eqB("nis") {
				e.sliceFrom("")
			}
		}
	case 8: // s
		if !e.inB(func(r rune) bool { return strings.ContainsRune("bdfghklmnrt", r) }) {
			return
		}
		e.sliceFrom("")
	case 5, 10: // ln, lns
		e.sliceFrom("l")
	}
}

func (e *snowball) germanStep2(p1 int) {
	e.ket = e.cursor
	v := e.amongB([]string{"en", "er", "et", "st", "est"})
	if v < 0 {
		return
	}
	e.bra = e.cursor
	if p1 > e.cursor {
		return
	}
	switch v {
	case 0, 1, 4:
		e.sliceFrom("")
	case 3: // st after an st-ending, 3 characters in
		if !e.inB(func(r rune) bool { return strings.ContainsRune("bdfghklmnt", r) }) || !e.hopBack(3) {
			return
		}
		e.sliceFrom("")
	case 2: // et
		c := e.cursor
		if !e.inB(func(r rune) bool { return strings.ContainsRune("dfgklmnrstUzä", r) }) {
			return
		}
		e.cursor = c
		if e.amongB([]string{"tick", "plan", "geordn", "intern", "tr"}) >= 0 {
			return
		}
		e.cursor = c
		e.sliceFrom("")
	}
}

func (e *snowball) germanStep3(p1, p2 int) {
	e.ket = e.cursor
	v := e.amongB([]string{"end", "ig", "ung", "lich", "isch", "ik", "heit", "keit"})
	if v < 0 {
		return
	}
	e.bra = e.cursor
	if p2 > e.cursor {
		return
	}
	switch v {
	case 0, 2: // end, ung; and ig not after e, in R2
		e.sliceFrom("")
		e.ket = e.cursor
		if !e.eqB("ig") {
			return
		}
		e.bra = e.cursor
		c := e.cursor
		if e.eqB("e") {
			return
		}
		e.cursor = c
		if p2 > e.cursor {
			return
		}
		e.sliceFrom("")
	case 1, 4, 5: // ig, isch, ik: not after e
		c := e.cursor
		if e.eqB("e") {
			return
		}
		e.cursor = c
		e.sliceFrom("")
	case 3, 6: // lich, heit; and er or en in R1
		e.sliceFrom("")
		e.ket = e.cursor
		if !e.eqB("er") && !e.eqB("en") {
			return
		}
		e.bra = e.cursor
		if p1 > e.cursor {
			return
		}
		e.sliceFrom("")
	case 7: // keit; and lich or ig in R2
		e.sliceFrom("")
		e.ket = e.cursor
		if e.amongB([]string{"ig", "lich"}) < 0 {
			return
		}
		e.bra = e.cursor
		if p2 > e.cursor {
			return
		}
		e.sliceFrom("")
	}
}
