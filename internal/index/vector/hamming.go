package vector

import (
	"math/bits"
)

// Hamming indexes. LanceDB 0.39 builds only IVF_FLAT with the hamming
// distance, over FixedSizeList<uint8> (binary) vectors: its PQ, SQ and RQ
// builders refuse uint8. The IVF centroids are a UINT8 tensor [P, dim]
// (k-modes centres, bytes like the vectors) and the FLAT storage holds
// the vectors' bytes as they are. A row goes to the centroid of the
// fewest differing bits (the popcount of the bytes' xor, an exact
// integer), the first such centroid on a tie, as lance's k-modes
// assignment (a strict less-than over the centroids in order) picks it.

// hammingEncoder encodes rows for a hamming IVF_FLAT index.
type hammingEncoder struct {
	cent []byte
	dim  int
}

func newHammingEncoder(seg *Segment) (*hammingEncoder, error) {
	s := seg.Storage
	if s.Quantizer != QuantFlat {
		return nil, unsupported("hamming %s storage (LanceDB builds hamming indexes with FLAT storage only)", s.Quantizer)
	}
	t := seg.Index.IVF.GetCentroidsTensor()
	return &hammingEncoder{cent: t.GetData(), dim: int(t.GetShape()[1])}, nil
}

// encode stores row i's bytes (its items, which the scan read as uint8
// and widened to float32 exactly) and returns its nearest centroid.
func (h *hammingEncoder) encode(v *Vectors, i int, out []byte) int {
	x := v.Data[i*h.dim : (i+1)*h.dim]
	for k, f := range x {
		out[k] = byte(f)
	}
	return nearestHamming(out[:h.dim], h.cent, h.dim)
}

func (h *hammingEncoder) check(v *Vectors) error {
	for _, f := range v.Data {
		if f != float32(byte(f)) || f < 0 || f > 255 {
			return formatErr("a hamming index over a column whose vectors are not uint8 (an item %v)", f)
		}
	}
	return nil
}

// hamming is the number of bits that differ between a and b (len(b) ≥
// len(a)).
func hamming(a, b []byte) int {
	n := 0
	for i, x := range a {
		n += bits.OnesCount8(x ^ b[i])
	}
	return n
}

// nearestHamming is the index of the centroid (dim bytes each, in cent)
// nearest v by hamming distance: the first of the nearest.
func nearestHamming(v, cent []byte, dim int) int {
	best, bd := 0, dim*8+1
	for c := 0; (c+1)*dim <= len(cent); c++ {
		if d := hamming(v, cent[c*dim:(c+1)*dim]); d < bd {
			best, bd = c, d
		}
	}
	return best
}
