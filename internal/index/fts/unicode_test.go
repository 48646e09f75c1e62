package fts

import (
	"bytes"
	"flag"
	"fmt"
	"go/format"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/compactord/compactord/internal/testing/lancedb"
)

var updateTables = flag.Bool("update-unicode", false, "regenerate unicode_tables.go from LanceDB (probes every code point; minutes)")

// probeConfigs are the index configurations a code point is probed
// with, in a doc "a<r>b": simple (is r a token character?), whitespace
// (is r a split?), whitespace lower-cased (what does r lower-case to?)
// and whitespace ASCII-folded (what does r fold to?).
var probeConfigs = []map[string]any{
	probeConfig("baseTokenizer", "simple"),
	probeConfig("baseTokenizer", "whitespace"),
	probeConfig("baseTokenizer", "whitespace", "lowercase", true),
	probeConfig("baseTokenizer", "whitespace", "asciiFolding", true),
}

func probeConfig(kv ...any) map[string]any {
	m := map[string]any{"stem": false, "removeStopWords": false, "asciiFolding": false, "lowercase": false, "maxTokenLength": 1000}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

// probed is what LanceDB did to one code point.
type probed struct {
	token, space bool
	lower, fold  string // "" for a split character
}

// probe has LanceDB tokenize "a<r>b" for each r under probeConfigs.
func probe(t *testing.T, rs []rune) []probed {
	t.Helper()
	docs := make([]string, len(rs))
	for i, r := range rs {
		docs[i] = "a" + string(r) + "b"
	}
	// One LanceDB run per 300,000 docs keeps each within the harness's
	// time limit.
	bags := make([][]bag, len(probeConfigs))
	for lo := 0; lo < len(docs); lo += 300_000 {
		part := lanceBags(t, probeConfigs, docs[lo:min(lo+300_000, len(docs))])
		for c := range bags {
			bags[c] = append(bags[c], part[c]...)
		}
	}
	out := make([]probed, len(rs))
	var bad []string
	for i, r := range rs {
		whole, split := bag{docs[i]: 1}, bag{"a": 1, "b": 1}
		p := &out[i]
		switch {
		case sameBag(bags[0][i], whole):
			p.token = true
		case !sameBag(bags[0][i], split):
			bad = append(bad, fmt.Sprintf("%U simple %s", r, bagString(bags[0][i])))
		}
		switch {
		case sameBag(bags[1][i], split):
			p.space = true
			if !sameBag(bags[2][i], split) || !sameBag(bags[3][i], split) {
				bad = append(bad, fmt.Sprintf("%U splits unevenly: %s %s", r, bagString(bags[2][i]), bagString(bags[3][i])))
			}
			continue
		case !sameBag(bags[1][i], whole):
			bad = append(bad, fmt.Sprintf("%U whitespace %s", r, bagString(bags[1][i])))
			continue
		}
		for k, dst := range []*string{&p.lower, &p.fold} {
			b := bags[2+k][i]
			if len(b) != 1 {
				bad = append(bad, fmt.Sprintf("%U config %d: %s", r, 2+k, bagString(b)))
				continue
			}
			for tok := range b {
				if !strings.HasPrefix(tok, "a") || !strings.HasSuffix(tok, "b") || len(tok) < 2 {
					bad = append(bad, fmt.Sprintf("%U config %d: %q", r, 2+k, tok))
					continue
				}
				*dst = tok[1 : len(tok)-1]
			}
		}
	}
	if len(bad) > 0 {
		t.Fatalf("%d code points LanceDB treats in a way the tables cannot say, e.g. %s", len(bad), strings.Join(bad[:min(len(bad), 10)], "; "))
	}
	return out
}

// ours is what the tables say of r.
func ours(r rune) probed {
	p := probed{token: isTokenRune(r), space: isSplitSpace(r)}
	if !p.space {
		p.lower, p.fold = lowerCase(string(r)), asciiFold(string(r))
	}
	return p
}

// allRunes is every Unicode scalar value (surrogates cannot be in UTF-8
// text).
func allRunes() []rune {
	var rs []rune
	for r := rune(0); r <= utf8.MaxRune; r++ {
		if utf8.ValidRune(r) {
			rs = append(rs, r)
		}
	}
	return rs
}

// TestUnicodeTables: the generated tables say of a sample of code points
// (every ASCII and Latin-1 one, every table entry's neighbourhood is too
// many, so a fixed pseudo-random 4,000 of the rest) what LanceDB does
// with them. With -update-unicode it probes every code point and rewrites
// unicode_tables.go.
func TestUnicodeTables(t *testing.T) {
	lancedb.Require(t)
	if *updateTables {
		rs := allRunes()
		got := probe(t, rs)
		src := genTables(rs, got)
		if err := os.WriteFile("unicode_tables.go", src, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("probed %d code points; wrote unicode_tables.go (%d bytes)", len(rs), len(src))
		return
	}
	var rs []rune
	for r := rune(0); r < 0x250; r++ {
		rs = append(rs, r)
	}
	all := allRunes()
	rng := rand.New(rand.NewPCG(30, 2))
	for range 4000 {
		rs = append(rs, all[rng.IntN(len(all))])
	}
	// Characters the tests' texts use, and table edges.
	for _, s := range []string{"ßİıΣσςЁё中文😀①ﬁǅẞ\u0301\u00a0\u3000", "ǄǅǆΐÅÆØŁĦŊŒÞ"} {
		rs = append(rs, []rune(s)...)
	}
	for _, tr := range tokenRanges[:min(len(tokenRanges), 50)] {
		rs = append(rs, tr.lo, tr.hi, tr.hi+1)
	}
	slices.Sort(rs)
	rs = slices.Compact(rs)
	rs = slices.DeleteFunc(rs, func(r rune) bool { return !utf8.ValidRune(r) })
	got := probe(t, rs)
	diffs := 0
	for i, r := range rs {
		if o := ours(r); o != got[i] {
			if diffs++; diffs <= 10 {
				t.Errorf("%U: tables say %+v, LanceDB %+v", r, o, got[i])
			}
		}
	}
	if diffs > 0 {
		t.Fatalf("%d of %d code points differ: regenerate with go test ./internal/index/fts -run TestUnicodeTables -args -update-unicode", diffs, len(rs))
	}
}

// genTables renders unicode_tables.go from what LanceDB did with rs.
func genTables(rs []rune, got []probed) []byte {
	var token, space []runeRange
	add := func(rr []runeRange, r rune) []runeRange {
		if n := len(rr); n > 0 && rr[n-1].hi == r-1 {
			rr[n-1].hi = r
			return rr
		}
		return append(rr, runeRange{r, r})
	}
	var lower, fold []runeString
	for i, r := range rs {
		p := got[i]
		if p.token && r >= utf8.RuneSelf {
			token = add(token, r)
		}
		if p.space {
			space = add(space, r)
			continue
		}
		if p.lower != string(r) {
			lower = append(lower, runeString{r, p.lower})
		}
		if p.fold != string(r) {
			fold = append(fold, runeString{r, p.fold})
		}
	}
	var b bytes.Buffer
	b.WriteString("// Code generated by go test ./internal/index/fts -run TestUnicodeTables -args -update-unicode; DO NOT EDIT.\n")
	fmt.Fprintf(&b, "// Probed from LanceDB %s: every code point in a doc \"a<c>b\".\n\npackage fts\n\n", lancedb.Version)
	ranges := func(name, doc string, rr []runeRange) {
		fmt.Fprintf(&b, "// %s\nvar %s = []runeRange{\n", doc, name)
		for i, x := range rr {
			fmt.Fprintf(&b, "{0x%x, 0x%x},", x.lo, x.hi)
			if i%6 == 5 {
				b.WriteString("\n")
			}
		}
		b.WriteString("\n}\n\n")
	}
	strs := func(name, doc string, t []runeString) {
		fmt.Fprintf(&b, "// %s\nvar %s = []runeString{\n", doc, name)
		for i, x := range t {
			fmt.Fprintf(&b, "{0x%x, %s},", x.r, quoteASCII(x.s))
			if i%5 == 4 {
				b.WriteString("\n")
			}
		}
		b.WriteString("\n}\n\n")
	}
	ranges("tokenRanges", "tokenRanges are the non-ASCII code points the simple tokenizer keeps in tokens.", token)
	ranges("spaceRanges", "spaceRanges are the code points the whitespace tokenizer splits on.", space)
	strs("lowerTable", "lowerTable maps the code points LowerCaser changes to their lower case.", lower)
	strs("foldTable", "foldTable maps the code points AsciiFoldingFilter changes to their folding.", fold)
	src, err := format.Source(b.Bytes())
	if err != nil {
		panic(err)
	}
	return src
}

// quoteASCII quotes s as a Go string of ASCII only (\u escapes), so the
// generated file shows no invisible characters.
func quoteASCII(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r >= 0x20 && r < 0x7f:
			b.WriteRune(r)
		case r < 0x10000:
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			fmt.Fprintf(&b, "\\U%08x", r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
