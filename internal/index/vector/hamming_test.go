package vector

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	ipb "github.com/compactord/compactord/gen/lanceindexpb"
	"github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/format/file"
)

// synthHamming is a hamming IVF_FLAT segment (dim 2 bytes, 2 partitions
// of 2 and 1 rows) built without LanceDB: centroids 0x0000 and 0xffff.
func synthHamming(t testing.TB) (*Storage, *SubIndex) {
	t.Helper()
	s := &Storage{
		Quantizer: QuantFlat, Distance: "hamming",
		Fields: []*lancepb.Field{
			{Name: colRowID, Id: 0, ParentId: -1, LogicalType: "uint64", Nullable: true},
			{Name: colFlat, Id: 1, ParentId: -1, LogicalType: "fixed_size_list:uint8:2"},
		},
		Metadata: map[string][]byte{"distance_type": []byte("hamming"), "lance:ivf": []byte("1"), "storage_metadata": []byte(`["{\"dim\":2}"]`)},
		IVF:      &ipb.IVF{Offsets: []uint64{0, 2}, Lengths: []uint32{2, 1}},
		RowIDs:   []uint64{4, 1<<32 | 2, 9},
		Columns:  []*file.Array{fslU8([]byte{0x01, 0x00, 0x10, 0x01, 0xfe, 0xff}, 2)},
	}
	x := &SubIndex{
		Type: TypeIVFFlat, Distance: "hamming",
		Fields:   []*lancepb.Field{{Name: "__flat_marker", Id: 0, ParentId: -1, LogicalType: "uint64"}},
		Metadata: map[string][]byte{},
		IVF: &ipb.IVF{Offsets: []uint64{0, 0}, Lengths: []uint32{0, 0},
			CentroidsTensor: &ipb.Tensor{DataType: ipb.Tensor_UINT8, Shape: []uint32{2, 2}, Data: []byte{0, 0, 0xff, 0xff}}},
		Columns: []*file.Array{{Type: file.DataType{Kind: file.KindUint64}}},
	}
	return s, x
}

func encodeSynthHamming(t testing.TB) (storage, sub []byte) {
	t.Helper()
	s, x := synthHamming(t)
	var sb, xb bytes.Buffer
	if _, err := WriteStorage(&sb, s); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteSubIndex(&xb, x); err != nil {
		t.Fatal(err)
	}
	return sb.Bytes(), xb.Bytes()
}

// TestHammingEncode: a hamming segment reads back with its uint8
// centroids and vectors, and Encode puts each new row at the centroid of
// fewest differing bits, the first on a tie (0x0f0f is 8 bits from both),
// storing its bytes.
func TestHammingEncode(t *testing.T) {
	sb, xb := encodeSynthHamming(t)
	s, x := decodeSegment(t, sb, xb)
	if got := s.Columns[0].Children[0].Values; !bytes.Equal(got, []byte{0x01, 0x00, 0x10, 0x01, 0xfe, 0xff}) {
		t.Fatalf("stored vectors %x", got)
	}
	v := &Vectors{Dim: 2, Addrs: []uint64{1, 2, 3}, Data: []float32{0x0f, 0x0f, 0xf7, 0xff, 0x80, 0x00}}
	ns, err := (&Segment{Index: x, Storage: s}).Encode(v)
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint64]place{1: {0, "\x0f\x0f"}, 2: {1, "\xf7\xff"}, 3: {0, "\x80\x00"}}
	got := rowPlaces(ns)
	for a, w := range want {
		if got[a] != w {
			t.Errorf("row %d: %+v, want %+v", a, got[a], w)
		}
	}
	var out bytes.Buffer
	if _, err := WriteStorage(&out, ns); err != nil {
		t.Fatal(err)
	}
}

// TestHammingTypesChecked: centroids and storage must be binary exactly
// when the distance is hamming; anything else is a one-line format error.
func TestHammingTypesChecked(t *testing.T) {
	_, x := synthHamming(t)
	x.Distance = "l2"
	var xb bytes.Buffer
	if _, err := WriteSubIndex(&xb, x); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSubIndex(bytes.NewReader(xb.Bytes()), int64(xb.Len())); !errors.Is(err, ErrFormat) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("an l2 index with uint8 centroids: %v", err)
	}
	_, px := synthPQ(t)
	px.Distance = "hamming"
	xb.Reset()
	if _, err := WriteSubIndex(&xb, px); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSubIndex(bytes.NewReader(xb.Bytes()), int64(xb.Len())); !errors.Is(err, ErrFormat) {
		t.Fatalf("a hamming index with float32 centroids: %v", err)
	}
	s, _ := synthHamming(t)
	s.Metadata["distance_type"] = []byte("l2")
	var sb bytes.Buffer
	if _, err := WriteStorage(&sb, s); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadStorage(bytes.NewReader(sb.Bytes()), int64(sb.Len())); !errors.Is(err, ErrFormat) {
		t.Fatalf("l2 FLAT storage of uint8 vectors: %v", err)
	}
}

// TestHammingRefusal: hamming details of any type but IVF_FLAT are
// refused (LanceDB builds no other).
func TestHammingRefusal(t *testing.T) {
	flat := &ipb.VectorIndexDetails{MetricType: ipb.VectorMetricType_Hamming, Compression: &ipb.VectorIndexDetails_Flat{Flat: &ipb.FlatCompression{}}}
	if why := Refusal(flat); why != "" {
		t.Fatalf("hamming IVF_FLAT refused: %s", why)
	}
	pq := &ipb.VectorIndexDetails{MetricType: ipb.VectorMetricType_Hamming, Compression: &ipb.VectorIndexDetails_Pq{Pq: &ipb.ProductQuantization{NumBits: 8, NumSubVectors: 2}}}
	if why := Refusal(pq); !strings.Contains(why, "IVF_FLAT only, not IVF_PQ") {
		t.Fatalf("hamming IVF_PQ: %q", why)
	}
}

// TestHammingRefusesOtherVectors: vectors that are not bytes (a column
// whose type changed under its index) are a one-line error, not codes.
func TestHammingRefusesOtherVectors(t *testing.T) {
	s, x := synthHamming(t)
	_, err := (&Segment{Index: x, Storage: s}).Encode(&Vectors{Dim: 2, Addrs: []uint64{1}, Data: []float32{0.5, 3}})
	if !errors.Is(err, ErrFormat) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Encode of float vectors under a hamming index: %v", err)
	}
}
