package vector

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	ipb "github.com/compactord/compactord/gen/lanceindexpb"
	"github.com/compactord/compactord/internal/format/file"
)

// synthHNSWSegment is the two files of an IVF_HNSW_PQ segment (8-d
// vectors, 4 sub-vectors of 8 bits, l2) of len(sizes) partitions, sizes[p]
// rows in partition p, whose graphs compactord built: row i of partition p
// has address p<<32 | i.
func synthHNSWSegment(t testing.TB, sizes []int) (index, aux []byte) {
	t.Helper()
	const dim, m = 8, 4
	r := rand.New(rand.NewPCG(5, uint64(len(sizes))))
	floats := func(n int) []byte {
		b := make([]byte, 0, 4*n)
		for range n {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(r.NormFloat64())))
		}
		return b
	}
	cb, err := encodeTensor(&ipb.Tensor{DataType: ipb.Tensor_FLOAT32, Shape: []uint32{256, m, dim / m}, Data: floats(256 * dim)})
	if err != nil {
		t.Fatal(err)
	}
	parts := len(sizes)
	ivf := &ipb.IVF{Offsets: make([]uint64, parts), Lengths: make([]uint32, parts)}
	var ids []uint64
	var codes []byte
	for p, n := range sizes {
		ivf.Offsets[p], ivf.Lengths[p] = uint64(len(ids)), uint32(n)
		for i := range n {
			ids = append(ids, uint64(p)<<32|uint64(i))
			for range m {
				codes = append(codes, byte(r.IntN(256)))
			}
		}
	}
	s := pqStorage(dim, m, cb, ivf, ids, codes)
	var sb bytes.Buffer
	if _, err := WriteStorage(&sb, s); err != nil {
		t.Fatal(err)
	}
	// Read back, as a remap reads it: the codebook decoded.
	if s, err = ReadStorage(bytes.NewReader(sb.Bytes()), int64(sb.Len())); err != nil {
		t.Fatal(err)
	}
	x := &SubIndex{
		Type: TypeIVFHNSWPQ, Distance: "l2",
		Fields:   hnswFields(nil),
		Metadata: map[string][]byte{},
		IVF: &ipb.IVF{Offsets: make([]uint64, parts), Lengths: make([]uint32, parts),
			CentroidsTensor: &ipb.Tensor{DataType: ipb.Tensor_FLOAT32, Shape: []uint32{uint32(parts), dim}, Data: floats(parts * dim)}},
		HNSW: make([]HNSWMeta, parts),
	}
	for p := range x.HNSW {
		x.HNSW[p].Params = HNSWParams{MaxLevel: 3, M: 6, EfConstruction: 24}
	}
	touched := make([]bool, parts)
	for p := range touched {
		touched[p] = true
	}
	if x, err = RebuildGraphs(x, s, touched); err != nil {
		t.Fatal(err)
	}
	var xb bytes.Buffer
	if _, err := WriteSubIndex(&xb, x); err != nil {
		t.Fatal(err)
	}
	return xb.Bytes(), sb.Bytes()
}

// TestRemapGraphStreamIsWholeRemap: remapping an HNSW segment a
// partition at a time writes what the whole-segment remap writes (every
// row address, code, graph list and distance, the partitions and
// lance:hnsw), for a partition whose graph is repaired, one kept, one
// rebuilt (70 % deleted), one emptied and one empty; and it holds at most
// the largest partition's working memory at once.
func TestRemapGraphStreamIsWholeRemap(t *testing.T) {
	sizes := []int{400, 300, 350, 120, 0}
	xb, sb := synthHNSWSegment(t, sizes)
	remap := func(a uint64) (uint64, bool) {
		p, i := a>>32, a&0xffffffff
		switch p {
		case 0:
			return 9<<32 | i, i%5 != 2 // 20 % dropped: repaired
		case 2:
			return a, i%10 < 3 // 70 % dropped: rebuilt
		case 3:
			return 0, false // all dropped
		}
		return a, true
	}

	// The whole-segment remap, as compactord did it before.
	s, x := decodeSegment(t, sb, xb)
	ns, wantSt, touched, keep := remapStorage(s, remap, true)
	if !slices.Equal(touched, []bool{true, false, true, true, false}) {
		t.Fatalf("touched %v", touched)
	}
	nx, parts, err := remapGraphs(x, s, ns, keep, touched)
	if err != nil {
		t.Fatal(err)
	}
	if parts[0].fg == nil || parts[2].g == nil {
		t.Fatal("the fixture no longer repairs partition 0 and rebuilds partition 2")
	}
	var wantX, wantS bytes.Buffer
	if _, err := writeGraphParts(&wantX, nx, parts); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteStorage(&wantS, ns); err != nil {
		t.Fatal(err)
	}

	var held []int64
	mem := func(_ context.Context, n int64) (func(), error) {
		held = append(held, n)
		return func() {}, nil
	}
	var gotX, gotS bytes.Buffer
	in, sn, st, err := remapGraphStream(t.Context(), bytes.NewReader(xb), int64(len(xb)), bytes.NewReader(sb), int64(len(sb)), &gotX, &gotS, TypeIVFHNSWPQ, remap, mem)
	if err != nil {
		t.Fatal(err)
	}
	if in != int64(gotX.Len()) || sn != int64(gotS.Len()) {
		t.Fatalf("sizes %d, %d reported for %d, %d bytes written", in, sn, gotX.Len(), gotS.Len())
	}
	if st != wantSt {
		t.Fatalf("stats %+v, the whole remap's %+v", st, wantSt)
	}
	ws, want := decodeSegment(t, wantS.Bytes(), wantX.Bytes())
	gs, got := decodeSegment(t, gotS.Bytes(), gotX.Bytes())
	if !slices.Equal(got.IVF.GetOffsets(), want.IVF.GetOffsets()) || !slices.Equal(got.IVF.GetLengths(), want.IVF.GetLengths()) {
		t.Fatalf("graph partitions %v %v, the whole remap's %v %v", got.IVF.GetOffsets(), got.IVF.GetLengths(), want.IVF.GetOffsets(), want.IVF.GetLengths())
	}
	for p := range want.HNSW {
		if fmt.Sprint(got.HNSW[p]) != fmt.Sprint(want.HNSW[p]) {
			t.Fatalf("partition %d's lance:hnsw %+v, the whole remap's %+v", p, got.HNSW[p], want.HNSW[p])
		}
	}
	for c := range want.Columns {
		if !sameArray(got.Columns[c], want.Columns[c]) {
			t.Fatalf("graph column %d differs from the whole remap's", c)
		}
	}
	if !slices.Equal(gs.RowIDs, ws.RowIDs) || !slices.Equal(gs.IVF.GetOffsets(), ws.IVF.GetOffsets()) || !slices.Equal(gs.IVF.GetLengths(), ws.IVF.GetLengths()) ||
		!sameArray(gs.Columns[0], ws.Columns[0]) {
		t.Fatalf("storage differs from the whole remap's: %d rows in %v against %d in %v", len(gs.RowIDs), gs.IVF.GetLengths(), len(ws.RowIDs), ws.IVF.GetLengths())
	}
	// A budget that fails part way stops the remap with its error.
	boom := errors.New("budget closed")
	holds := 0
	failing := func(context.Context, int64) (func(), error) {
		if holds++; holds == 3 {
			return nil, boom
		}
		return func() {}, nil
	}
	if _, _, _, err := remapGraphStream(t.Context(), bytes.NewReader(xb), int64(len(xb)), bytes.NewReader(sb), int64(len(sb)), io.Discard, io.Discard, TypeIVFHNSWPQ, remap, failing); !errors.Is(err, boom) {
		t.Fatalf("with a budget failing at the third partition: %v", err)
	}
	// One hold per partition with rows, none over the largest's.
	if len(held) != 4 {
		t.Fatalf("%d memory holds, want one for each of the 4 partitions with rows", len(held))
	}
	// Beyond the page buffers every hold counts, the largest partition's
	// share of the whole segment's estimate.
	fixed := graphRemapMemory(0, 0)
	if most, whole := slices.Max(held)-fixed, graphRemapMemory(int64(len(sb)), int64(len(xb)))-fixed; most > whole*int64(slices.Max(sizes))/sumInts(sizes)+64 {
		t.Fatalf("largest hold %d bytes over the page buffers, whole segment %d: not the largest partition's share", most, whole)
	}
}

func sumInts(xs []int) int64 {
	var n int64
	for _, x := range xs {
		n += int64(x)
	}
	return n
}

// sameArray reports whether two decoded columns hold the same values.
func sameArray(a, b *file.Array) bool {
	if a.Len != b.Len || !bytes.Equal(a.Values, b.Values) || !slices.Equal(a.Offsets, b.Offsets) || len(a.Children) != len(b.Children) {
		return false
	}
	for i := range a.Children {
		if !sameArray(a.Children[i], b.Children[i]) {
			return false
		}
	}
	return true
}

// writeGraphParts writes index.idx for x (its partitions and lance:hnsw
// as remapGraphs set them) with the graph rows of parts, and returns its
// size: the whole-segment remap's writer, which remapGraphStream's output
// is held to.
func writeGraphParts(w io.Writer, x *SubIndex, parts []graphPart) (int64, error) {
	gs, err := newGraphStream(w, x)
	if err != nil {
		return 0, err
	}
	for i := range parts {
		if err := gs.add(&parts[i]); err != nil {
			return 0, err
		}
		// A part written is let go.
		parts[i] = graphPart{}
	}
	return gs.close(x)
}

// FuzzRemapGraphStream: an HNSW segment's two files of any bytes,
// remapped a partition at a time, give a remapped segment or a one-line
// error, never a panic.
func FuzzRemapGraphStream(f *testing.F) {
	xb, sb := synthHNSWSegment(f, []int{40, 0, 25})
	f.Add(xb, sb)
	f.Add(xb[:len(xb)/2], sb)
	f.Add(xb, sb[:len(sb)-100])
	f.Fuzz(func(t *testing.T, xb, sb []byte) {
		remap := func(a uint64) (uint64, bool) { return a + 1<<32, a%3 != 0 }
		_, _, _, err := remapGraphStream(context.Background(), bytes.NewReader(xb), int64(len(xb)), bytes.NewReader(sb), int64(len(sb)), io.Discard, io.Discard, TypeIVFHNSWPQ, remap, nil)
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Fatalf("a multi-line error: %q", err)
		}
	})
}
