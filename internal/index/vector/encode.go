package vector

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"

	ipb "github.com/compactord/compactord/gen/lanceindexpb"
	"github.com/compactord/compactord/internal/format/file"
)

// encoder builds the storage of new rows batch by batch, so that a
// catch-up holds the new rows' codes (48 bytes a row for a 768-d PQ, a
// byte a dimension for SQ) and one scan batch of vectors, not every new
// vector. Each batch is assigned and encoded by GOMAXPROCS workers, each
// on its own run of rows into its own slots. The codes go straight into
// one slab in arrival order (sized up front by reserve when the caller
// knows the row count), and storage groups them by partition in place,
// keeping arrival order within a partition: the result is the same as a
// serial encoding's, without a second copy of the codes (per-partition
// slices growing by doubling held up to three: 220 MiB for 100 000 768-d
// SQ rows).
type encoder struct {
	seg   *Segment
	cent  []float32
	dim   int
	width int // bytes of one row's code (FLAT: the float32 vector; RQ: the sign bits then three float32 factors)
	// build: dot PQ codes are picked by squared L2, as createIndex picks
	// them (EncodeBuild); else by largest dot product, as optimize() does.
	build bool
	rq    *rqEncoder
	// typed encodes rows of an index over other than float32 vectors
	// (nil: float32), in the arithmetic lance uses for that type.
	typed typedEncoder
	// ids, codes and parts are the rows so far in arrival order: row i's
	// address, code (codes[i*width:(i+1)*width]) and partition.
	ids   []uint64
	codes []byte
	parts []int32
	// book16 is the PQ codebook transposed for the AVX2 kernel (nil
	// without it, or for a PQ it does not cover).
	book16 []float32
}

func (seg *Segment) newEncoder(build bool) (*encoder, error) {
	s := seg.Storage
	cent, dim := seg.Index.Centroids()
	e := &encoder{seg: seg, cent: cent, dim: dim, build: build}
	if t := seg.Index.IVF.GetCentroidsTensor().GetDataType(); t != ipb.Tensor_FLOAT32 {
		var err error
		if e.typed, err = newTypedEncoder(seg, build); err != nil {
			return nil, err
		}
	}
	switch s.Quantizer {
	case QuantFlat:
		item := s.Columns[0].Children[0].Type
		if want := e.itemKind(); item.Kind != want {
			return nil, formatErr("FLAT storage of %s vectors under %s centroids", item.Kind, seg.Index.IVF.GetCentroidsTensor().GetDataType())
		}
		e.width = item.ByteWidth() * dim
	case QuantSQ:
		e.width = dim
	case QuantPQ:
		e.width = s.PQ.codeBytes()
		e.book16 = pqBook16(s.PQ)
	case QuantRQ:
		var err error
		if e.rq, err = newRQEncoder(s.RQ, cent, dim, seg.Index.Distance); err != nil {
			return nil, err
		}
		e.width = dim/8 + 12
	}
	return e, nil
}

// reserve makes room for rows more rows, so that the codes of a scan of
// a known size are one allocation.
func (e *encoder) reserve(rows int) {
	if rows <= 0 {
		return
	}
	e.ids = slices.Grow(e.ids, rows)
	e.codes = slices.Grow(e.codes, rows*e.width)
	e.parts = slices.Grow(e.parts, rows)
}

// add encodes v's rows (v may be reused by the caller after add returns).
func (e *encoder) add(v *Vectors) error {
	n := len(v.Addrs)
	if n == 0 {
		return nil
	}
	if v.Dim != e.dim {
		return fmt.Errorf("vectors of %d dimensions for an index of %d", v.Dim, e.dim)
	}
	if e.typed != nil {
		if err := e.typed.check(v); err != nil {
			return err
		}
	}
	first := len(e.ids)
	e.ids = append(e.ids, v.Addrs...)
	// Every slot is written whole below (as encodeRow and the typed
	// encoders do), so the grown room needs no clearing.
	e.parts = slices.Grow(e.parts, n)[:first+n]
	e.codes = slices.Grow(e.codes, n*e.width)[:(first+n)*e.width]
	part, buf := e.parts[first:], e.codes[first*e.width:]
	workers := min(runtime.GOMAXPROCS(0), max(1, n/64))
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := w*n/workers, (w+1)*n/workers
		wg.Go(func() {
			scratch := make([]float32, 2*e.dim)
			for i := lo; i < hi; i++ {
				out := buf[i*e.width : (i+1)*e.width]
				if e.typed != nil {
					part[i] = int32(e.typed.encode(v, i, out))
					continue
				}
				part[i] = int32(e.encodeRow(v.Data[i*e.dim:(i+1)*e.dim], out, scratch))
			}
		})
	}
	wg.Wait()
	return nil
}

// encodeRow writes the code of vector x into out and returns its
// partition (its nearest centroid), as Encode documents.
func (e *encoder) encodeRow(x []float32, out []byte, scratch []float32) int {
	s, dim := e.seg.Storage, e.dim
	if e.seg.Index.Distance == "cosine" {
		x = normalizeInto(scratch[:dim], x)
	}
	p := nearestCentroid(x, e.cent, dim, e.seg.Index.Distance)
	switch s.Quantizer {
	case QuantFlat:
		for k, f := range x {
			binary.LittleEndian.PutUint32(out[4*k:], math.Float32bits(f))
		}
	case QuantSQ:
		lo, hi := s.SQ.Bounds.Start, s.SQ.Bounds.End
		for k, f := range x {
			var c float64
			if hi != lo {
				c = (float64(f) - lo) * 255 / (hi - lo)
			}
			out[k] = byte(math.Max(0, math.Min(255, c)))
		}
	case QuantRQ:
		code, add, scale, errf := e.rq.encode(x, e.cent[p*dim:(p+1)*dim], p)
		n := copy(out, code)
		binary.LittleEndian.PutUint32(out[n:], math.Float32bits(add))
		binary.LittleEndian.PutUint32(out[n+4:], math.Float32bits(scale))
		binary.LittleEndian.PutUint32(out[n+8:], math.Float32bits(errf))
	case QuantPQ:
		dot := e.seg.Index.Distance == "dot"
		if !dot {
			r := scratch[dim : 2*dim]
			c := e.cent[p*dim : (p+1)*dim]
			for k := range dim {
				r[k] = x[k] - c[k]
			}
			x = r
		}
		pqEncodeInto(out, s.PQ, x, dot && !e.build, e.book16)
	}
	return p
}

// storage is the encoded rows as a Storage of the segment's kind, each
// partition's rows in arrival order. It takes over the encoder's slabs
// (the encoder is empty after it).
func (e *encoder) storage() *Storage {
	s := e.seg.Storage
	parts := s.Partitions()
	out := &Storage{Quantizer: s.Quantizer, Distance: s.Distance, Fields: s.Fields, Metadata: s.Metadata, Extra: s.Extra,
		PQ: s.PQ, SQ: s.SQ, RQ: s.RQ, IVF: &ipb.IVF{Offsets: make([]uint64, parts), Lengths: make([]uint32, parts)}}
	total := len(e.ids)
	for _, p := range e.parts {
		out.IVF.Lengths[p]++
	}
	var off uint64
	for p, n := range out.IVF.Lengths {
		out.IVF.Offsets[p] = off
		off += uint64(n)
	}
	groupRows(e.ids, e.codes, e.width, e.parts, out.IVF.Offsets)
	codes := e.codes
	out.RowIDs = e.ids
	e.ids, e.codes, e.parts = nil, nil, nil
	switch s.Quantizer {
	case QuantFlat:
		out.Columns = []*file.Array{{Type: s.Columns[0].Type, Len: total,
			Children: []*file.Array{{Type: s.Columns[0].Children[0].Type, Len: total * e.dim, Values: codes}}}}
	case QuantRQ:
		// Split each row's slot into the sign bits and the three factor
		// columns.
		cw := e.dim / 8
		bits := make([]byte, 0, total*cw)
		factors := [3][]byte{}
		for r := range total {
			row := codes[r*e.width : (r+1)*e.width]
			bits = append(bits, row[:cw]...)
			for k := range factors {
				factors[k] = append(factors[k], row[cw+4*k:cw+4*k+4]...)
			}
		}
		f32s := func(b []byte) *file.Array {
			return &file.Array{Type: file.DataType{Kind: file.KindFloat32}, Len: total, Values: b}
		}
		out.Columns = []*file.Array{fslU8(bits, cw), f32s(factors[0]), f32s(factors[1]), f32s(factors[2])}
	default:
		out.Columns = []*file.Array{fslU8(codes, e.width)}
	}
	return out
}

// groupRows orders rows (ids[i] and codes[i*width:(i+1)*width]) by their
// partition parts[i], stably, in place: partition p's rows start at
// offsets[p] (the rows of the partitions before it). parts is used up as
// the rows' destinations.
func groupRows(ids []uint64, codes []byte, width int, parts []int32, offsets []uint64) {
	next := slices.Clone(offsets)
	dest := parts // each row's destination, over its partition
	sorted := true
	for i, p := range parts {
		d := next[p]
		next[p]++
		dest[i] = int32(d)
		sorted = sorted && d == uint64(i)
	}
	if sorted {
		return
	}
	// Follow each cycle of the permutation: every swap puts one row where
	// it belongs.
	tmp := make([]byte, width)
	for i := range dest {
		for int(dest[i]) != i {
			j := int(dest[i])
			ids[i], ids[j] = ids[j], ids[i]
			ri, rj := codes[i*width:(i+1)*width], codes[j*width:(j+1)*width]
			copy(tmp, ri)
			copy(ri, rj)
			copy(rj, tmp)
			dest[i], dest[j] = dest[j], dest[i]
		}
	}
}

// normalizeInto is normalize writing into dst.
func normalizeInto(dst, v []float32) []float32 {
	var s float32
	for _, x := range v {
		s += x * x
	}
	n := float32(math.Sqrt(float64(s)))
	if n == 0 {
		copy(dst, v)
		return dst
	}
	for i, x := range v {
		dst[i] = x / n
	}
	return dst
}
