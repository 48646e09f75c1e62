package vector

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	ipb "github.com/compactord/compactord/gen/lanceindexpb"
)

// TypeURLDetails is the type URL of a vector index's index_details.
const TypeURLDetails = "/lance.index.pb.VectorIndexDetails"

// ErrFormat is wrapped by every error that blames an index's contents.
var ErrFormat = errors.New("vector index")

// ErrUnsupported is wrapped by every refusal of a well-formed index that
// compactord does not handle (an unknown type, quantizer or version).
var ErrUnsupported = errors.New("vector index not supported")

func formatErr(f string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrFormat, fmt.Sprintf(f, a...))
}

func unsupported(f string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrUnsupported, fmt.Sprintf(f, a...))
}

// Quantizers of the vector storage.
const (
	QuantFlat = "flat"
	QuantPQ   = "pq"
	QuantSQ   = "sq"
	QuantRQ   = "rq"
)

// Index types as lance:index names them.
const (
	TypeIVFFlat    = "IVF_FLAT"
	TypeIVFPQ      = "IVF_PQ"
	TypeIVFSQ      = "IVF_SQ"
	TypeIVFRQ      = "IVF_RQ"
	TypeIVFHNSWSQ  = "IVF_HNSW_SQ"
	TypeIVFHNSWPQ  = "IVF_HNSW_PQ"
	TypeIVFHNSWFlt = "IVF_HNSW_FLAT"
)

// typeParts are each index type's sub-index (hnsw or not) and quantizer.
var typeParts = map[string]struct {
	hnsw  bool
	quant string
}{
	TypeIVFFlat:    {false, QuantFlat},
	TypeIVFPQ:      {false, QuantPQ},
	TypeIVFSQ:      {false, QuantSQ},
	TypeIVFRQ:      {false, QuantRQ},
	TypeIVFHNSWSQ:  {true, QuantSQ},
	TypeIVFHNSWPQ:  {true, QuantPQ},
	TypeIVFHNSWFlt: {true, QuantFlat},
}

// Distance types as the files name them.
var distanceTypes = map[string]ipb.VectorMetricType{
	"l2": ipb.VectorMetricType_L2, "cosine": ipb.VectorMetricType_Cosine,
	"dot": ipb.VectorMetricType_Dot, "hamming": ipb.VectorMetricType_Hamming,
}

// DecodeDetails decodes a vector index's index_details.
func DecodeDetails(a *anypb.Any) (*ipb.VectorIndexDetails, error) {
	if a == nil || a.GetTypeUrl() != TypeURLDetails {
		return nil, unsupported("index details of type %q, not %s", a.GetTypeUrl(), TypeURLDetails)
	}
	d := &ipb.VectorIndexDetails{}
	if err := proto.Unmarshal(a.GetValue(), d); err != nil {
		return nil, formatErr("index details: %v", err)
	}
	if _, ok := ipb.VectorMetricType_name[int32(d.GetMetricType())]; !ok {
		return nil, unsupported("metric type %d", d.GetMetricType())
	}
	return d, nil
}

// DetailsType is the index type the details describe ("" when the details
// name no compression: an index older than the details message, whose type
// only its files tell).
func DetailsType(d *ipb.VectorIndexDetails) string {
	hnsw := d.GetHnsw() != nil
	switch d.GetCompression().(type) {
	case *ipb.VectorIndexDetails_Pq:
		if hnsw {
			return TypeIVFHNSWPQ
		}
		return TypeIVFPQ
	case *ipb.VectorIndexDetails_Sq:
		if hnsw {
			return TypeIVFHNSWSQ
		}
		return TypeIVFSQ
	case *ipb.VectorIndexDetails_Rq:
		return TypeIVFRQ
	case *ipb.VectorIndexDetails_Flat:
		if hnsw {
			return TypeIVFHNSWFlt
		}
		return TypeIVFFlat
	}
	return ""
}

// CheckIndexVersion refuses an index_version this package does not read:
// 1 for every kind but IVF_RQ, which LanceDB writes as 2.
func CheckIndexVersion(typ string, version int32) error {
	want := int32(1)
	if typ == TypeIVFRQ {
		want = 2
	}
	if version != want {
		return unsupported("%s index version %d (compactord reads %d)", typ, version, want)
	}
	return nil
}

// decodeIVF decodes an IVF message and checks that its partitions are
// consistent: as many lengths as offsets, and (when centroids is true) a
// float16, float32, float64 or (hamming) uint8 [P, dim] centroids tensor.
func decodeIVF(b []byte, centroids bool) (*ipb.IVF, error) {
	ivf := &ipb.IVF{}
	if err := proto.Unmarshal(b, ivf); err != nil {
		return nil, formatErr("IVF: %v", err)
	}
	if len(ivf.GetOffsets()) != len(ivf.GetLengths()) {
		return nil, formatErr("IVF has %d offsets and %d lengths", len(ivf.GetOffsets()), len(ivf.GetLengths()))
	}
	if !centroids {
		return ivf, nil
	}
	t := ivf.GetCentroidsTensor()
	if t == nil {
		return nil, formatErr("IVF has no centroids tensor")
	}
	w := tensorWidth(t.GetDataType())
	if w == 0 {
		return nil, unsupported("IVF centroids of type %s", t.GetDataType())
	}
	if len(t.GetShape()) != 2 || int(t.GetShape()[0]) != len(ivf.GetLengths()) || t.GetShape()[1] == 0 {
		return nil, formatErr("IVF centroids of shape %v for %d partitions", t.GetShape(), len(ivf.GetLengths()))
	}
	if uint64(len(t.GetData())) != uint64(w)*uint64(t.GetShape()[0])*uint64(t.GetShape()[1]) {
		return nil, formatErr("IVF centroids hold %d bytes, shape %v", len(t.GetData()), t.GetShape())
	}
	return ivf, nil
}

// checkPartitions checks that the partitions of ivf are contiguous, in
// order, and cover exactly rows rows.
func checkPartitions(ivf *ipb.IVF, rows uint64, what string) error {
	var at uint64
	for p, off := range ivf.GetOffsets() {
		if off != at {
			return formatErr("%s: partition %d starts at row %d, want %d", what, p, off, at)
		}
		at += uint64(ivf.GetLengths()[p])
	}
	if at != rows {
		return formatErr("%s: partitions hold %d rows, the file %d", what, at, rows)
	}
	return nil
}

func encodeIVF(ivf *ipb.IVF) ([]byte, error) {
	return proto.MarshalOptions{Deterministic: true}.Marshal(ivf)
}

func encodeTensor(t *ipb.Tensor) ([]byte, error) {
	return proto.MarshalOptions{Deterministic: true}.Marshal(t)
}
