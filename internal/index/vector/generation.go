package vector

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"

	ipb "github.com/compactord/compactord/gen/lanceindexpb"
	pb "github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/format/file"
	"github.com/compactord/compactord/internal/storage"
)

// A MemWAL generation's copy of a maintained vector index is not built
// with the base index's centroids or quantizer: LanceDB 0.39 flushes, for
// every maintained vector index whatever its type, an IVF_HNSW_SQ segment
// of one partition under a zero centroid, with the base index's distance
// type, 8-bit SQ bounds from the generation's own vectors (their minimum
// and maximum, raw even for cosine), and one HNSW graph (m 16,
// ef_construction 100, max_level 7) built on the raw vectors. Its row ids
// are the generation's row offsets (one fragment, id 0).
const (
	GenerationM              = 16
	GenerationEfConstruction = 100
	GenerationMaxLevel       = 7
	generationPrefetch       = 2
)

// GenerationDistances are the distance types a generation copy is written
// for: those of float vectors (hamming is for binary vectors, whose copy
// was never observed).
var GenerationDistances = []string{"l2", "cosine", "dot"}

// DistanceName is the distance type a VectorIndexDetails' metric names.
func DistanceName(m ipb.VectorMetricType) string {
	for name, v := range distanceTypes {
		if v == m {
			return name
		}
	}
	return ""
}

// BuildGenerationCopy builds a generation's copy of a vector index over v
// (v.Addrs are the rows' offsets in the generation): the one-partition
// HNSW sub-index and its SQ storage, as LanceDB's MemWAL flush lays them
// out.
func BuildGenerationCopy(v *Vectors, distance string) (*SubIndex, *Storage, error) {
	switch distance {
	case "l2", "cosine", "dot":
	default:
		return nil, nil, unsupported("a MemWAL generation copy with distance type %q", distance)
	}
	dim, n := v.Dim, len(v.Addrs)
	if dim <= 0 || len(v.Data) != n*dim {
		return nil, nil, fmt.Errorf("%d vectors of dimension %d in %d floats", n, dim, len(v.Data))
	}
	sq := &SQParams{Dim: dim, NumBits: 8}
	if n > 0 {
		lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
		for _, x := range v.Data {
			lo, hi = min(lo, x), max(hi, x)
		}
		if math.IsNaN(float64(lo)) || math.IsNaN(float64(hi)) || math.IsInf(float64(lo), 0) || math.IsInf(float64(hi), 0) {
			return nil, nil, fmt.Errorf("vectors hold a NaN or infinite value")
		}
		sq.Bounds.Start, sq.Bounds.End = float64(lo), float64(hi)
	}
	codes := make([]byte, n*dim)
	lo, hi := sq.Bounds.Start, sq.Bounds.End
	for i, x := range v.Data {
		var c float64
		if hi != lo {
			c = (float64(x) - lo) * 255 / (hi - lo)
		}
		codes[i] = byte(math.Max(0, math.Min(255, c)))
	}
	sqJSON, err := json.Marshal(sq)
	if err != nil {
		return nil, nil, err
	}
	list, err := json.Marshal([]string{string(sqJSON)})
	if err != nil {
		return nil, nil, err
	}
	s := &Storage{
		Quantizer: QuantSQ, Distance: distance, SQ: sq,
		Fields: []*pb.Field{
			{Name: colRowID, Id: 0, ParentId: -1, LogicalType: "uint64", Encoding: pb.Encoding_PLAIN},
			{Name: colSQ, Id: 1, ParentId: -1, LogicalType: fmt.Sprintf("fixed_size_list:uint8:%d", dim), Nullable: true, Encoding: pb.Encoding_PLAIN},
		},
		Metadata: map[string][]byte{"lance:ivf": []byte("1"), "distance_type": []byte(distance),
			"storage_metadata": list, "lance:sq": sqJSON},
		IVF:     &ipb.IVF{Offsets: []uint64{0}, Lengths: []uint32{uint32(n)}},
		RowIDs:  append([]uint64(nil), v.Addrs...),
		Columns: []*file.Array{fslU8(codes, dim)},
	}

	// The graph is built on the raw vectors, as LanceDB's in-memory index
	// is before the flush quantizes them.
	raw := &vectors{dim: dim, data: v.Data, dist: distanceFunc(distance)}
	params := HNSWParams{MaxLevel: GenerationMaxLevel, M: GenerationM, EfConstruction: GenerationEfConstruction, PrefetchDistance: generationPrefetch}
	g := buildGraph(raw, n, GenerationM, GenerationEfConstruction, GenerationMaxLevel, graphSeed, false)
	vid, nbrs, dists, hm := graphRows(g, params)
	zero := make([]byte, 4*dim)
	fullzip := map[string][]byte{"lance-encoding:structural-encoding": []byte("fullzip")}
	x := &SubIndex{
		Type: TypeIVFHNSWSQ, Distance: distance,
		Fields:   hnswFields(fullzip),
		Metadata: map[string][]byte{},
		IVF: &ipb.IVF{
			CentroidsTensor: &ipb.Tensor{DataType: ipb.Tensor_FLOAT32, Shape: []uint32{1, uint32(dim)}, Data: zero},
			Offsets:         []uint64{0}, Lengths: []uint32{uint32(len(vid))},
		},
		Columns: hnswColumns(vid, nbrs, dists),
		HNSW:    []HNSWMeta{hm},
	}
	return x, s, nil
}

// WriteGenerationCopy writes BuildGenerationCopy's segment under dir of b
// (a generation's bucket): index.idx and auxiliary.idx. It returns the
// files and the objects written (also on error, for cleanup).
func WriteGenerationCopy(ctx context.Context, b storage.Bucket, dir string, v *Vectors, distance string) ([]*pb.IndexFile, []string, error) {
	x, s, err := BuildGenerationCopy(v, distance)
	if err != nil {
		return nil, nil, err
	}
	var buf bytes.Buffer
	if _, err := WriteSubIndex(&buf, x); err != nil {
		return nil, nil, err
	}
	return writeSegmentFiles(ctx, b, dir, buf.Bytes(), s)
}
