package vector

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"

	ipb "github.com/compactord/compactord/gen/lanceindexpb"
	"github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/format/file"
)

// synthPQ is a small PQ storage and FLAT sub-index (dim 4, 2 sub-vectors,
// 2 partitions of 3 and 2 rows) built without LanceDB.
func synthPQ(t testing.TB) (*Storage, *SubIndex) {
	t.Helper()
	const dim, m = 4, 2
	cb := make([]byte, 0, 4*256*dim)
	for i := range 256 * dim {
		cb = binary.LittleEndian.AppendUint32(cb, uint32(i))
	}
	tensor, err := encodeTensor(&ipb.Tensor{DataType: ipb.Tensor_FLOAT32, Shape: []uint32{256, m, dim / m}, Data: cb})
	if err != nil {
		t.Fatal(err)
	}
	s := pqStorage(dim, m, tensor, &ipb.IVF{Offsets: []uint64{0, 3}, Lengths: []uint32{3, 2}},
		[]uint64{7, 1 << 32, 3, 2<<32 | 5, 9}, []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
	cent := make([]byte, 0, 4*2*dim)
	for i := range 2 * dim {
		cent = binary.LittleEndian.AppendUint32(cent, uint32(i))
	}
	x := &SubIndex{
		Type: TypeIVFPQ, Distance: "l2",
		Fields:   []*lancepb.Field{{Name: "__flat_marker", Id: 0, ParentId: -1, LogicalType: "uint64"}},
		Metadata: map[string][]byte{},
		IVF: &ipb.IVF{Offsets: []uint64{0, 0}, Lengths: []uint32{0, 0},
			CentroidsTensor: &ipb.Tensor{DataType: ipb.Tensor_FLOAT32, Shape: []uint32{2, dim}, Data: cent}},
		Columns: []*file.Array{{Type: file.DataType{Kind: file.KindUint64}}},
	}
	return s, x
}

func encodeSynth(t testing.TB) (storage, sub []byte) {
	s, x := synthPQ(t)
	var sb, xb bytes.Buffer
	if _, err := WriteStorage(&sb, s); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteSubIndex(&xb, x); err != nil {
		t.Fatal(err)
	}
	return sb.Bytes(), xb.Bytes()
}

// TestSynthPQRoundTrip checks the transposition on a storage whose codes
// are known: partition 0's three rows (1,2),(3,4),(5,6) are stored as
// 1,3,5,2,4,6.
func TestSynthPQRoundTrip(t *testing.T) {
	sb, _ := encodeSynth(t)
	f, err := file.Open(bytes.NewReader(sb), int64(len(sb)))
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.ReadAll([]string{colPQ})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := b.Columns[0].Children[0].Values, []byte{1, 3, 5, 2, 4, 6, 7, 9, 8, 10}; !bytes.Equal(got, want) {
		t.Fatalf("stored codes %v, want %v", got, want)
	}
	s, err := ReadStorage(bytes.NewReader(sb), int64(len(sb)))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.Columns[0].Children[0].Values, []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}; !bytes.Equal(got, want) {
		t.Fatalf("decoded codes %v, want %v", got, want)
	}
	if s.PQ.Codebook[5] != math.Float32frombits(5) {
		t.Fatalf("codebook[5] = %v", s.PQ.Codebook[5])
	}
}

// TestTruncatedFiles: every truncation of either file is a one-line error.
func TestTruncatedFiles(t *testing.T) {
	sb, xb := encodeSynth(t)
	for cut := 0; cut < len(sb); cut += 7 {
		if _, err := ReadStorage(bytes.NewReader(sb[:cut]), int64(cut)); err == nil || bytes.ContainsRune([]byte(err.Error()), '\n') {
			t.Fatalf("storage cut at %d: %v", cut, err)
		}
	}
	for cut := 0; cut < len(xb); cut += 7 {
		if _, err := ReadSubIndex(bytes.NewReader(xb[:cut]), int64(cut)); err == nil || bytes.ContainsRune([]byte(err.Error()), '\n') {
			t.Fatalf("sub-index cut at %d: %v", cut, err)
		}
	}
}

// TestUnknownTypeRefused: an index type compactord does not know is
// refused as unsupported, not guessed.
func TestUnknownTypeRefused(t *testing.T) {
	_, x := synthPQ(t)
	x.Type = "IVF_DISKANN"
	var xb bytes.Buffer
	if _, err := WriteSubIndex(&xb, x); err != nil {
		t.Fatal(err)
	}
	_, err := ReadSubIndex(bytes.NewReader(xb.Bytes()), int64(xb.Len()))
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("unknown type read: %v", err)
	}
}

func FuzzReadStorage(f *testing.F) {
	sb, _ := encodeSynth(f)
	f.Add(sb)
	f.Add(encodeSynthRQ(f))
	f.Add(encodeSynthPQ4(f))
	hs, _ := encodeSynthHamming(f)
	f.Add(hs)
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ReadStorage(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return
		}
		var out bytes.Buffer
		_, _ = WriteStorage(&out, s)
	})
}

func FuzzReadSubIndex(f *testing.F) {
	_, xb := encodeSynth(f)
	f.Add(xb)
	f.Add(encodeSynthF16Index(f))
	_, hx := encodeSynthHamming(f)
	f.Add(hx)
	f.Fuzz(func(t *testing.T, b []byte) {
		x, err := ReadSubIndex(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return
		}
		var out bytes.Buffer
		_, _ = WriteSubIndex(&out, x)
	})
}

// pqStorage is an l2 storage of 8-bit PQ codes (m sub-vectors of
// dim-d vectors, codebook the encoded tensor; transposed as LanceDB
// stores them), rows ids and their row-major codes in ivf's partitions.
func pqStorage(dim, m int, codebook []byte, ivf *ipb.IVF, ids []uint64, codes []byte) *Storage {
	return &Storage{
		Quantizer: QuantPQ, Distance: "l2",
		Fields: []*lancepb.Field{
			{Name: colRowID, Id: 0, ParentId: -1, LogicalType: "uint64", Nullable: true},
			{Name: colPQ, Id: 1, ParentId: -1, LogicalType: fmt.Sprintf("fixed_size_list:uint8:%d", m), Nullable: true},
		},
		Metadata: map[string][]byte{
			"distance_type": []byte("l2"),
			"lance:ivf":     []byte("1"),
			"storage_metadata": []byte(fmt.Sprintf(`["{\"codebook_position\":2,\"nbits\":8,\"num_sub_vectors\":%d,\"dimension\":%d,\"codebook_tensor\":[],\"transposed\":true}"]`,
				m, dim)),
		},
		IVF: ivf, Extra: [][]byte{codebook}, RowIDs: ids,
		Columns: []*file.Array{fslU8(codes, m)},
		PQ:      &PQParams{CodebookPosition: 2, NBits: 8, NumSubVectors: m, Dimension: dim, Transposed: true},
	}
}

// decodeSegment reads a segment's auxiliary.idx (sb) and index.idx (xb).
func decodeSegment(t testing.TB, sb, xb []byte) (*Storage, *SubIndex) {
	t.Helper()
	s, err := ReadStorage(bytes.NewReader(sb), int64(len(sb)))
	if err != nil {
		t.Fatal(err)
	}
	x, err := ReadSubIndex(bytes.NewReader(xb), int64(len(xb)))
	if err != nil {
		t.Fatal(err)
	}
	return s, x
}

// encodeSynthPQ4 is a small 4-bit PQ storage (dim 4, 2 sub-vectors, one
// byte of two codes a row; partitions of 3 and 2 rows).
func encodeSynthPQ4(t testing.TB) []byte {
	t.Helper()
	const dim, m = 4, 2
	cb := make([]byte, 0, 4*16*dim)
	for i := range 16 * dim {
		cb = binary.LittleEndian.AppendUint32(cb, math.Float32bits(float32(i)))
	}
	tensor, err := encodeTensor(&ipb.Tensor{DataType: ipb.Tensor_FLOAT32, Shape: []uint32{16, m, dim / m}, Data: cb})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := synthPQ(t)
	s.Fields[1].LogicalType = "fixed_size_list:uint8:1"
	s.Metadata["storage_metadata"] = []byte(`["{\"codebook_position\":2,\"nbits\":4,\"num_sub_vectors\":2,\"dimension\":4,\"codebook_tensor\":[],\"transposed\":true}"]`)
	s.Extra = [][]byte{tensor}
	s.Columns = []*file.Array{fslU8([]byte{0x21, 0x43, 0x65, 0x87, 0xa9}, 1)}
	s.PQ = &PQParams{CodebookPosition: 2, NBits: 4, NumSubVectors: m, Dimension: dim, Transposed: true}
	var b bytes.Buffer
	if _, err := WriteStorage(&b, s); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestSynthPQ4RoundTrip: 4-bit codes are read back two a byte, sub-vector
// 0 in the low nibble.
func TestSynthPQ4RoundTrip(t *testing.T) {
	b := encodeSynthPQ4(t)
	s, err := ReadStorage(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	row := s.Columns[0].Children[0].Values[1:2]
	if s.PQ.codeBytes() != 1 || s.PQ.code(row, 0) != 3 || s.PQ.code(row, 1) != 4 || len(s.PQ.Codebook) != 16*4 {
		t.Fatalf("row 1: codes %d %d, %d code bytes, codebook of %d", s.PQ.code(row, 0), s.PQ.code(row, 1), s.PQ.codeBytes(), len(s.PQ.Codebook))
	}
}

// encodeSynthF16Index is synthPQ's sub-index with float16 centroids (the
// halves of 0..7), as LanceDB keeps an index over float16 vectors.
func encodeSynthF16Index(t testing.TB) []byte {
	t.Helper()
	_, x := synthPQ(t)
	cent := make([]byte, 0, 2*8)
	for i := range 8 {
		// float16 i/2: exponent and mantissa of small halves.
		cent = binary.LittleEndian.AppendUint16(cent, []uint16{0, 0x3800, 0x3c00, 0x3e00, 0x4000, 0x4100, 0x4200, 0x4300}[i])
	}
	x.IVF.CentroidsTensor = &ipb.Tensor{DataType: ipb.Tensor_FLOAT16, Shape: []uint32{2, 4}, Data: cent}
	var b bytes.Buffer
	if _, err := WriteSubIndex(&b, x); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestFloat16Centroids: float16 centroids decode to float32, and a tensor
// whose size does not fit its shape and type is refused.
func TestFloat16Centroids(t *testing.T) {
	b := encodeSynthF16Index(t)
	x, err := ReadSubIndex(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	c, dim := x.Centroids()
	if dim != 4 || len(c) != 8 || c[1] != 0.5 || c[7] != 3.5 {
		t.Fatalf("centroids %v (dim %d), want 0, 0.5, ..., 3.5", c, dim)
	}
	x.IVF.CentroidsTensor.Data = x.IVF.CentroidsTensor.Data[:14]
	var bad bytes.Buffer
	if _, err := WriteSubIndex(&bad, x); err == nil {
		if _, err := ReadSubIndex(bytes.NewReader(bad.Bytes()), int64(bad.Len())); err == nil {
			t.Fatal("a float16 tensor of 7 values for shape [2 4] was read")
		}
	}
}
