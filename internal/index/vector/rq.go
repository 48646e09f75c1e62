package vector

import (
	"math"
	"math/bits"
)

// IVF_RQ (RaBitQ, 1 bit per dimension) as lance 12 writes it.
//
// A row's code is the sign of each dimension of its rotated residual
// (vector − centroid), bit d of byte d/8 set when dimension d is
// non-negative (LSB first). The rotation is lance's "fast" one: four
// rounds of flipping signs (bit i of a round's dim/8 sign bytes flips
// dimension i), a Walsh–Hadamard transform and a 1/sqrt(dim) rescale
// (dimensions that are not a power of two alternate the transform between
// the head and the tail and mix the halves; compactord refuses those).
//
// Packed storage ("packed": true) lays each partition's codes out for
// lance's 4-bit lookup-table scan: rows in blocks of 32; for each code
// byte, 32 bytes whose first 16 hold the low nibbles and last 16 the high
// nibbles of that byte of the block's rows, two rows per byte (row
// rqPerm[j] in the low half, row rqPerm[j]+16 in the high half of byte
// j). The rows after the last full block are stored column-major (byte c
// of remainder row r at c·rem + r), as PQ codes are.

// rqBlock is the number of rows a packed block holds.
const rqBlock = 32

// rqPerm is the order of rows within a block's 16-byte half.
var rqPerm = [16]int{0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15}

// rqRounds is the number of sign-flip/transform rounds of the fast
// rotation.
const rqRounds = 4

// unpackRQ returns a partition's n packed codes of width w row-major.
func unpackRQ(packed []byte, n, w int) []byte {
	out := make([]byte, n*w)
	full := n / rqBlock * rqBlock
	for b := 0; b < full; b += rqBlock {
		blk := packed[b*w : (b+rqBlock)*w]
		for c := range w {
			col := blk[c*rqBlock : (c+1)*rqBlock]
			for j, r := range rqPerm {
				lo, hi := col[j], col[j+16]
				out[(b+r)*w+c] = lo&0xf | hi<<4
				out[(b+r+16)*w+c] = lo>>4 | hi&0xf0
			}
		}
	}
	rem := n - full
	tail := packed[full*w:]
	for r := range rem {
		for c := range w {
			out[(full+r)*w+c] = tail[c*rem+r]
		}
	}
	return out
}

// packRQ is unpackRQ's inverse.
func packRQ(rows []byte, n, w int) []byte {
	out := make([]byte, n*w)
	full := n / rqBlock * rqBlock
	for b := 0; b < full; b += rqBlock {
		blk := out[b*w : (b+rqBlock)*w]
		for c := range w {
			col := blk[c*rqBlock : (c+1)*rqBlock]
			for j, r := range rqPerm {
				x, y := rows[(b+r)*w+c], rows[(b+r+16)*w+c]
				col[j] = x&0xf | y<<4
				col[j+16] = x>>4 | y&0xf0
			}
		}
	}
	rem := n - full
	tail := out[full*w:]
	for r := range rem {
		for c := range w {
			tail[c*rem+r] = rows[(full+r)*w+c]
		}
	}
	return out
}

// fastRotate applies lance's fast rotation to v (len(v) a power of two,
// signs rqRounds·len(v)/8 bytes) in place, in lance's order of float32
// operations, so that the signs of the result are those it computed.
func fastRotate(v []float32, signs []byte) {
	n := len(v)
	per := n / 8
	scale := 1 / float32(math.Sqrt(float64(n)))
	for round := range rqRounds {
		sg := signs[round*per : (round+1)*per]
		for i := range v {
			if sg[i/8]>>(i%8)&1 == 1 {
				v[i] = -v[i]
			}
		}
		for half := 1; half < n; half *= 2 {
			for i := 0; i < n; i += 2 * half {
				for j := i; j < i+half; j++ {
					x, y := v[j], v[j+half]
					v[j], v[j+half] = x+y, x-y
				}
			}
		}
		for i := range v {
			v[i] *= scale
		}
	}
}

// rqRotatable reports whether compactord reproduces the fast rotation of
// a code dimension (a power of two of at least 8).
func rqRotatable(dim int) bool { return dim >= 8 && bits.OnesCount(uint(dim)) == 1 }

// rqSignBits packs the signs of x (bit set when non-negative, as Rust's
// is_sign_positive, so -0 counts as negative) LSB first.
func rqSignBits(x []float32) []byte {
	out := make([]byte, (len(x)+7)/8)
	for i, f := range x {
		if !math.Signbit(float64(f)) {
			out[i/8] |= 1 << (i % 8)
		}
	}
	return out
}

// rqEpsilon is RaBitQ's confidence constant of the error bound.
const rqEpsilon = 1.9

// rqEncoder encodes rows as lance 12 does for a 1-bit RQ storage with the
// raw_query estimator: for residual r = v − c (both rotated), x̄ = ±½ by
// r's signs, ⟨r, x̄⟩ = ipr, ⟨c, x̄⟩ = ipc and ‖r‖² = l2:
//
//	l2, cosine: add = l2 + 2·l2·ipc/ipr, scale = −2·l2/ipr,
//	            error = 2·‖r‖·ε·sqrt((l2·d/4/ipr² − 1)/(d − 1))
//	dot:        add = 1 − ⟨r, c⟩ + l2·ipc/ipr, scale = −l2/ipr,
//	            error = ‖r‖·ε·sqrt(…) (the same root)
//
// (checked against every factor LanceDB 0.39 wrote, l2, cosine and dot).
type rqEncoder struct {
	signs   []byte
	dot     bool
	rotated [][]float32 // each partition's rotated centroid
}

func newRQEncoder(p *RQParams, cent []float32, dim int, distance string) (*rqEncoder, error) {
	if p.CodeDim != dim || !rqRotatable(dim) {
		return nil, unsupported("RQ of code_dim %d over %d dimensions (compactord rotates powers of two of at least 8)", p.CodeDim, dim)
	}
	e := &rqEncoder{signs: p.rotationSigns(), dot: distance == "dot"}
	for c := 0; c*dim < len(cent); c++ {
		r := append([]float32(nil), cent[c*dim:(c+1)*dim]...)
		fastRotate(r, e.signs)
		e.rotated = append(e.rotated, r)
	}
	return e, nil
}

// encode returns x's code and factors in partition p (centroid c).
func (e *rqEncoder) encode(x, c []float32, p int) (code []byte, add, scale, errf float32) {
	return e.encodeDist(x, c, p, -1)
}

// encodeDist is encode with the squared distance of x to c given (lance
// takes it from the partition assignment for l2 and cosine; < 0: computed
// from the rotated residual).
func (e *rqEncoder) encodeDist(x, c []float32, p int, dist float64) (code []byte, add, scale, errf float32) {
	r := make([]float32, len(x))
	for i := range r {
		r[i] = x[i] - c[i]
	}
	return e.encodeResidual(r, p, dist)
}

// encodeResidual is encodeDist given the residual r = x − c in float32
// (rotated in place): an index over other vectors than float32 computes
// the residual in the vectors' type and rounds it to float32.
func (e *rqEncoder) encodeResidual(r []float32, p int, dist float64) (code []byte, add, scale, errf float32) {
	fastRotate(r, e.signs)
	code = rqSignBits(r)
	rc := e.rotated[p]
	var l2, ipr, ipc, dotRC float64
	for i, f := range r {
		xu := -0.5
		if !math.Signbit(float64(f)) {
			xu = 0.5
		}
		l2 += float64(f) * float64(f)
		ipr += float64(f) * xu
		ipc += float64(rc[i]) * xu
		dotRC += float64(f) * float64(rc[i])
	}
	if dist >= 0 && !e.dot {
		l2 = dist
	}
	d := float64(len(r))
	var a, s, root float64
	if ipr != 0 {
		a, s = l2*ipc/ipr, -l2/ipr
		root = math.Sqrt(math.Max(0, (l2*d/4/(ipr*ipr)-1)/(d-1)))
	}
	norm := math.Sqrt(l2)
	if e.dot {
		return code, float32(1 - dotRC + a), float32(s), float32(norm * rqEpsilon * root)
	}
	return code, float32(l2 + 2*a), float32(2 * s), float32(2 * norm * rqEpsilon * root)
}
