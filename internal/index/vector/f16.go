package vector

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	ipb "github.com/compactord/compactord/gen/lanceindexpb"
	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/format/file"
)

// LanceDB 0.39 keeps an index over float16 or float64 vectors in the
// vectors' own type: the IVF centroids and the PQ codebook are FLOAT16 or
// FLOAT64 tensors and FLAT storage holds the vectors as they are (SQ, PQ
// and RQ codes are bytes whatever the type). compactord decodes such
// tensors to float32 for HNSW graph rebuilds; remap copies index.idx,
// codes and vectors unchanged; catch-up and rebuild encode new rows in
// lance's arithmetic for the type (typed_float.go).

// tensorWidth is the byte width of a float tensor's elements (0: not a
// float type compactord reads).
func tensorWidth(t ipb.Tensor_DataType) int {
	switch t {
	case ipb.Tensor_FLOAT16:
		return 2
	case ipb.Tensor_FLOAT32:
		return 4
	case ipb.Tensor_FLOAT64:
		return 8
	case ipb.Tensor_UINT8:
		// A hamming index's centroids are binary vectors, as its FLAT
		// storage's.
		return 1
	}
	return 0
}

// tensorFloats decodes a float tensor's data (its length checked by the
// caller) as float32.
func tensorFloats(t *ipb.Tensor) []float32 {
	w := tensorWidth(t.GetDataType())
	data := t.GetData()
	if w == 0 {
		return nil
	}
	out := make([]float32, len(data)/w)
	for i := range out {
		switch w {
		case 1:
			out[i] = float32(data[i])
		case 2:
			out[i] = file.Float16(binary.LittleEndian.Uint16(data[2*i:]))
		case 4:
			out[i] = f32(data[4*i:])
		case 8:
			out[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(data[8*i:])))
		}
	}
	return out
}

// ColumnRefusal is why catch-up and rebuild leave a vector index on column
// f alone ("": they do not): a fixed-size list of other items than
// float32, float16, float64 or (hamming) uint8 (LanceDB names float16
// "halffloat" and float64 "double").
func ColumnRefusal(f *pb.Field) string {
	lt := f.GetLogicalType()
	if !strings.HasPrefix(lt, "fixed_size_list:") {
		return ""
	}
	switch item := strings.Split(lt, ":")[1]; item {
	case "float", "halffloat", "double", "uint8":
	default:
		return fmt.Sprintf("column %q holds %s vectors: compactord encodes indexes of float16, float32, float64 and (hamming) uint8 vectors", f.GetName(), item)
	}
	return ""
}
