package fts

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"

	lancepb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/format/file"
)

// NamedFile is one file of a written segment.
type NamedFile struct {
	Name string
	Data []byte
}

// RemapStats count a remap's docs.
type RemapStats struct {
	Docs, Kept, Dropped int
}

// Remap rewrites an inverted segment for new row addresses, as LanceDB's
// remap does: in each partition the docs whose row remap keeps get the
// new addresses, in ascending address order (the new doc ids), deleted
// docs are dropped, every token's postings are renumbered and re-encoded
// with block scores and impacts recomputed over the partition's remaining
// docs, and total_tokens is updated. A token left without docs is dropped
// and the others renumbered in their old order (a new FST); metadata.lance
// is copied unchanged.
func Remap(open Opener, remap func(uint64) (uint64, bool)) ([]NamedFile, RemapStats, error) {
	var out []NamedFile
	st, err := RemapEach(open, remap, nil, func(f NamedFile) error { out = append(out, f); return nil })
	return out, st, err
}

// RemapEach is Remap handing each new file to put as soon as it is
// encoded: one partition is in memory at a time. Before a partition is
// read, hold (when set) is given the bytes of its three files and
// returns the function called once the partition's files are put.
func RemapEach(open Opener, remap func(uint64) (uint64, bool), hold func(stored int64) (release func(), err error), put func(NamedFile) error) (RemapStats, error) {
	var st RemapStats
	m, err := ReadMetadata(open)
	if err != nil {
		return st, err
	}
	r, size, err := open(MetadataFile)
	if err != nil {
		return st, err
	}
	md, err := io.ReadAll(io.NewSectionReader(r, 0, size))
	if err != nil {
		return st, err
	}
	if err := put(NamedFile{MetadataFile, md}); err != nil {
		return st, err
	}
	for _, id := range m.Partitions {
		err := func() error {
			if hold != nil {
				var stored int64
				for _, name := range []string{TokensFile(id), DocsFile(id), InvertFile(id)} {
					_, n, err := open(name)
					if err != nil {
						return err
					}
					stored += n
				}
				release, err := hold(stored)
				if err != nil {
					return err
				}
				defer release()
			}
			p, err := ReadPartition(open, id)
			if err != nil {
				return err
			}
			tokens, docs, invert, ps, err := remapPartition(p, m.Fixed32Tail, remap)
			if err != nil {
				return err
			}
			st.Docs += ps.Docs
			st.Kept += ps.Kept
			st.Dropped += ps.Dropped
			for _, f := range []NamedFile{{TokensFile(p.ID), tokens}, {DocsFile(p.ID), docs}, {InvertFile(p.ID), invert}} {
				if err := put(f); err != nil {
					return err
				}
			}
			return nil
		}()
		if err != nil {
			return st, err
		}
	}
	return st, nil
}

func remapPartition(p *Partition, fixed32 bool, remap func(uint64) (uint64, bool)) (tokensFile, docsFile, invertFile []byte, st RemapStats, err error) {
	type doc struct {
		addr uint64
		old  uint32
	}
	st.Docs = len(p.RowIDs)
	var kept []doc
	for i, a := range p.RowIDs {
		if na, ok := remap(a); ok {
			kept = append(kept, doc{na, uint32(i)})
		}
	}
	slices.SortFunc(kept, func(a, b doc) int { return cmpU64(a.addr, b.addr) })
	for i := 1; i < len(kept); i++ {
		if kept[i].addr == kept[i-1].addr {
			return nil, nil, nil, st, fmt.Errorf("partition %d: docs %d and %d remap to the same row %x", p.ID, kept[i-1].old, kept[i].old, kept[i].addr)
		}
	}
	st.Kept, st.Dropped = len(kept), len(p.RowIDs)-len(kept)
	newID := make([]int64, len(p.RowIDs))
	for i := range newID {
		newID[i] = -1
	}
	rowIDs := make([]uint64, len(kept))
	numTokens := make([]uint32, len(kept))
	var total uint64
	for i, d := range kept {
		newID[d.old] = int64(i)
		rowIDs[i] = d.addr
		numTokens[i] = p.NumTokens[d.old]
		total += uint64(numTokens[i])
	}
	N := len(kept)
	avgdl := float32(1)
	if N > 0 {
		avgdl = float32(total) / float32(N)
	}

	docsMeta := maps.Clone(p.DocsSchema.GetMetadata())
	docsMeta["total_tokens"] = []byte(strconv.FormatUint(total, 10))
	if docsFile, err = write(p.DocsSchema.GetFields(), docsMeta, []*file.Array{u64Array(rowIDs), u32Array(numTokens)}); err != nil {
		return nil, nil, nil, st, fmt.Errorf("%s: %w", DocsFile(p.ID), err)
	}

	T := len(p.Postings)
	var live []*Postings
	newTok := make([]int64, T) // old token id → new, -1 when dropped
	for t := 0; t < T; t++ {
		newTok[t] = -1
		ps, err := p.Decode(uint32(t), fixed32)
		if err != nil {
			return nil, nil, nil, st, err
		}
		np := &Postings{}
		order := make([]int, 0, len(ps.Docs))
		for i, d := range ps.Docs {
			if newID[d] >= 0 {
				order = append(order, i)
			}
		}
		// New doc ids follow new addresses, which need not keep the old
		// order across fragments.
		slices.SortFunc(order, func(a, b int) int { return cmpU64(uint64(newID[ps.Docs[a]]), uint64(newID[ps.Docs[b]])) })
		var start []int // posting i's first position
		if ps.Positions != nil {
			start = make([]int, len(ps.Docs))
			at := 0
			for i, f := range ps.Freqs {
				start[i] = at
				at += int(f)
			}
			np.Positions = make([]uint32, 0, len(ps.Positions))
		}
		for _, i := range order {
			np.Docs = append(np.Docs, uint32(newID[ps.Docs[i]]))
			np.Freqs = append(np.Freqs, ps.Freqs[i])
			if start != nil {
				np.Positions = append(np.Positions, ps.Positions[start[i]:start[i]+int(ps.Freqs[i])]...)
			}
		}
		if len(np.Docs) == 0 {
			continue
		}
		newTok[t] = int64(len(live))
		live = append(live, np)
	}
	if tokensFile, err = writeTokens(p, newTok, len(live)); err != nil {
		return nil, nil, nil, st, err
	}
	if invertFile, err = writeInvert(p, live, numTokens, N, avgdl, fixed32); err != nil {
		return nil, nil, nil, st, fmt.Errorf("%s: %w", InvertFile(p.ID), err)
	}
	return tokensFile, docsFile, invertFile, st, nil
}

// writeTokens writes the tokens file of the tokens newTok keeps (old id →
// new id, -1 dropped), n of them.
func writeTokens(p *Partition, newTok []int64, n int) ([]byte, error) {
	keys := make([][]byte, 0, n)
	for k, id := range p.Tokens {
		if newTok[id] >= 0 {
			keys = append(keys, []byte(k))
		}
	}
	slices.SortFunc(keys, bytes.Compare)
	vals := make([]uint64, len(keys))
	var total uint64
	for i, k := range keys {
		vals[i] = uint64(newTok[p.Tokens[string(k)]])
		total += uint64(len(k))
	}
	fst, err := WriteFSTMap(keys, vals)
	if err != nil {
		return nil, err
	}
	fa := &file.Array{Type: file.DataType{Kind: file.KindLargeBinary}, Len: 1, Offsets: []int64{0, int64(len(fst))}, Values: fst}
	out, err := write(p.TokensSchema.GetFields(), p.TokensSchema.GetMetadata(), []*file.Array{fa, u32Array([]uint32{uint32(n)}), u64Array([]uint64{total})})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", TokensFile(p.ID), err)
	}
	return out, nil
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func u64Array(v []uint64) *file.Array {
	a := &file.Array{Type: file.DataType{Kind: file.KindUint64}, Len: len(v)}
	for _, x := range v {
		a.Values = binary.LittleEndian.AppendUint64(a.Values, x)
	}
	return a
}

func u32Array(v []uint32) *file.Array {
	a := &file.Array{Type: file.DataType{Kind: file.KindUint32}, Len: len(v)}
	for _, x := range v {
		a.Values = binary.LittleEndian.AppendUint32(a.Values, x)
	}
	return a
}

// listOf is an empty list<large_binary> array to be filled with n rows.
func listOf(n int) *file.Array {
	return &file.Array{Type: file.DataType{Kind: file.KindList}, Offsets: make([]int64, 1, n+1),
		Children: []*file.Array{{Type: file.DataType{Kind: file.KindLargeBinary}, Offsets: []int64{0}}}}
}

func appendList(a *file.Array, items [][]byte) {
	c := a.Children[0]
	for _, it := range items {
		c.Values = append(c.Values, it...)
		c.Offsets = append(c.Offsets, int64(len(c.Values)))
		c.Len++
	}
	a.Offsets = append(a.Offsets, int64(c.Len))
	a.Len++
}

// write encodes one Lance 2.2 file (the format LanceDB writes index files
// in) with the given schema.
func write(fields []*lancepb.Field, md map[string][]byte, cols []*file.Array) ([]byte, error) {
	var buf bytes.Buffer
	w, err := file.NewWriter(&buf, fields, file.WriterOptions{Version: file.V2_2, Metadata: md})
	if err != nil {
		return nil, err
	}
	n := 0
	if len(cols) > 0 {
		n = cols[0].Len
	}
	if n > 0 {
		if err := w.Write(&file.Batch{NumRows: n, Columns: cols}); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func appendF32(b []byte, f float32) []byte {
	return binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
}
