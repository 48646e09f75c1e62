package fts

import (
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
)

// BM25 parameters LanceDB scores with.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// idf is LanceDB's BM25 idf of a token in n of N docs (float32
// arithmetic, then ln).
func idf(n, N int) float32 {
	x := (float32(N)-float32(n)+0.5)/(float32(n)+0.5) + 1
	return float32(math.Log(float64(x)))
}

// docWeight is BM25's term weight of frequency tf in a doc of dl tokens.
func docWeight(tf, dl uint32, avgdl float32) float32 {
	f := float32(tf)
	norm := float32(bm25K1) * (1 - bm25B + bm25B*float32(dl)/avgdl)
	return (bm25K1 + 1) * f / (f + norm)
}

// BlockScores computes each block's max score: idf(len, N) times the
// largest term weight among its postings, doc lengths from numTokens,
// all in float32 as LanceDB computes them. LanceDB's ln is not correctly
// rounded (ln(1.1112757) comes out one ulp low; up to two ulps either way
// were seen), so each score is raised by three ulps: it stays an upper
// bound of the scores LanceDB computes at query time, which is what block
// scores are for (skipping blocks).
func BlockScores(p *Postings, numTokens []uint32, N int, avgdl float32) []float32 {
	w := idf(len(p.Docs), N)
	var out []float32
	for lo := 0; lo < len(p.Docs); lo += BlockSize {
		var m float32
		for i := lo; i < min(lo+BlockSize, len(p.Docs)); i++ {
			m = max(m, docWeight(p.Freqs[i], numTokens[p.Docs[i]], avgdl))
		}
		sc := w * m
		for range 3 {
			sc = math.Nextafter32(sc, float32(math.Inf(1)))
		}
		out = append(out, sc)
	}
	return out
}

// quantizeLen maps a doc length to the byte an impact entry stores:
// lengths below 8 as they are, longer ones as 3 mantissa bits under an
// exponent (so the byte stands for the smallest length of its bucket).
func quantizeLen(dl uint32) uint32 {
	n := 32 - bits.LeadingZeros32(dl)
	if n < 4 {
		return dl
	}
	shift := n - 4
	return (dl>>shift)&7 | uint32(shift+1)<<3
}

// impactEntry encodes one impact entry over postings [lo, hi): the last
// doc id, the number of pairs, then the Pareto frontier of (frequency,
// quantized length) in ascending frequency, each pair as
// varint((freq delta - 1) << 1 | explicit) and, when the length delta is
// not 1, the length delta as one byte.
func impactEntry(p *Postings, numTokens []uint32, lo, hi int) []byte {
	minLen := map[uint32]uint32{} // freq → smallest quantized length
	for i := lo; i < hi; i++ {
		q := min(quantizeLen(numTokens[p.Docs[i]]), 255)
		if l, ok := minLen[p.Freqs[i]]; !ok || q < l {
			minLen[p.Freqs[i]] = q
		}
	}
	freqs := make([]uint32, 0, len(minLen))
	for f := range minLen {
		freqs = append(freqs, f)
	}
	slices.Sort(freqs)
	// Keep a frequency only if no higher one has a length as small.
	var front [][2]uint32
	best := uint32(math.MaxUint32)
	for i := len(freqs) - 1; i >= 0; i-- {
		if l := minLen[freqs[i]]; l < best {
			front = append(front, [2]uint32{freqs[i], l})
			best = l
		}
	}
	slices.Reverse(front)
	out := binary.AppendUvarint(nil, uint64(p.Docs[hi-1]))
	out = binary.AppendUvarint(out, uint64(len(front)))
	var pf, pl uint32
	for _, fl := range front {
		df, dl := fl[0]-pf, fl[1]-pl
		if dl == 1 {
			out = binary.AppendUvarint(out, uint64(df-1)<<1)
		} else {
			out = binary.AppendUvarint(out, uint64(df-1)<<1|1)
			out = append(out, byte(dl))
		}
		pf, pl = fl[0], fl[1]
	}
	return out
}

// impactGroup is the blocks one second-level impact entry covers.
const impactGroup = 32

// Impacts computes a token's impact entries: one per posting block, then
// one per group of 32 blocks.
func Impacts(p *Postings, numTokens []uint32) [][]byte {
	var out [][]byte
	n := len(p.Docs)
	for lo := 0; lo < n; lo += BlockSize {
		out = append(out, impactEntry(p, numTokens, lo, min(lo+BlockSize, n)))
	}
	for lo := 0; lo < n; lo += BlockSize * impactGroup {
		out = append(out, impactEntry(p, numTokens, lo, min(lo+BlockSize*impactGroup, n)))
	}
	return out
}
