package fts

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	lancefilepb "github.com/compactord/compactord/gen/lancefilepb"
	lancepb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/format/file"
)

// Doc is one row's text to index.
type Doc struct {
	RowID uint64
	Text  string
}

// Append builds the files of a segment that is seg plus one new partition
// over docs (in row order), as LanceDB's optimize() adds one for new
// fragments: metadata.lance lists the new partition id (the largest plus
// one), the old partitions' files are returned to be copied unchanged
// (copy), and the new partition's token ids follow first appearance, its
// docs the given order (docs without tokens are left out, as LanceDB
// leaves out null and empty texts), its scores use its own docs' stats.
func Append(open Opener, docs []Doc) (files []NamedFile, copyNames []string, indexed int, err error) {
	return build(open, docs, true)
}

// Rebuild builds the files of a segment of one partition (0) over docs
// (every live row, in row order) with seg's parameters: the partitions
// merged, as a fresh LanceDB index over the same rows is.
func Rebuild(open Opener, docs []Doc) (files []NamedFile, indexed int, err error) {
	files, _, indexed, err = build(open, docs, false)
	return files, indexed, err
}

// Template is what a new partition like a segment's needs: the
// segment's metadata and its first partition's file schemas (and
// position codec). Reading it decodes no posting: catch-up over a large
// index reads four small files' headers.
type Template struct {
	Meta *Metadata
	Like *Partition
}

// ReadTemplate reads the template of the segment open opens.
func ReadTemplate(open Opener) (*Template, error) {
	m, err := ReadMetadata(open)
	if err != nil {
		return nil, err
	}
	if len(m.Partitions) == 0 {
		return nil, fmt.Errorf("the segment has no partition to take file schemas from")
	}
	id := m.Partitions[0]
	like := &Partition{ID: id, PosCodec: m.Positions}
	for _, f := range []struct {
		name string
		dst  **lancefilepb.Schema
		cols int
	}{{TokensFile(id), &like.TokensSchema, 3}, {DocsFile(id), &like.DocsSchema, 2}, {InvertFile(id), &like.InvertSchema, 4}} {
		r, size, err := open(f.name)
		if err != nil {
			return nil, err
		}
		ff, err := file.Open(r, size)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.name, err)
		}
		want := f.cols
		if f.cols == 4 && m.Positions != NoPositions {
			want = 6
		}
		if n := len(ff.Schema.Fields); n != want {
			return nil, formatErr("%s has %d columns, want %d", f.name, n, want)
		}
		*f.dst = proto.Clone(ff.Desc.GetSchema()).(*lancefilepb.Schema)
	}
	return &Template{Meta: m, Like: like}, nil
}

func build(open Opener, docs []Doc, appendPart bool) (files []NamedFile, copyNames []string, indexed int, err error) {
	tpl, err := ReadTemplate(open)
	if err != nil {
		return nil, nil, 0, err
	}
	var id uint64
	var partitions []uint64
	if appendPart {
		for _, p := range tpl.Meta.Partitions {
			id = max(id, p+1)
			copyNames = append(copyNames, TokensFile(p), DocsFile(p), InvertFile(p))
		}
		partitions = slices.Clone(tpl.Meta.Partitions)
	}
	deleted := tpl.Meta.DeletedFragments
	if deleted == nil {
		deleted = []byte{} // the binary as stored (nil would mean the generation form)
	}
	if !appendPart {
		deleted = []byte{0x3a, 0x30, 0, 0, 0, 0, 0, 0} // an empty portable Roaring32
	}
	files, indexed, err = tpl.segment(id, append(partitions, id), deleted, tpl.Meta.Raw, docs, false)
	return files, copyNames, indexed, err
}

// GenerationCopy builds the copy of the index a MemWAL generation
// carries over its rows (docs, row addresses in fragment 0), as LanceDB
// 0.39 flushes one: one partition of a random id, and metadata.lance with
// the index's parameters (lance_tokenizer null, as LanceDB writes it
// there) whose one column is a null _placeholder string, not
// deleted_fragments.
func (tpl *Template) GenerationCopy(id uint64, docs []Doc) ([]NamedFile, int, error) {
	md := maps.Clone(tpl.Meta.Raw)
	md["params"] = bytes.Replace(md["params"], []byte(`"lance_tokenizer":"text"`), []byte(`"lance_tokenizer":null`), 1)
	return tpl.segment(id, []uint64{id}, nil, md, docs, true)
}

// placeholderFields is the schema of a generation copy's metadata.lance.
var placeholderFields = []*lancepb.Field{{Name: placeholderColumn, Id: 0, ParentId: -1, LogicalType: "string", Nullable: true, Encoding: lancepb.Encoding_VAR_BINARY}}

// segment builds metadata.lance (schema metadata md, partitions listed,
// deleted_fragments deleted, or the generation form when deleted is nil)
// and partition id's files over docs (token ids in sorted token order, or
// in order of first appearance).
func (tpl *Template) segment(id uint64, partitions []uint64, deleted []byte, md map[string][]byte, docs []Doc, sorted bool) ([]NamedFile, int, error) {
	tok, err := NewTokenizer(tpl.Meta.Params)
	if err != nil {
		return nil, 0, err
	}
	bt := tpl.Meta.Params.BaseTokenizer
	part, N, err := buildPartition(tok, tpl.Like, tpl.Meta.Fixed32Tail, id, docs, sorted, bt == "simple" || bt == "whitespace")
	if err != nil {
		return nil, 0, err
	}
	parts, err := json.Marshal(partitions)
	if err != nil {
		return nil, 0, err
	}
	md = maps.Clone(md)
	md["partitions"] = parts
	fields := tpl.Meta.Schema.GetFields()
	col := &file.Array{Type: file.DataType{Kind: file.KindBinary}, Len: 1, Offsets: []int64{0, int64(len(deleted))}, Values: deleted}
	if deleted == nil {
		fields = placeholderFields
		col = &file.Array{Type: file.DataType{Kind: file.KindUtf8}, Len: 1, Offsets: []int64{0, 0}, Valid: []byte{0}}
	}
	meta, err := write(fields, md, []*file.Array{col})
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", MetadataFile, err)
	}
	return append([]NamedFile{{MetadataFile, meta}}, part...), N, nil
}

// buildPartition builds partition id's tokens, docs and invert files over
// docs with like's schemas. Token ids follow first appearance, as
// optimize() and a fresh index number them, or the tokens' byte order
// (sorted), as a MemWAL generation's copy numbers them.
//
// perWord: the base tokenizer is simple or whitespace, whose tokens the
// filters take one at a time.
func buildPartition(tok *Tokenizer, like *Partition, fixed32 bool, id uint64, docs []Doc, sorted, perWord bool) ([]NamedFile, int, error) {
	withPos := like.PosCodec != NoPositions
	tokenID := map[string]uint32{}
	var keys []string
	var postings []*Postings
	var rowIDs []uint64
	var numTokens []uint32
	var total uint64
	// Filters act on one base token at a time, so each distinct base
	// token is filtered once: wordID maps it to its token id (-1: dropped).
	// Text repeats its words; tokenizing each occurrence was most of a
	// catch-up's time.
	wordID := map[string]int32{}
	tokenOf := func(w string) (int32, error) {
		if id, ok := wordID[w]; ok {
			return id, nil
		}
		ts, err := tok.Tokens(w)
		if err != nil {
			return 0, err
		}
		if len(ts) > 1 {
			return 0, fmt.Errorf("%w: base token %q gives %d tokens", ErrUntokenizable, w, len(ts))
		}
		id := int32(-1)
		if len(ts) == 1 {
			i, ok := tokenID[ts[0]]
			if !ok {
				i = uint32(len(keys))
				tokenID[ts[0]] = i
				keys = append(keys, ts[0])
				postings = append(postings, &Postings{})
			}
			id = int32(i)
		}
		wordID[strings.Clone(w)] = id
		return id, nil
	}
	// Other base tokenizers (should NewTokenizer accept one) split text
	// into tokens that are not words: the doc goes through Tokens whole.
	each := tok.eachBaseToken
	if !perWord {
		if withPos {
			return nil, 0, fmt.Errorf("positions under base tokenizer other than simple or whitespace are not reproduced by compactord")
		}
		each = func(doc string, f func(int, string) error) error {
			ts, err := tok.Tokens(doc)
			for i, s := range ts {
				if err == nil {
					err = f(i, s)
				}
			}
			return err
		}
		tokenOf = func(w string) (int32, error) {
			i, ok := tokenID[w]
			if !ok {
				i = uint32(len(keys))
				tokenID[w] = i
				keys = append(keys, w)
				postings = append(postings, &Postings{})
			}
			return int32(i), nil
		}
	}
	// Pass 1: each kept doc's token ids (and positions) in one stream.
	var stream, posStream []int32
	docEnd := make([]int, 0, len(docs))
	for _, d := range docs {
		before := len(stream)
		err := each(d.Text, func(pos int, w string) error {
			id, err := tokenOf(w)
			if err != nil || id < 0 {
				return err
			}
			stream = append(stream, id)
			if withPos {
				posStream = append(posStream, int32(pos))
			}
			return nil
		})
		if err != nil {
			return nil, 0, fmt.Errorf("row %x: %w", d.RowID, err)
		}
		n := len(stream) - before
		if n == 0 {
			continue
		}
		rowIDs = append(rowIDs, d.RowID)
		numTokens = append(numTokens, uint32(n))
		total += uint64(n)
		docEnd = append(docEnd, len(stream))
	}
	// Pass 2: each token's doc count and occurrences, then every posting
	// list as a window of one array (appending to each token's own
	// slices, doc by doc, was a catch-up's largest cost after tokenizing).
	T := len(keys)
	last := make([]int32, T)
	df, occ := make([]int, T+1), make([]int, T+1)
	for i := range last {
		last[i] = -1
	}
	lo := 0
	for d, hi := range docEnd {
		for _, id := range stream[lo:hi] {
			if last[id] != int32(d) {
				last[id] = int32(d)
				df[id+1]++
			}
			occ[id+1]++
		}
		lo = hi
	}
	for i := 1; i <= T; i++ {
		df[i] += df[i-1]
		occ[i] += occ[i-1]
	}
	allDocs, allFreqs := make([]uint32, df[T]), make([]uint32, df[T])
	var allPos []uint32
	if withPos {
		allPos = make([]uint32, occ[T])
	}
	next, nextPos := slices.Clone(df[:T]), slices.Clone(occ[:T])
	for i := range last {
		last[i] = -1
	}
	lo = 0
	for d, hi := range docEnd {
		for k, id := range stream[lo:hi] {
			if last[id] != int32(d) {
				last[id] = int32(d)
				allDocs[next[id]] = uint32(d)
				next[id]++
			}
			allFreqs[next[id]-1]++
			// A doc's tokens come in position order, so each posting's
			// positions are ascending and contiguous.
			if withPos {
				allPos[nextPos[id]] = uint32(posStream[lo+k])
				nextPos[id]++
			}
		}
		lo = hi
	}
	for id, p := range postings {
		p.Docs, p.Freqs = allDocs[df[id]:df[id+1]:df[id+1]], allFreqs[df[id]:df[id+1]:df[id+1]]
		if withPos {
			p.Positions = allPos[occ[id]:occ[id+1]:occ[id+1]]
		}
	}
	N := len(rowIDs)
	avgdl := float32(1)
	if N > 0 {
		avgdl = float32(total) / float32(N)
	}
	if sorted {
		order := make([]int, len(keys))
		for i := range order {
			order[i] = i
		}
		slices.SortFunc(order, func(a, b int) int { return strings.Compare(keys[a], keys[b]) })
		ps := make([]*Postings, len(keys))
		for nid, old := range order {
			ps[nid] = postings[old]
			tokenID[keys[old]] = uint32(nid)
		}
		postings = ps
	}
	// Tokens: the FST maps each token to its id.
	np := &Partition{ID: id, Tokens: tokenID, TokensSchema: like.TokensSchema}
	newTok := make([]int64, len(keys))
	for i := range newTok {
		newTok[i] = int64(i)
	}
	tokens, err := writeTokens(np, newTok, len(keys))
	if err != nil {
		return nil, 0, err
	}
	docsMeta := maps.Clone(like.DocsSchema.GetMetadata())
	docsMeta["total_tokens"] = []byte(strconv.FormatUint(total, 10))
	docsFile, err := write(like.DocsSchema.GetFields(), docsMeta, []*file.Array{u64Array(rowIDs), u32Array(numTokens)})
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", DocsFile(id), err)
	}
	invert, err := writeInvert(like, postings, numTokens, N, avgdl, fixed32)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", InvertFile(id), err)
	}
	return []NamedFile{{TokensFile(id), tokens}, {DocsFile(id), docsFile}, {InvertFile(id), invert}}, N, nil
}

// writeInvert encodes an invert file of the given postings (by token id)
// with the schema of like's, and, when like has positions, their position
// streams in like's codec.
func writeInvert(like *Partition, postings []*Postings, numTokens []uint32, N int, avgdl float32, fixed32 bool) ([]byte, error) {
	T := len(postings)
	posting, impacts := listOf(T), listOf(T)
	scores := &file.Array{Type: file.DataType{Kind: file.KindFloat32}, Len: T}
	lengths := make([]uint32, T)
	var streams, offsets *file.Array
	if like.PosCodec != NoPositions {
		streams = &file.Array{Type: file.DataType{Kind: file.KindLargeBinary}, Len: T, Offsets: make([]int64, 1, T+1)}
		offsets = &file.Array{Type: file.DataType{Kind: file.KindList}, Len: T, Offsets: make([]int64, 1, T+1),
			Children: []*file.Array{{Type: file.DataType{Kind: file.KindUint32}}}}
	}
	for t, p := range postings {
		p.BlockScores = BlockScores(p, numTokens, N, avgdl)
		blocks, err := EncodePostings(p, fixed32)
		if err != nil {
			return nil, err
		}
		var ms float32
		for _, b := range p.BlockScores {
			ms = max(ms, b)
		}
		scores.Values = appendF32(scores.Values, ms)
		lengths[t] = uint32(len(p.Docs))
		appendList(posting, blocks)
		appendList(impacts, Impacts(p, numTokens))
		if streams != nil {
			st, offs, err := EncodePositions(p, like.PosCodec)
			if err != nil {
				return nil, fmt.Errorf("token %d: %w", t, err)
			}
			streams.Values = append(streams.Values, st...)
			streams.Offsets = append(streams.Offsets, int64(len(streams.Values)))
			c := offsets.Children[0]
			for _, o := range offs {
				c.Values = binary.LittleEndian.AppendUint32(c.Values, o)
			}
			c.Len += len(offs)
			offsets.Offsets = append(offsets.Offsets, int64(c.Len))
		}
	}
	cols := []*file.Array{posting, scores, u32Array(lengths), impacts}
	if streams != nil {
		cols = append(cols, streams, offsets)
	}
	return write(like.InvertSchema.GetFields(), like.InvertSchema.GetMetadata(), cols)
}
