// Package fts reads LanceDB 0.39's inverted (full-text) index segments:
// metadata.lance (format parameters, tokenizer params, partition ids) and
// per partition part_{p}_tokens.lance (an FST token dictionary),
// part_{p}_docs.lance (each doc's row address and token count) and
// part_{p}_invert.lance (each token's posting blocks, max score, length
// and impacts). Decoders treat their input as hostile: malformed files
// give an error wrapping ErrFormat, never a panic; a format parameter
// compactord does not implement is refused in one line.
package fts

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"

	"google.golang.org/protobuf/proto"

	lancefilepb "github.com/compactord/compactord/gen/lancefilepb"
	"github.com/compactord/compactord/internal/format/file"
)

// File names of an inverted index segment.
const (
	MetadataFile = "metadata.lance"
)

// placeholderColumn is metadata.lance's one column in a MemWAL
// generation's copy (in place of deleted_fragments).
const placeholderColumn = "_placeholder"

// TokensFile, DocsFile and InvertFile name partition p's files.
func TokensFile(p uint64) string { return fmt.Sprintf("part_%d_tokens.lance", p) }
func DocsFile(p uint64) string   { return fmt.Sprintf("part_%d_docs.lance", p) }
func InvertFile(p uint64) string { return fmt.Sprintf("part_%d_invert.lance", p) }

// Opener opens a file of the segment's directory.
type Opener func(name string) (io.ReaderAt, int64, error)

// Params are the tokenizer parameters metadata.lance records (LanceDB's
// InvertedIndexParams, as JSON); Raw keeps them byte for byte.
type Params struct {
	Raw             json.RawMessage `json:"-"`
	LanceTokenizer  string          `json:"lance_tokenizer"`
	BaseTokenizer   string          `json:"base_tokenizer"`
	Language        string          `json:"language"`
	WithPosition    bool            `json:"with_position"`
	MaxTokenLength  *int            `json:"max_token_length"`
	LowerCase       bool            `json:"lower_case"`
	Stem            bool            `json:"stem"`
	RemoveStopWords bool            `json:"remove_stop_words"`
	CustomStopWords []string        `json:"custom_stop_words"`
	ASCIIFolding    bool            `json:"ascii_folding"`
	MinNgramLength  int             `json:"min_ngram_length"`
	MaxNgramLength  int             `json:"max_ngram_length"`
	PrefixOnly      bool            `json:"prefix_only"`
}

// Metadata is metadata.lance.
type Metadata struct {
	Params        Params
	Partitions    []uint64
	FormatVersion int
	// Fixed32Tail: the tail blocks are fixed32_v1 (format 1), else
	// varint_delta_v1.
	Fixed32Tail bool
	// Positions is the position stream's codec (NoPositions without
	// with_position).
	Positions PositionCodec
	// DeletedFragments is the portable Roaring32 of the deleted_fragments
	// column.
	DeletedFragments []byte
	// Schema metadata, verbatim (a rewritten metadata.lance keeps it).
	Raw map[string][]byte
	// Schema is the file's schema, as stored.
	Schema *lancefilepb.Schema
}

// Partition is one partition's decoded files.
type Partition struct {
	ID uint64
	// Tokens maps token bytes to token id (ids 0..len-1); TokenBytes is
	// the FST as stored.
	Tokens      map[string]uint32
	TokenBytes  []byte
	TotalLength uint64
	// RowIDs and NumTokens are the docs, by partition-local doc id;
	// TotalTokens is docs' total_tokens (their sum).
	RowIDs      []uint64
	NumTokens   []uint32
	TotalTokens uint64
	// Per token id: its posting blocks, stored max score, posting count
	// and impact entries, as stored.
	Postings  [][][]byte
	MaxScores []float32
	Lengths   []uint32
	Impacts   [][][]byte
	// With positions (PosCodec not NoPositions): per token id, its
	// position stream and each posting block's offset in it.
	PosCodec   PositionCodec
	PosStreams [][]byte
	PosOffsets [][]uint32
	// The files' schemas, as stored (a rewrite keeps them).
	TokensSchema, DocsSchema, InvertSchema *lancefilepb.Schema
}

// Segment is a decoded inverted index segment.
type Segment struct {
	Meta       *Metadata
	Partitions []*Partition
}

func openFile(open Opener, name string) (*file.File, *file.Batch, error) {
	r, size, err := open(name)
	if err != nil {
		return nil, nil, err
	}
	f, err := file.Open(r, size)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	b, err := f.ReadAll(nil)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	for i, c := range b.Columns {
		if c == nil || c.Len != int(f.NumRows()) {
			return nil, nil, formatErr("%s: column %d does not hold %d rows", name, i, f.NumRows())
		}
	}
	return f, b, nil
}

// column returns the file's top-level column name (index i) of kind k.
func column(f *file.File, b *file.Batch, name, col string, i int, k file.Kind) (*file.Array, error) {
	fs := f.Schema.Fields
	if i >= len(fs) || fs[i].Name != col || fs[i].Type.Kind != k {
		return nil, formatErr("%s: column %d is not %s %s", name, i, col, k)
	}
	return b.Columns[i], nil
}

// ReadMetadata decodes metadata.lance, refusing a format compactord does
// not read: format_version other than 1 or 2, a posting block size other
// than 128, a tail codec other than varint_delta_v1 / fixed32_v1, a token
// set other than fst, and positions.
func ReadMetadata(open Opener) (*Metadata, error) {
	f, b, err := openFile(open, MetadataFile)
	if err != nil {
		return nil, err
	}
	md := f.Desc.GetSchema().GetMetadata()
	m := &Metadata{Raw: md, Schema: proto.Clone(f.Desc.GetSchema()).(*lancefilepb.Schema)}
	get := func(k string) (string, bool) { v, ok := md[k]; return string(v), ok }
	fv, ok := get("format_version")
	if !ok {
		return nil, fmt.Errorf("%s: no format_version: a legacy inverted index compactord does not read", MetadataFile)
	}
	if m.FormatVersion, err = strconv.Atoi(fv); err != nil || (m.FormatVersion != 1 && m.FormatVersion != 2) {
		return nil, fmt.Errorf("%s: format_version %q (compactord reads 1 and 2)", MetadataFile, fv)
	}
	if bs, ok := get("posting_block_size"); ok && bs != "128" {
		return nil, fmt.Errorf("%s: posting_block_size %s (compactord reads 128)", MetadataFile, bs)
	}
	switch tc, _ := get("posting_tail_codec"); tc {
	case "varint_delta_v1":
	case "fixed32_v1":
		m.Fixed32Tail = true
	case "":
		m.Fixed32Tail = m.FormatVersion == 1
	default:
		return nil, fmt.Errorf("%s: posting_tail_codec %q (compactord reads varint_delta_v1 and fixed32_v1)", MetadataFile, tc)
	}
	if ts, _ := get("token_set_format"); ts != "fst" {
		return nil, fmt.Errorf("%s: token_set_format %q (compactord reads fst)", MetadataFile, ts)
	}
	ps, _ := get("params")
	if err := json.Unmarshal([]byte(ps), &m.Params); err != nil {
		return nil, formatErr("%s: params: %v", MetadataFile, err)
	}
	m.Params.Raw = json.RawMessage(ps)
	if m.Params.WithPosition {
		layout, _ := get(positionsLayoutKey)
		codec, _ := get(positionsCodecKey)
		if m.Positions, err = parsePositionCodec(layout, codec); err != nil {
			return nil, fmt.Errorf("%s: with_position: %w", MetadataFile, err)
		}
	}
	parts, _ := get("partitions")
	if err := json.Unmarshal([]byte(parts), &m.Partitions); err != nil {
		return nil, formatErr("%s: partitions %q: %v", MetadataFile, parts, err)
	}
	if len(m.Partitions) > 1<<20 {
		return nil, formatErr("%s: %d partitions", MetadataFile, len(m.Partitions))
	}
	if f.NumRows() != 1 {
		return nil, formatErr("%s has %d rows, want 1", MetadataFile, f.NumRows())
	}
	// A MemWAL generation's copy has a null _placeholder string column
	// instead: no fragment of a generation is ever deleted.
	if fs := f.Schema.Fields; len(fs) == 1 && fs[0].Name == placeholderColumn && fs[0].Type.Kind == file.KindUtf8 {
		return m, nil
	}
	del, err := column(f, b, MetadataFile, "deleted_fragments", 0, file.KindBinary)
	if err != nil {
		return nil, err
	}
	m.DeletedFragments = append([]byte(nil), del.Bytes(0)...)
	return m, nil
}

// ReadPartition decodes partition id's three files.
func ReadPartition(open Opener, id uint64) (*Partition, error) {
	p := &Partition{ID: id}
	name := TokensFile(id)
	f, b, err := openFile(open, name)
	if err != nil {
		return nil, err
	}
	if f.NumRows() != 1 {
		return nil, formatErr("%s has %d rows, want 1", name, f.NumRows())
	}
	fc, err := column(f, b, name, "_token_fst_bytes", 0, file.KindLargeBinary)
	if err != nil {
		return nil, err
	}
	nc, err := column(f, b, name, "_token_next_id", 1, file.KindUint32)
	if err != nil {
		return nil, err
	}
	lc, err := column(f, b, name, "_token_total_length", 2, file.KindUint64)
	if err != nil {
		return nil, err
	}
	p.TokensSchema = proto.Clone(f.Desc.GetSchema()).(*lancefilepb.Schema)
	p.TokenBytes = append([]byte(nil), fc.Bytes(0)...)
	next := binary.LittleEndian.Uint32(nc.Values)
	p.TotalLength = binary.LittleEndian.Uint64(lc.Values)
	keys, vals, err := ReadFSTMap(p.TokenBytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if uint64(len(keys)) != uint64(next) {
		return nil, formatErr("%s: %d tokens, _token_next_id %d", name, len(keys), next)
	}
	p.Tokens = make(map[string]uint32, len(keys))
	seen := make([]bool, len(keys))
	for i, k := range keys {
		if vals[i] >= uint64(len(keys)) || seen[vals[i]] {
			return nil, formatErr("%s: token ids are not 0..%d", name, len(keys)-1)
		}
		seen[vals[i]] = true
		p.Tokens[string(k)] = uint32(vals[i])
	}

	name = DocsFile(id)
	f, b, err = openFile(open, name)
	if err != nil {
		return nil, err
	}
	rc, err := column(f, b, name, "_rowid", 0, file.KindUint64)
	if err != nil {
		return nil, err
	}
	tc, err := column(f, b, name, "_num_tokens", 1, file.KindUint32)
	if err != nil {
		return nil, err
	}
	p.DocsSchema = proto.Clone(f.Desc.GetSchema()).(*lancefilepb.Schema)
	tt := string(f.Desc.GetSchema().GetMetadata()["total_tokens"])
	if p.TotalTokens, err = strconv.ParseUint(tt, 10, 64); err != nil {
		return nil, formatErr("%s: total_tokens %q", name, tt)
	}
	n := int(f.NumRows())
	p.RowIDs = make([]uint64, n)
	p.NumTokens = make([]uint32, n)
	for i := 0; i < n; i++ {
		p.RowIDs[i] = binary.LittleEndian.Uint64(rc.Values[8*i:])
		p.NumTokens[i] = binary.LittleEndian.Uint32(tc.Values[4*i:])
	}

	name = InvertFile(id)
	f, b, err = openFile(open, name)
	if err != nil {
		return nil, err
	}
	p.InvertSchema = proto.Clone(f.Desc.GetSchema()).(*lancefilepb.Schema)
	if nf := len(f.Schema.Fields); nf != 4 && nf != 6 {
		return nil, fmt.Errorf("%s has %d columns (compactord reads _posting, _max_score, _length, _impacts and, with positions, _compressed_position, _position_block_offset)", name, nf)
	}
	pc, err := column(f, b, name, "_posting", 0, file.KindList)
	if err != nil {
		return nil, err
	}
	mc, err := column(f, b, name, "_max_score", 1, file.KindFloat32)
	if err != nil {
		return nil, err
	}
	lenc, err := column(f, b, name, "_length", 2, file.KindUint32)
	if err != nil {
		return nil, err
	}
	ic, err := column(f, b, name, "_impacts", 3, file.KindList)
	if err != nil {
		return nil, err
	}
	if int(f.NumRows()) != len(keys) {
		return nil, formatErr("%s has %d rows for %d tokens", name, f.NumRows(), len(keys))
	}
	var posc, offc *file.Array
	if len(f.Schema.Fields) == 6 {
		if posc, err = column(f, b, name, "_compressed_position", 4, file.KindLargeBinary); err != nil {
			return nil, err
		}
		if offc, err = column(f, b, name, "_position_block_offset", 5, file.KindList); err != nil {
			return nil, err
		}
		if len(offc.Children) != 1 || offc.Children[0].Type.Kind != file.KindUint32 {
			return nil, formatErr("%s: _position_block_offset is not a list of uint32", name)
		}
		p.PosCodec = PackedDelta // until ReadSegment sets the metadata's
	}
	blobs := func(c *file.Array, row int) ([][]byte, error) {
		if len(c.Children) != 1 || c.Children[0].Type.Kind != file.KindLargeBinary {
			return nil, formatErr("%s: a list column is not of large_binary", name)
		}
		var out [][]byte
		for e := c.Offsets[row]; e < c.Offsets[row+1]; e++ {
			out = append(out, c.Children[0].Bytes(int(e)))
		}
		return out, nil
	}
	for t := 0; t < len(keys); t++ {
		ps, err := blobs(pc, t)
		if err != nil {
			return nil, err
		}
		is, err := blobs(ic, t)
		if err != nil {
			return nil, err
		}
		l := binary.LittleEndian.Uint32(lenc.Values[4*t:])
		if want := (uint64(l) + BlockSize - 1) / BlockSize; uint64(len(ps)) != want {
			return nil, formatErr("%s: token %d has %d posting blocks for %d postings", name, t, len(ps), l)
		}
		if uint64(l) > uint64(n) {
			return nil, formatErr("%s: token %d is in %d docs of %d", name, t, l, n)
		}
		p.Postings = append(p.Postings, ps)
		p.Impacts = append(p.Impacts, is)
		p.Lengths = append(p.Lengths, l)
		p.MaxScores = append(p.MaxScores, math.Float32frombits(binary.LittleEndian.Uint32(mc.Values[4*t:])))
		if posc != nil {
			lo, hi := offc.Offsets[t], offc.Offsets[t+1]
			vals := offc.Children[0].Values
			if lo < 0 || lo > hi || 4*hi > int64(len(vals)) {
				return nil, formatErr("%s: token %d: position block offsets %d..%d", name, t, lo, hi)
			}
			offs := make([]uint32, hi-lo)
			for i := range offs {
				offs[i] = binary.LittleEndian.Uint32(vals[4*(lo+int64(i)):])
			}
			p.PosStreams = append(p.PosStreams, posc.Bytes(t))
			p.PosOffsets = append(p.PosOffsets, offs)
		}
	}
	return p, nil
}

// Decode decodes token t's postings.
func (p *Partition) Decode(t uint32, fixed32 bool) (*Postings, error) {
	if int(t) >= len(p.Postings) {
		return nil, formatErr("no token %d", t)
	}
	ps, err := DecodePostings(p.Postings[t], int(p.Lengths[t]), fixed32)
	if err != nil {
		return nil, fmt.Errorf("%s: token %d: %w", InvertFile(p.ID), t, err)
	}
	if n := len(ps.Docs); n > 0 && int(ps.Docs[n-1]) >= len(p.RowIDs) {
		return nil, formatErr("%s: token %d names doc %d of %d", InvertFile(p.ID), t, ps.Docs[n-1], len(p.RowIDs))
	}
	if p.PosCodec != NoPositions {
		if err := DecodePositions(p.PosStreams[t], p.PosOffsets[t], ps, p.PosCodec); err != nil {
			return nil, fmt.Errorf("%s: token %d: positions: %w", InvertFile(p.ID), t, err)
		}
	}
	return ps, nil
}

// ReadSegment decodes metadata.lance and every partition it lists.
func ReadSegment(open Opener) (*Segment, error) {
	m, err := ReadMetadata(open)
	if err != nil {
		return nil, err
	}
	s := &Segment{Meta: m}
	for _, id := range m.Partitions {
		p, err := ReadPartition(open, id)
		if err != nil {
			return nil, err
		}
		if (p.PosCodec != NoPositions) != (m.Positions != NoPositions) {
			return nil, formatErr("%s: positions in metadata %v, in the file %v", InvertFile(id), m.Positions != NoPositions, p.PosCodec != NoPositions)
		}
		p.PosCodec = m.Positions
		s.Partitions = append(s.Partitions, p)
	}
	return s, nil
}
