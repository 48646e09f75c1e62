package fts

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"testing"

	"github.com/compactord/compactord/internal/testing/lancedb"
)

// bag is one doc's tokens as LanceDB's index holds them: token to count
// (the index keeps no order without positions).
type bag map[string]int

// lanceBags has LanceDB 0.39 build one full-text index per configuration
// (Index.fts options) over docs and returns, per configuration, each
// doc's tokens as the index holds them (an empty bag for a doc without
// tokens). The docs go into one table, one column per configuration, in
// fragments of lanceChunk rows (one per write), so doc i is row i%lanceChunk
// of fragment i/lanceChunk.
func lanceBags(t *testing.T, configs []map[string]any, docs []string) [][]bag {
	t.Helper()
	bags, _ := lanceBagsParams(t, configs, docs)
	return bags
}

// lanceBagsParams is lanceBags that also returns the tokenizer params
// each index recorded.
func lanceBagsParams(t *testing.T, configs []map[string]any, docs []string) ([][]bag, []Params) {
	t.Helper()
	dir := t.TempDir()
	f := &lancedb.Fixture{URI: dir, Table: "t", Dir: filepath.Join(dir, "t.lance")}
	cols := []lancedb.Column{{Name: "id", Type: "int64"}}
	for c := range configs {
		cols = append(cols, lancedb.Column{Name: fmt.Sprintf("c%d", c), Type: "utf8", Nullable: true})
	}
	var steps []lancedb.Step
	for lo := 0; lo < len(docs) || lo == 0; lo += lanceChunk {
		var rows []lancedb.Row
		for i := lo; i < min(lo+lanceChunk, len(docs)); i++ {
			r := lancedb.Row{"id": int64(i)}
			for c := range configs {
				r[fmt.Sprintf("c%d", c)] = docs[i]
			}
			rows = append(rows, r)
		}
		if lo == 0 {
			steps = append(steps, lancedb.Create(cols, rows))
		} else {
			steps = append(steps, lancedb.Add(rows))
		}
	}
	for c, opts := range configs {
		o := maps.Clone(opts)
		o["withPosition"] = false
		steps = append(steps, lancedb.CreateVectorIndex(fmt.Sprintf("c%d", c), "fts", fmt.Sprintf("c%d_idx", c), o))
	}
	steps = append(steps, lancedb.ListIndices())
	out := f.Run(t, steps...)
	ixs, err := out.Indices(len(steps) - 1)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]string{}
	for _, ix := range ixs {
		byName[ix.Name] = ix.IndexUUID
	}
	res := make([][]bag, len(configs))
	params := make([]Params, len(configs))
	for c := range configs {
		u, ok := byName[fmt.Sprintf("c%d_idx", c)]
		if !ok {
			t.Fatalf("no index c%d_idx among %v", c, ixs)
		}
		seg, err := ReadSegment(dirOpener(filepath.Join(f.Dir, "_indices", u)))
		if err != nil {
			t.Fatal(err)
		}
		params[c] = seg.Meta.Params
		bags := make([]bag, len(docs))
		for i := range bags {
			bags[i] = bag{}
		}
		for _, p := range seg.Partitions {
			rows := make([]int, len(p.RowIDs))
			for d, a := range p.RowIDs {
				i := int(a>>32)*lanceChunk + int(uint32(a))
				if uint32(a) >= lanceChunk || i >= len(docs) {
					t.Fatalf("config %d: row address %x is none of the %d docs'", c, a, len(docs))
				}
				rows[d] = i
			}
			for tok, id := range p.Tokens {
				ps, err := p.Decode(id, seg.Meta.Fixed32Tail)
				if err != nil {
					t.Fatal(err)
				}
				for i, d := range ps.Docs {
					bags[rows[d]][tok] += int(ps.Freqs[i])
				}
			}
		}
		res[c] = bags
	}
	return res, params
}

// lanceChunk is the rows lanceBags writes at a time (one fragment each).
const lanceChunk = 100_000

// bagOf counts tokens.
func bagOf(tokens []string) bag {
	b := bag{}
	for _, t := range tokens {
		b[t]++
	}
	return b
}

func sameBag(a, b bag) bool { return maps.Equal(a, b) }

func bagString(b bag) string {
	keys := slices.Sorted(maps.Keys(b))
	s := "{"
	for i, k := range keys {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%q", k)
		if b[k] > 1 {
			s += fmt.Sprintf("×%d", b[k])
		}
	}
	return s + "}"
}
