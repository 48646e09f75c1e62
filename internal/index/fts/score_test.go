package fts

import (
	"bytes"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compactord/compactord/internal/testing/lancedb"
)

// TestScoresAndImpactsLanceDB: on a LanceDB index whose docs have 1 to
// 305 tokens and frequencies 1 to 4, the impact entries computed from the
// postings and doc lengths are LanceDB's bytes, and each block score is
// LanceDB's raised by one to five ulps (never below it: LanceDB's ln is up to two ulps off).
func TestScoresAndImpactsLanceDB(t *testing.T) {
	lancedb.Require(t)
	dir := t.TempDir()
	f := &lancedb.Fixture{URI: dir, Table: "t", Dir: filepath.Join(dir, "t.lance")}
	var rows []lancedb.Row
	for i := int64(0); i < 1500; i++ {
		var w []string
		for k := int64(0); k <= i%4; k++ {
			w = append(w, "common")
		}
		for k := int64(0); k < (i*7)%300; k++ {
			w = append(w, fmt.Sprintf("f%d", k%50))
		}
		if i%3 == 0 {
			w = append(w, "rare", "rare")
		}
		rows = append(rows, lancedb.Row{"id": i, "doc": strings.Join(w, " ")})
	}
	f.Run(t, lancedb.Create([]lancedb.Column{{Name: "id", Type: "int64"}, {Name: "doc", Type: "utf8", Nullable: true}}, rows), lancedb.CreateIndex("doc", "fts", "doc_idx"))
	s, err := ReadSegment(dirOpener(segmentDir(t, f.Dir)))
	if err != nil {
		t.Fatal(err)
	}
	p := s.Partitions[0]
	N := len(p.RowIDs)
	avg := float32(p.TotalTokens) / float32(N)
	blocks, exact := 0, 0
	for tok, id := range p.Tokens {
		ps, err := p.Decode(id, false)
		if err != nil {
			t.Fatal(err)
		}
		if imp := Impacts(ps, p.NumTokens); !slices.EqualFunc(imp, p.Impacts[id], bytes.Equal) {
			t.Fatalf("%q: impacts %x, LanceDB's %x", tok, imp, p.Impacts[id])
		}
		for i, sc := range BlockScores(ps, p.NumTokens, N, avg) {
			theirs := ps.BlockScores[i]
			d := int64(math.Float32bits(sc)) - int64(math.Float32bits(theirs))
			if d < 1 || d > 5 {
				t.Fatalf("%q block %d: score %v, LanceDB's %v (%d ulps)", tok, i, sc, theirs, d)
			}
			blocks++
			if d == 3 {
				exact++
			}
		}
	}
	// Most of LanceDB's ln values are correctly rounded.
	if exact < blocks/2 {
		t.Errorf("only %d of %d block scores are LanceDB's plus three ulps", exact, blocks)
	}
}

// TestQuantizeLen: lengths below 16 are exact; above, each byte stands
// for a bucket starting at a power-of-two multiple of 8..15.
func TestQuantizeLen(t *testing.T) {
	for _, c := range [][2]uint32{{0, 0}, {7, 7}, {8, 8}, {15, 15}, {16, 16}, {17, 16}, {18, 17}, {31, 23}, {32, 24}, {285, 48}, {1 << 30, 224}} {
		if got := quantizeLen(c[0]); got != c[1] {
			t.Errorf("quantizeLen(%d) = %d, want %d", c[0], got, c[1])
		}
	}
}
