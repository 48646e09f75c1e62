package vector

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	ipb "github.com/compactord/compactord/gen/lanceindexpb"
	"github.com/compactord/compactord/gen/lancepb"
	"github.com/compactord/compactord/internal/format/file"
)

// TestRQPackLayout: a packed block puts the low nibbles of a code byte of
// rows rqPerm[j] and rqPerm[j]+16 in byte j and their high nibbles in
// byte j+16; rows after the last full block are column-major; unpacking
// inverts packing for every row count around the block size.
func TestRQPackLayout(t *testing.T) {
	const w = 2
	rows := make([]byte, 33*w)
	for r := range 33 {
		rows[r*w] = byte(r)        // row number in byte 0
		rows[r*w+1] = byte(r) << 4 // and in the high nibble of byte 1
	}
	p := packRQ(rows, 33, w)
	// Byte 0's block: byte 1 holds rows rqPerm[1]=8 (low) and 24 (high).
	if p[1] != 8|24<<4&0xf0 || p[16+1] != 8>>4|24&0xf0 {
		t.Fatalf("block bytes 1 and 17: %#x %#x", p[1], p[17])
	}
	// Byte 1's block starts at 32: its high half holds the row numbers'
	// low nibbles, from byte 1's high nibbles.
	if p[32+16+1] != 8|(24&0xf)<<4 {
		t.Fatalf("block of code byte 1, byte 17: %#x", p[32+17])
	}
	if p[64] != 32 || p[65] != 32<<4&0xff {
		t.Fatalf("remainder row: %x", p[64:])
	}
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 15, 31, 32, 33, 64, 65, 100} {
		for _, w := range []int{1, 2, 16} {
			rows := make([]byte, n*w)
			for i := range rows {
				rows[i] = byte(r.UintN(256))
			}
			if got := unpackRQ(packRQ(rows, n, w), n, w); !bytes.Equal(got, rows) {
				t.Fatalf("%d rows of %d bytes: unpack(pack) differs", n, w)
			}
		}
	}
}

// TestFastRotateIsOrthogonal: the rotation keeps norms and inner
// products (an orthogonal map), and differs from the identity.
func TestFastRotateIsOrthogonal(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, dim := range []int{8, 16, 128} {
		signs := make([]byte, rqRounds*dim/8)
		for i := range signs {
			signs[i] = byte(r.UintN(256))
		}
		a, b := make([]float32, dim), make([]float32, dim)
		for i := range a {
			a[i], b[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
		}
		var dot0 float64
		for i := range a {
			dot0 += float64(a[i]) * float64(b[i])
		}
		ra, rb := append([]float32(nil), a...), append([]float32(nil), b...)
		fastRotate(ra, signs)
		fastRotate(rb, signs)
		var dot1, moved float64
		for i := range ra {
			dot1 += float64(ra[i]) * float64(rb[i])
			moved += math.Abs(float64(ra[i] - a[i]))
		}
		if math.Abs(dot0-dot1) > 1e-3*math.Max(1, math.Abs(dot0)) || moved == 0 {
			t.Fatalf("dim %d: inner product %v became %v (moved %v)", dim, dot0, dot1, moved)
		}
	}
}

// FuzzRQPack: any bytes unpack and pack back to themselves for every
// row count and width that divides them.
func FuzzRQPack(f *testing.F) {
	f.Add([]byte{1, 2, 3}, uint8(1))
	f.Add(bytes.Repeat([]byte{0xa5, 0x3c}, 40), uint8(2))
	f.Fuzz(func(t *testing.T, b []byte, w uint8) {
		if w == 0 || len(b)%int(w) != 0 {
			return
		}
		n := len(b) / int(w)
		if got := packRQ(unpackRQ(b, n, int(w)), n, int(w)); !bytes.Equal(got, b) {
			t.Fatalf("pack(unpack) differs for %d rows of %d bytes", n, w)
		}
	})
}

// synthRQ is a small packed RQ storage (code_dim 16, partitions of 40 and
// 3 rows: one full block and remainders) built without LanceDB; row i's
// code is (i, 255-i), its factors i, 2i and 3i.
func synthRQ() *Storage {
	const n = 43
	codes := make([]byte, 0, 2*n)
	var add, scale, errf []byte
	ids := make([]uint64, n)
	for i := range n {
		codes = append(codes, byte(i), byte(255-i))
		add = binary.LittleEndian.AppendUint32(add, math.Float32bits(float32(i)))
		scale = binary.LittleEndian.AppendUint32(scale, math.Float32bits(float32(2*i)))
		errf = binary.LittleEndian.AppendUint32(errf, math.Float32bits(float32(3*i)))
		ids[i] = uint64(i%3)<<32 | uint64(i)
	}
	f32col := func(b []byte) *file.Array {
		return &file.Array{Type: file.DataType{Kind: file.KindFloat32}, Len: n, Values: b}
	}
	field := func(name, typ string, id int32) *lancepb.Field {
		return &lancepb.Field{Name: name, Id: id, ParentId: -1, LogicalType: typ, Nullable: true}
	}
	return &Storage{
		Quantizer: QuantRQ, Distance: "l2",
		Fields: []*lancepb.Field{field(colRowID, "uint64", 0), field(colRQ, "fixed_size_list:uint8:2", 1),
			field(colRQAdd, "float", 2), field(colRQScale, "float", 3), field(colRQErr, "float", 4)},
		Metadata: map[string][]byte{
			"distance_type":    []byte("l2"),
			"lance:ivf":        []byte("1"),
			"storage_metadata": []byte(`["{\"rotate_mat_position\":null,\"fast_rotation_signs\":[1,2,3,4,5,6,7,8],\"rotation_type\":\"fast\",\"code_dim\":16,\"num_bits\":1,\"packed\":true,\"query_estimator\":\"raw_query\"}"]`),
		},
		IVF:     &ipb.IVF{Offsets: []uint64{0, 40}, Lengths: []uint32{40, 3}},
		RowIDs:  ids,
		Columns: []*file.Array{fslU8(codes, 2), f32col(add), f32col(scale), f32col(errf)},
		RQ:      &RQParams{RotationType: "fast", CodeDim: 16, NumBits: 1, Packed: true, FastRotationSigns: []int{1, 2, 3, 4, 5, 6, 7, 8}, QueryEstimator: "raw_query"},
	}
}

func encodeSynthRQ(t testing.TB) []byte {
	var b bytes.Buffer
	if _, err := WriteStorage(&b, synthRQ()); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestSynthRQRoundTrip: RQ storage is written packed per partition and
// read back to the same rows; a remap that drops rows keeps each kept
// row's code and factors.
func TestSynthRQRoundTrip(t *testing.T) {
	b := encodeSynthRQ(t)
	s, err := ReadStorage(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	want := synthRQ()
	if !slices.Equal(s.RowIDs, want.RowIDs) || !bytes.Equal(s.Columns[0].Children[0].Values, want.Columns[0].Children[0].Values) {
		t.Fatal("RQ storage differs after a round trip")
	}
	r, st, _ := RemapStorage(s, func(a uint64) (uint64, bool) { return a + 1, a%2 == 0 })
	if st.Kept != len(r.RowIDs) || r.IVF.GetLengths()[0]+r.IVF.GetLengths()[1] != uint32(st.Kept) {
		t.Fatalf("remap: %+v lengths %v", st, r.IVF.GetLengths())
	}
	var out bytes.Buffer
	if _, err := WriteStorage(&out, r); err != nil {
		t.Fatal(err)
	}
	r2, err := ReadStorage(bytes.NewReader(out.Bytes()), int64(out.Len()))
	if err != nil {
		t.Fatal(err)
	}
	for k, a := range r2.RowIDs {
		i := int(uint32(a - 1))
		c := r2.Columns[0].Children[0].Values[2*k : 2*k+2]
		add := math.Float32frombits(binary.LittleEndian.Uint32(r2.Columns[1].Values[4*k:]))
		if c[0] != byte(i) || c[1] != byte(255-i) || add != float32(i) {
			t.Fatalf("remapped row %d (was %d): code %x add %v", k, i, c, add)
		}
	}
}
