package vector

import (
	"encoding/binary"
	"math"

	"google.golang.org/protobuf/proto"

	ipb "github.com/compactord/compactord/gen/lanceindexpb"
)

// floatEncoder encodes rows of an index over float16 or float64 vectors
// as lance does, in the vectors' own type (kernels_f16.go,
// kernels_f64.go): the IVF assignment (squared L2, on the normalized
// vector for cosine, or 1 − x·y for dot; the first of the smallest
// float32 distances), FLAT (the vector, normalized for cosine), SQ (the
// vector over the bounds, computed in float64 as for float32), PQ (the
// residual to the centroid, computed in the type, or the vector itself
// for dot; per sub-vector the entry of smallest L2, or for a delta of a
// dot index of smallest dot distance) and RQ (the residual computed in the
// type, then rotated and its factors computed as for float32 vectors,
// with, for l2 and cosine, the squared distance to the centroid that the
// assignment computed).
type floatEncoder struct {
	dim      int
	half     bool // float16, else float64
	distance string
	quant    string
	build    bool
	pq       *PQParams
	sq       *SQParams
	// cent and book are the centroids and the PQ codebook, float16
	// values held exactly in float32; cent64 and book64 the float64 ones.
	cent, book     []float32
	cent64, book64 []float64
	// rq encodes RQ codes and factors from the vector and centroids as
	// float32 (cent32).
	rq     *rqEncoder
	cent32 []float32
}

func newFloatEncoder(seg *Segment, build bool) (*floatEncoder, error) {
	s := seg.Storage
	t := seg.Index.IVF.GetCentroidsTensor()
	e := &floatEncoder{dim: int(t.GetShape()[1]), half: t.GetDataType() == ipb.Tensor_FLOAT16, distance: seg.Index.Distance,
		quant: s.Quantizer, build: build, pq: s.PQ, sq: s.SQ}
	if e.half {
		e.cent = tensorFloats(t)
	} else {
		e.cent64 = float64s(t.GetData())
	}
	if s.Quantizer == QuantRQ {
		var err error
		e.cent32 = tensorFloats(t)
		if e.rq, err = newRQEncoder(s.RQ, e.cent32, e.dim, e.distance); err != nil {
			return nil, err
		}
	}
	if s.Quantizer == QuantPQ {
		if s.PQ.CodebookType != t.GetDataType() {
			return nil, formatErr("a PQ codebook of %s under %s centroids", s.PQ.CodebookType, t.GetDataType())
		}
		if e.half {
			e.book = s.PQ.Codebook
		} else {
			cb := &ipb.Tensor{}
			if err := proto.Unmarshal(s.Extra[s.PQ.CodebookPosition-2], cb); err != nil {
				return nil, formatErr("%s: PQ codebook: %v", StorageFile, err)
			}
			e.book64 = float64s(cb.GetData())
		}
	}
	return e, nil
}

// float64s decodes little-endian float64s.
func float64s(b []byte) []float64 {
	out := make([]float64, len(b)/8)
	for i := range out {
		out[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return out
}

func (e *floatEncoder) encode(v *Vectors, i int, out []byte) int {
	if e.half {
		return e.encode16(v.Data[i*e.dim:(i+1)*e.dim], out)
	}
	return e.encode64(v.Data64[i*e.dim:(i+1)*e.dim], out)
}

func (e *floatEncoder) check(v *Vectors) error {
	if !e.half {
		if len(v.Data64) != len(v.Data) {
			return formatErr("a float64 index over a column whose vectors are not float64")
		}
		return nil
	}
	for _, f := range v.Data {
		if f16r(f) != f && !math.IsNaN(float64(f)) {
			return formatErr("a float16 index over a column whose vectors are not float16 (an item %v)", f)
		}
	}
	return nil
}

// nearest is the index of the first of the smallest of n distances.
func nearest(n int, dist func(c int) float32) int {
	best, bd := 0, float32(math.Inf(1))
	for c := range n {
		if d := dist(c); d < bd {
			best, bd = c, d
		}
	}
	return best
}

func (e *floatEncoder) encode16(x []float32, out []byte) int {
	dim := e.dim
	if e.distance == "cosine" {
		x = normalizeF16(make([]float32, dim), x)
	}
	kernel := l2F16
	if e.distance == "dot" {
		kernel = dotDistF16
	}
	p := nearest(len(e.cent)/dim, func(c int) float32 { return kernel(x, e.cent[c*dim:(c+1)*dim]) })
	switch e.quant {
	case QuantFlat:
		for k, f := range x {
			binary.LittleEndian.PutUint16(out[2*k:], f16Bits(f))
		}
	case QuantSQ:
		for k, f := range x {
			out[k] = e.sqCode(float64(f))
		}
	case QuantRQ:
		// The residual is computed in float16.
		c := e.cent[p*dim : (p+1)*dim]
		r := make([]float32, dim)
		for k := range dim {
			r[k] = f16r(x[k] - c[k])
		}
		e.putRQ(out, r, p, float64(l2F16(x, c)))
	case QuantPQ:
		r := x
		if e.distance != "dot" {
			r = make([]float32, dim)
			c := e.cent[p*dim : (p+1)*dim]
			for k := range dim {
				r[k] = f16r(x[k] - c[k])
			}
		}
		sub, entries := dim/e.pq.NumSubVectors, e.pq.entries()
		subKernel := l2F16
		if e.distance == "dot" && !e.build {
			subKernel = dotDistF16
		}
		e.putCodes(out, func(j int) int {
			xs := r[j*sub : (j+1)*sub]
			return nearest(entries, func(c int) float32 {
				return subKernel(xs, e.book[(j*entries+c)*sub:(j*entries+c+1)*sub])
			})
		})
	}
	return p
}

func (e *floatEncoder) encode64(x []float64, out []byte) int {
	dim := e.dim
	if e.distance == "cosine" {
		x = normalizeF64(make([]float64, dim), x)
	}
	kernel := l2F64
	if e.distance == "dot" {
		kernel = dotDistF64
	}
	p := nearest(len(e.cent64)/dim, func(c int) float32 { return kernel(x, e.cent64[c*dim:(c+1)*dim]) })
	switch e.quant {
	case QuantFlat:
		for k, f := range x {
			binary.LittleEndian.PutUint64(out[8*k:], math.Float64bits(f))
		}
	case QuantSQ:
		for k, f := range x {
			out[k] = e.sqCode(f)
		}
	case QuantRQ:
		// The residual is computed in float64 and rounded to float32
		// (rounding x and c first would flip the sign of a rotated
		// component within rounding of zero now and then); for l2 and
		// cosine its squared norm is the assignment's distance.
		c := e.cent64[p*dim : (p+1)*dim]
		r := make([]float32, dim)
		for k := range dim {
			r[k] = float32(x[k] - c[k])
		}
		dist := -1.0
		if e.distance != "dot" {
			dist = float64(kernel(x, c))
		}
		e.putRQ(out, r, p, dist)
	case QuantPQ:
		r := x
		if e.distance != "dot" {
			r = make([]float64, dim)
			c := e.cent64[p*dim : (p+1)*dim]
			for k := range dim {
				r[k] = x[k] - c[k]
			}
		}
		sub, entries := dim/e.pq.NumSubVectors, e.pq.entries()
		subKernel := l2F64
		if e.distance == "dot" && !e.build {
			subKernel = dotDistF64
		}
		e.putCodes(out, func(j int) int {
			xs := r[j*sub : (j+1)*sub]
			return nearest(entries, func(c int) float32 {
				return subKernel(xs, e.book64[(j*entries+c)*sub:(j*entries+c+1)*sub])
			})
		})
	}
	return p
}

// sqCode is lance's 8-bit scalar quantization of f over the bounds:
// (f − start)·255/(end − start) in float64, cast with Rust's saturating
// `as u8` (NaN to 0).
func (e *floatEncoder) sqCode(f float64) byte {
	lo, hi := e.sq.Bounds.Start, e.sq.Bounds.End
	if hi == lo {
		return 0
	}
	c := (f - lo) * 255 / (hi - lo)
	switch {
	case math.IsNaN(c) || c <= 0:
		return 0
	case c >= 255:
		return 255
	}
	return byte(c)
}

// putCodes writes the PQ code of each sub-vector j (code(j)), 4-bit codes
// two a byte with the even sub-vector in the low half.
func (e *floatEncoder) putCodes(out []byte, code func(j int) int) {
	clear(out[:e.pq.codeBytes()])
	for j := range e.pq.NumSubVectors {
		c := code(j)
		if e.pq.NBits == 4 {
			out[j/2] |= byte(c) << (4 * (j % 2))
		} else {
			out[j] = byte(c)
		}
	}
}

// putRQ writes the RQ code and factors of the row whose residual to
// partition p's centroid is r (rotated in place; dist: the squared
// distance the assignment computed, < 0 for none) as the float32 encoder
// lays them out: the sign bits, then add, scale and error.
func (e *floatEncoder) putRQ(out []byte, r []float32, p int, dist float64) {
	code, add, scale, errf := e.rq.encodeResidual(r, p, dist)
	n := copy(out, code)
	binary.LittleEndian.PutUint32(out[n:], math.Float32bits(add))
	binary.LittleEndian.PutUint32(out[n+4:], math.Float32bits(scale))
	binary.LittleEndian.PutUint32(out[n+8:], math.Float32bits(errf))
}
