package vector

import (
	ipb "github.com/compactord/compactord/gen/lanceindexpb"
	"github.com/compactord/compactord/internal/format/file"
)

// typedEncoder encodes the rows of an index over vectors of another type
// than float32 (binary vectors under hamming, float16, float64), in the
// arithmetic lance uses for that type: lance computes distances in the
// vectors' own type, so float32 arithmetic would assign some rows to
// other partitions or codebook entries than LanceDB does.
type typedEncoder interface {
	// encode assigns row i of v to its partition, writes the row's code
	// (out holds the encoder's width) and returns the partition.
	encode(v *Vectors, i int, out []byte) int
	// check refuses vectors of another type than the index's (a column
	// whose type changed under its index): encoding them would give
	// codes LanceDB never computes.
	check(v *Vectors) error
}

// newTypedEncoder is seg's typedEncoder, by its centroids' type.
func newTypedEncoder(seg *Segment, build bool) (typedEncoder, error) {
	t := seg.Index.IVF.GetCentroidsTensor()
	switch t.GetDataType() {
	case ipb.Tensor_UINT8:
		return newHammingEncoder(seg)
	case ipb.Tensor_FLOAT16, ipb.Tensor_FLOAT64:
		return newFloatEncoder(seg, build)
	}
	return nil, unsupported("compactord does not encode indexes of %s vectors", t.GetDataType())
}

// itemKind is the type of the vectors' items e's index holds: its
// centroids' type.
func (e *encoder) itemKind() file.Kind {
	switch e.seg.Index.IVF.GetCentroidsTensor().GetDataType() {
	case ipb.Tensor_UINT8:
		return file.KindUint8
	case ipb.Tensor_FLOAT16:
		return file.KindFloat16
	case ipb.Tensor_FLOAT64:
		return file.KindFloat64
	}
	return file.KindFloat32
}
