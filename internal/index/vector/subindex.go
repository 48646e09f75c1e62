package vector

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	ipb "github.com/compactord/compactord/gen/lanceindexpb"
	"github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/format/file"
)

// HNSWParams are an HNSW graph's build parameters.
type HNSWParams struct {
	MaxLevel         int `json:"max_level"`
	M                int `json:"m"`
	EfConstruction   int `json:"ef_construction"`
	PrefetchDistance int `json:"prefetch_distance"`
}

// HNSWMeta is one partition's entry of lance:hnsw.
type HNSWMeta struct {
	EntryPoint   uint32     `json:"entry_point"`
	Params       HNSWParams `json:"params"`
	LevelOffsets []int      `json:"level_offsets"`
}

// SubIndex is a decoded index.idx.
type SubIndex struct {
	Type, Distance string
	// Fields and Metadata are the file's schema as read.
	Fields   []*lancepb.Field
	Metadata map[string][]byte
	// IVF holds the centroids and, for HNSW, the partitions' row ranges of
	// this file's graph rows.
	IVF   *ipb.IVF
	Extra [][]byte
	// Columns are the file's columns: the empty __flat_marker, or the HNSW
	// rows (__vector_id, __neighbors, _distance).
	Columns []*file.Array
	// HNSW is lance:hnsw, one entry per partition (nil for FLAT).
	HNSW []HNSWMeta
}

// IsHNSW reports whether the sub-index is an HNSW graph.
func (x *SubIndex) IsHNSW() bool { return typeParts[x.Type].hnsw }

// Quantizer is the storage quantizer the index type implies.
func (x *SubIndex) Quantizer() string { return typeParts[x.Type].quant }

// Centroids returns the IVF centroids, row-major, and their dimension.
// (as float32 whatever the tensor's float type).
func (x *SubIndex) Centroids() ([]float32, int) {
	t := x.IVF.GetCentroidsTensor()
	return tensorFloats(t), int(t.GetShape()[1])
}

// ReadSubIndex decodes an index.idx of size bytes.
func ReadSubIndex(r io.ReaderAt, size int64) (*SubIndex, error) {
	return readSubIndex(r, size, true)
}

// readSubIndex is ReadSubIndex, without an HNSW index's graphs (its
// Columns nil; every metadata check still made) unless graphs is set:
// encoding new rows with a segment builds new graphs and needs only its
// centroids and parameters, and the graphs are most of the file (about
// 320 bytes a node at m 20).
func readSubIndex(r io.ReaderAt, size int64, graphs bool) (*SubIndex, error) {
	x, f, err := openSubIndex(r, size)
	if err != nil || !graphs || !x.IsHNSW() {
		return x, err
	}
	b, err := f.ReadAll(nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", IndexFile, err)
	}
	if err := checkGraphRows(b, int(f.NumRows())); err != nil {
		return nil, err
	}
	x.Columns = b.Columns
	return x, nil
}

// openSubIndex decodes and checks an index.idx's metadata (a FLAT
// sub-index whole) and returns the file, from which an HNSW sub-index's
// graph rows are read, all at once or a partition at a time.
func openSubIndex(r io.ReaderAt, size int64) (*SubIndex, *file.File, error) {
	f, err := file.Open(r, size)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", IndexFile, err)
	}
	x := &SubIndex{Fields: f.Desc.GetSchema().GetFields(), Metadata: f.Desc.GetSchema().GetMetadata()}
	var li struct {
		Type     string `json:"type"`
		Distance string `json:"distance_type"`
	}
	raw, ok := x.Metadata["lance:index"]
	if !ok {
		// Lance's first vector layouts kept everything in one file with a
		// protobuf footer; LanceDB 0.39 writes none of them.
		return nil, nil, unsupported("%s has no lance:index metadata (a legacy vector index layout)", IndexFile)
	}
	if err := json.Unmarshal(raw, &li); err != nil {
		return nil, nil, formatErr("%s: lance:index: %v", IndexFile, err)
	}
	if _, ok := typeParts[li.Type]; !ok {
		return nil, nil, unsupported("%s: index type %q", IndexFile, li.Type)
	}
	if _, ok := distanceTypes[li.Distance]; !ok {
		return nil, nil, unsupported("%s: distance type %q", IndexFile, li.Distance)
	}
	x.Type, x.Distance = li.Type, li.Distance
	if string(x.Metadata["lance:ivf"]) != "1" {
		return nil, nil, unsupported("%s: lance:ivf %q (compactord reads \"1\")", IndexFile, x.Metadata["lance:ivf"])
	}
	if len(f.Globals) < 2 {
		return nil, nil, formatErr("%s has no IVF global buffer", IndexFile)
	}
	gb, err := f.GlobalBuffer(1)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", IndexFile, err)
	}
	if x.IVF, err = decodeIVF(gb, true); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", IndexFile, err)
	}
	if binary := x.IVF.GetCentroidsTensor().GetDataType() == ipb.Tensor_UINT8; binary != (x.Distance == "hamming") {
		return nil, nil, formatErr("%s: a %s index with %s centroids", IndexFile, x.Distance, x.IVF.GetCentroidsTensor().GetDataType())
	}
	for i := 2; i < len(f.Globals); i++ {
		b, err := f.GlobalBuffer(i)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", IndexFile, err)
		}
		x.Extra = append(x.Extra, b)
	}
	parts := len(x.IVF.GetLengths())
	fs := f.Schema.Fields
	if !x.IsHNSW() {
		var flat []string
		if err := json.Unmarshal(x.Metadata["lance:flat"], &flat); err != nil || len(flat) != parts {
			return nil, nil, formatErr("%s: lance:flat is not a list of %d entries", IndexFile, parts)
		}
		if len(fs) != 1 || fs[0].Name != "__flat_marker" || f.NumRows() != 0 {
			return nil, nil, formatErr("%s: a FLAT sub-index is one empty __flat_marker column", IndexFile)
		}
		b, err := f.ReadAll(nil)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", IndexFile, err)
		}
		x.Columns = b.Columns
		return x, f, nil
	}
	if err := checkPartitions(x.IVF, f.NumRows(), IndexFile); err != nil {
		return nil, nil, err
	}
	var hs []string
	if err := json.Unmarshal(x.Metadata["lance:hnsw"], &hs); err != nil || len(hs) != parts {
		return nil, nil, formatErr("%s: lance:hnsw is not a list of %d entries", IndexFile, parts)
	}
	for p, h := range hs {
		var hm HNSWMeta
		if err := json.Unmarshal([]byte(h), &hm); err != nil {
			return nil, nil, formatErr("%s: lance:hnsw partition %d: %v", IndexFile, p, err)
		}
		n := int(x.IVF.GetLengths()[p])
		if hm.Params.MaxLevel < 0 || hm.Params.MaxLevel > 64 || len(hm.LevelOffsets) != hm.Params.MaxLevel+1 {
			return nil, nil, formatErr("%s: partition %d has %d level offsets for max level %d", IndexFile, p, len(hm.LevelOffsets), hm.Params.MaxLevel)
		}
		prev := 0
		for _, o := range hm.LevelOffsets {
			if o < prev || o > n {
				return nil, nil, formatErr("%s: partition %d level offsets %v outside its %d rows", IndexFile, p, hm.LevelOffsets, n)
			}
			prev = o
		}
		x.HNSW = append(x.HNSW, hm)
	}
	if len(fs) != 3 || fs[0].Name != "__vector_id" || fs[1].Name != "__neighbors" || fs[2].Name != "_distance" {
		return nil, nil, formatErr("%s: HNSW columns are not __vector_id, __neighbors, _distance", IndexFile)
	}
	return x, f, nil
}

// checkGraphRows checks that b holds n rows of HNSW graph columns
// (__vector_id u32, __neighbors list<u32>, _distance list<f32>).
func checkGraphRows(b *file.Batch, n int) error {
	for i, c := range b.Columns {
		if c == nil || c.Len != n {
			return formatErr("%s: column %d does not hold %d rows", IndexFile, i, n)
		}
	}
	if len(b.Columns) != 3 || b.Columns[0].Type.Kind != file.KindUint32 || !listOf(b.Columns[1], file.KindUint32) || !listOf(b.Columns[2], file.KindFloat32) {
		return formatErr("%s: HNSW columns of types %s", IndexFile, columnTypes(b.Columns))
	}
	return nil
}

func columnTypes(cs []*file.Array) string {
	var ts []string
	for _, c := range cs {
		ts = append(ts, fmt.Sprint(c.Type))
	}
	return strings.Join(ts, ", ")
}

func listOf(a *file.Array, k file.Kind) bool {
	return a.Type.Kind == file.KindList && len(a.Children) == 1 && a.Children[0].Type.Kind == k && len(a.Offsets) == a.Len+1
}

// WriteSubIndex encodes x as an index.idx and returns its size.
func WriteSubIndex(w io.Writer, x *SubIndex) (int64, error) {
	md, globals, err := x.fileMeta()
	if err != nil {
		return 0, err
	}
	return writeFile(w, x.Fields, md, globals, x.Columns)
}

// fileMeta is the schema metadata and global buffers of x's index.idx.
func (x *SubIndex) fileMeta() (map[string][]byte, [][]byte, error) {
	md := make(map[string][]byte, len(x.Metadata)+3)
	for k, v := range x.Metadata {
		md[k] = v
	}
	li, err := json.Marshal(map[string]string{"type": x.Type, "distance_type": x.Distance})
	if err != nil {
		return nil, nil, err
	}
	md["lance:index"] = li
	md["lance:ivf"] = []byte("1")
	if x.IsHNSW() {
		var hs []string
		for _, h := range x.HNSW {
			b, err := json.Marshal(h)
			if err != nil {
				return nil, nil, err
			}
			hs = append(hs, string(b))
		}
		if md["lance:hnsw"], err = json.Marshal(hs); err != nil {
			return nil, nil, err
		}
	} else {
		flat := make([]string, len(x.IVF.GetLengths()))
		if md["lance:flat"], err = json.Marshal(flat); err != nil {
			return nil, nil, err
		}
	}
	ivf, err := encodeIVF(x.IVF)
	if err != nil {
		return nil, nil, err
	}
	return md, append([][]byte{ivf}, x.Extra...), nil
}
