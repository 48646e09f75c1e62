package fts

import (
	"encoding/binary"
	"fmt"
	"math"
)

// The position stream of LanceDB 0.39's inverted index with positions
// (format_version 2, positions_layout shared_stream_v2). Each token's
// invert row carries _compressed_position, one binary for all its
// postings, and _position_block_offset, the byte offset in it where
// each posting block's positions start. A posting block's positions are
// its docs' positions in doc order, each doc's as deltas (its first
// position absolute); these deltas go in groups of 128, each a u8 bit
// width and BitPacker4x bits (as a posting block's frequencies), and the
// block's last deltas (fewer than 128) as varints (positions_codec
// packed_delta_v1), or all as varints (varint_doc_delta_v2).
//
// A position is the token's index in the base tokenizer's stream: a
// token a filter drops (too long, a stop word) leaves a gap.

// PositionCodec is the positions_codec of an index with positions.
type PositionCodec int

const (
	// NoPositions: the index has no position stream.
	NoPositions PositionCodec = iota
	PackedDelta
	VarintDocDelta
)

// Metadata values naming the position stream.
const (
	positionsLayoutKey    = "positions_layout"
	positionsCodecKey     = "positions_codec"
	positionsLayoutShared = "shared_stream_v2"
)

func parsePositionCodec(layout, codec string) (PositionCodec, error) {
	if layout != positionsLayoutShared {
		return NoPositions, fmt.Errorf("positions_layout %q (compactord reads %s)", layout, positionsLayoutShared)
	}
	switch codec {
	case "packed_delta_v1":
		return PackedDelta, nil
	case "varint_doc_delta_v2":
		return VarintDocDelta, nil
	}
	return NoPositions, fmt.Errorf("positions_codec %q (compactord reads packed_delta_v1 and varint_doc_delta_v2)", codec)
}

// DecodePositions decodes a token's position stream for its postings p
// (docs and frequencies decoded), setting p.Positions: the positions of
// posting i are the next Freqs[i] values, ascending.
func DecodePositions(stream []byte, offsets []uint32, p *Postings, codec PositionCodec) error {
	n := len(p.Docs)
	nb := (n + BlockSize - 1) / BlockSize
	if len(offsets) != nb {
		return formatErr("%d position block offsets for %d posting blocks", len(offsets), nb)
	}
	var total uint64
	for _, f := range p.Freqs {
		total += uint64(f)
	}
	if total > uint64(len(stream))*8+uint64(nb)*BlockSize {
		// Each delta takes at least one bit packed or one byte as a
		// varint: a frequency sum past that is a corrupt file, not a
		// reason to allocate.
		return formatErr("frequencies sum to %d positions in a stream of %d bytes", total, len(stream))
	}
	p.Positions = make([]uint32, 0, total)
	var buf [BlockSize]uint32
	for b := 0; b < nb; b++ {
		lo, hi := uint64(offsets[b]), uint64(len(stream))
		if b+1 < nb {
			hi = uint64(offsets[b+1])
		}
		if lo > hi || hi > uint64(len(stream)) {
			return formatErr("position block %d at bytes %d..%d of %d", b, lo, hi, len(stream))
		}
		src := stream[lo:hi]
		var m int // the block's position count
		freqs := p.Freqs[b*BlockSize : min(n, (b+1)*BlockSize)]
		for _, f := range freqs {
			m += int(f)
		}
		deltas := make([]uint32, 0, m)
		if codec == PackedDelta {
			for len(deltas)+BlockSize <= m {
				if len(src) < 1 || src[0] > 32 || len(src) < 1+16*int(src[0]) {
					return formatErr("position block %d: truncated packed group", b)
				}
				w := int(src[0])
				unpack4x(src[1:], w, &buf)
				deltas = append(deltas, buf[:]...)
				src = src[1+16*w:]
			}
		}
		for len(deltas) < m {
			v, k := binary.Uvarint(src)
			if k <= 0 || v > math.MaxUint32 {
				return formatErr("position block %d: bad varint", b)
			}
			deltas = append(deltas, uint32(v))
			src = src[k:]
		}
		if len(src) != 0 {
			return formatErr("position block %d: %d trailing bytes", b, len(src))
		}
		i := 0
		for _, f := range freqs {
			var prev uint32
			for j := 0; j < int(f); j++ {
				d := deltas[i]
				i++
				if j > 0 {
					if d > math.MaxUint32-prev {
						return formatErr("position block %d: position overflows", b)
					}
					d += prev
				}
				p.Positions = append(p.Positions, d)
				prev = d
			}
		}
	}
	return nil
}

// EncodePositions encodes p.Positions (Freqs[i] per posting, ascending
// within a doc) as a token's stream and block offsets.
func EncodePositions(p *Postings, codec PositionCodec) (stream []byte, offsets []uint32, err error) {
	var total int
	for _, f := range p.Freqs {
		total += int(f)
	}
	if total != len(p.Positions) {
		return nil, nil, fmt.Errorf("%d positions for frequencies summing to %d", len(p.Positions), total)
	}
	n := len(p.Docs)
	var deltas [BlockSize]uint32
	at := 0
	for lo := 0; lo < n; lo += BlockSize {
		if len(stream) > math.MaxUint32 {
			return nil, nil, fmt.Errorf("a position stream past 4 GiB")
		}
		offsets = append(offsets, uint32(len(stream)))
		k := 0
		for _, f := range p.Freqs[lo:min(n, lo+BlockSize)] {
			var prev uint32
			for j := 0; j < int(f); j++ {
				v := p.Positions[at]
				at++
				d := v
				if j > 0 {
					if v < prev {
						return nil, nil, fmt.Errorf("positions not ascending within a doc")
					}
					d = v - prev
				}
				prev = v
				if codec == VarintDocDelta {
					stream = binary.AppendUvarint(stream, uint64(d))
					continue
				}
				deltas[k] = d
				k++
				if k == BlockSize {
					w := numBits(&deltas)
					stream = pack4x(&deltas, w, append(stream, byte(w)))
					k = 0
				}
			}
		}
		for _, d := range deltas[:k] {
			stream = binary.AppendUvarint(stream, uint64(d))
		}
	}
	return stream, offsets, nil
}

// TokenPositions returns doc's tokens with their positions: the index of
// each in the base tokenizer's stream, so that a token a filter drops (too
// long, a stop word) leaves a gap, as tantivy counts positions. Each base
// token goes through Tokens on its own, which keeps it, drops it or
// rewrites it (filters act on one token at a time).
func (t *Tokenizer) TokenPositions(doc string) ([]string, []uint32, error) {
	var toks []string
	var pos []uint32
	err := t.eachBaseToken(doc, func(i int, w string) error {
		ts, err := t.Tokens(w)
		if err != nil {
			return err
		}
		if len(ts) > 1 {
			return fmt.Errorf("%w: base token %q gives %d tokens", ErrUntokenizable, w, len(ts))
		}
		for _, s := range ts {
			toks = append(toks, s)
			pos = append(pos, uint32(i))
		}
		return nil
	})
	return toks, pos, err
}

// eachBaseToken calls f with each token of doc as the simple or
// whitespace base tokenizer splits it (simple: runs of ASCII letters and
// digits, non-ASCII text refused as Tokens refuses it; whitespace: runs of
// non-space bytes, which never split a UTF-8 sequence), before any
// filter, and its index.
func (t *Tokenizer) eachBaseToken(doc string, f func(i int, w string) error) error {
	start, n := -1, 0
	for i := 0; i < len(doc); i++ {
		c := doc[i]
		var sep bool
		if t.whitespace {
			sep = c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'
		} else {
			if c >= 0x80 {
				return fmt.Errorf("%w: non-ASCII text under the simple tokenizer", ErrUntokenizable)
			}
			sep = !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9')
		}
		switch {
		case sep && start >= 0:
			if err := f(n, doc[start:i]); err != nil {
				return err
			}
			n++
			start = -1
		case !sep && start < 0:
			start = i
		}
	}
	if start >= 0 {
		return f(n, doc[start:])
	}
	return nil
}
