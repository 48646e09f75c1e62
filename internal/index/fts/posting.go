package fts

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
)

// The posting-list block codec of LanceDB 0.39's inverted index
// (format_version 2, posting_block_size 128, posting_tail_codec
// varint_delta_v1). A token's posting list is ⌈n/128⌉ binaries:
//
//	full block (128 postings): f32 block max score, u32 first doc id,
//	  u8 b1, doc ids as BitPacker4x sorted deltas (16·b1 bytes, the first
//	  delta taken against the first doc id), u8 b2, frequencies as
//	  BitPacker4x (16·b2 bytes)
//	tail block (n mod 128 postings, or all when n < 128): f32 block max
//	  score, n varint doc-id deltas (the first absolute), n varint
//	  frequencies
//
// Format 1 writes the tail as n u32 doc ids then n u32 frequencies
// (fixed32_v1).
//
// BitPacker4x packs 128 u32s as four interleaved lanes (value i in lane
// i mod 4, position i div 4): each lane's 32 values are bit-packed
// LSB-first into b 32-bit words, and the output is word k of lanes 0..3,
// for k = 0..b-1, little endian.
const BlockSize = 128

// unpack4x decodes one BitPacker4x block of 128 b-bit values.
func unpack4x(in []byte, b int, out *[BlockSize]uint32) {
	if b == 0 {
		*out = [BlockSize]uint32{}
		return
	}
	mask := uint64(1)<<b - 1
	for lane := 0; lane < 4; lane++ {
		word := func(k int) uint64 { return uint64(binary.LittleEndian.Uint32(in[(k*4+lane)*4:])) }
		for r := 0; r < 32; r++ {
			p := r * b
			k, sh := p/32, p%32
			v := word(k) >> sh
			if sh+b > 32 {
				v |= word(k+1) << (32 - sh)
			}
			out[r*4+lane] = uint32(v & mask)
		}
	}
}

// pack4x encodes 128 values of at most b bits as BitPacker4x does.
func pack4x(vals *[BlockSize]uint32, b int, dst []byte) []byte {
	if b == 0 { // all zeros (position deltas can be): no bytes
		return dst
	}
	start := len(dst)
	dst = append(dst, make([]byte, 16*b)...)
	out := dst[start:]
	for lane := 0; lane < 4; lane++ {
		for r := 0; r < 32; r++ {
			p := r * b
			k, sh := p/32, p%32
			v := uint64(vals[r*4+lane]) << sh
			i := (k*4 + lane) * 4
			binary.LittleEndian.PutUint32(out[i:], binary.LittleEndian.Uint32(out[i:])|uint32(v))
			if sh+b > 32 {
				i2 := ((k+1)*4 + lane) * 4
				binary.LittleEndian.PutUint32(out[i2:], binary.LittleEndian.Uint32(out[i2:])|uint32(v>>32))
			}
		}
	}
	return dst
}

// numBits is the bit width BitPacker uses for values up to max.
func numBits(vals *[BlockSize]uint32) int {
	var or uint32
	for _, v := range vals {
		or |= v
	}
	return 32 - bits.LeadingZeros32(or)
}

// Postings is one token's posting list in one partition.
type Postings struct {
	Docs  []uint32 // partition-local doc ids, ascending
	Freqs []uint32 // term frequency in each doc
	// BlockScores are the stored block max scores, one per block.
	BlockScores []float32
	// Positions, when the index has them: Freqs[i] ascending positions
	// per posting, in posting order.
	Positions []uint32
}

// DecodePostings decodes a token's posting blocks holding n postings.
// fixed32 selects format 1's tail.
func DecodePostings(blocks [][]byte, n int, fixed32 bool) (*Postings, error) {
	want := (n + BlockSize - 1) / BlockSize
	if n < 0 || len(blocks) != want {
		return nil, formatErr("%d posting blocks for %d postings, want %d", len(blocks), n, want)
	}
	p := &Postings{Docs: make([]uint32, 0, n), Freqs: make([]uint32, 0, n)}
	var buf [BlockSize]uint32
	for bi, blk := range blocks {
		if len(blk) < 4 {
			return nil, formatErr("posting block %d of %d bytes", bi, len(blk))
		}
		p.BlockScores = append(p.BlockScores, math.Float32frombits(binary.LittleEndian.Uint32(blk)))
		blk = blk[4:]
		full := bi < n/BlockSize
		if full {
			if len(blk) < 5 {
				return nil, formatErr("posting block %d truncated", bi)
			}
			first := binary.LittleEndian.Uint32(blk)
			b1 := int(blk[4])
			blk = blk[5:]
			if b1 > 32 || len(blk) < 16*b1+1 {
				return nil, formatErr("posting block %d: doc ids of %d bits in %d bytes", bi, b1, len(blk))
			}
			unpack4x(blk, b1, &buf)
			blk = blk[16*b1:]
			prev := first
			for i, d := range buf {
				v := prev + d
				if v < prev || (i > 0 && d == 0) {
					return nil, formatErr("posting block %d: doc ids not strictly ascending", bi)
				}
				p.Docs = append(p.Docs, v)
				prev = v
			}
			b2 := int(blk[0])
			blk = blk[1:]
			if b2 > 32 || len(blk) != 16*b2 {
				return nil, formatErr("posting block %d: frequencies of %d bits in %d bytes", bi, b2, len(blk))
			}
			unpack4x(blk, b2, &buf)
			p.Freqs = append(p.Freqs, buf[:]...)
			continue
		}
		m := n - bi*BlockSize
		if fixed32 {
			if len(blk) != 8*m {
				return nil, formatErr("fixed32 tail block of %d bytes for %d postings", len(blk), m)
			}
			for i := 0; i < m; i++ {
				p.Docs = append(p.Docs, binary.LittleEndian.Uint32(blk[4*i:]))
				p.Freqs = append(p.Freqs, binary.LittleEndian.Uint32(blk[4*(m+i):]))
			}
			continue
		}
		// Doc ids: the first absolute (not a delta from the previous block), then deltas.
		var prev uint64
		for i := 0; i < 2*m; i++ {
			v, k := binary.Uvarint(blk)
			if k <= 0 || v > math.MaxUint32 {
				return nil, formatErr("tail block: bad varint at posting %d", i%m)
			}
			blk = blk[k:]
			if i >= m {
				p.Freqs = append(p.Freqs, uint32(v))
				continue
			}
			if i > 0 {
				if v == 0 || v > math.MaxUint32-prev {
					return nil, formatErr("tail block: doc ids not strictly ascending")
				}
				v += prev
			}
			prev = v
			p.Docs = append(p.Docs, uint32(v))
		}
		if len(blk) != 0 {
			return nil, formatErr("tail block: %d trailing bytes", len(blk))
		}
	}
	for i := 1; i < len(p.Docs); i++ {
		if p.Docs[i] <= p.Docs[i-1] {
			return nil, formatErr("doc ids not strictly ascending at posting %d", i)
		}
	}
	return p, nil
}

// EncodePostings encodes a posting list into its blocks (block i's max
// score is p.BlockScores[i]), as LanceDB writes them.
func EncodePostings(p *Postings, fixed32 bool) ([][]byte, error) {
	n := len(p.Docs)
	if len(p.Freqs) != n || len(p.BlockScores) != (n+BlockSize-1)/BlockSize {
		return nil, fmt.Errorf("posting list of %d docs, %d frequencies, %d block scores", n, len(p.Freqs), len(p.BlockScores))
	}
	var out [][]byte
	var buf [BlockSize]uint32
	for bi := 0; bi*BlockSize < n; bi++ {
		lo, hi := bi*BlockSize, min(n, (bi+1)*BlockSize)
		blk := binary.LittleEndian.AppendUint32(nil, math.Float32bits(p.BlockScores[bi]))
		docs, freqs := p.Docs[lo:hi], p.Freqs[lo:hi]
		switch {
		case hi-lo == BlockSize:
			blk = binary.LittleEndian.AppendUint32(blk, docs[0])
			prev := docs[0]
			for i, d := range docs {
				buf[i] = d - prev
				prev = d
			}
			b := numBits(&buf)
			blk = pack4x(&buf, b, append(blk, byte(b)))
			copy(buf[:], freqs)
			b = numBits(&buf)
			blk = pack4x(&buf, b, append(blk, byte(b)))
		case fixed32:
			for _, d := range docs {
				blk = binary.LittleEndian.AppendUint32(blk, d)
			}
			for _, f := range freqs {
				blk = binary.LittleEndian.AppendUint32(blk, f)
			}
		default:
			prev := uint32(0)
			for i, d := range docs {
				if i == 0 {
					blk = binary.AppendUvarint(blk, uint64(d))
				} else {
					blk = binary.AppendUvarint(blk, uint64(d-prev))
				}
				prev = d
			}
			for _, f := range freqs {
				blk = binary.AppendUvarint(blk, uint64(f))
			}
		}
		out = append(out, blk)
	}
	return out, nil
}
