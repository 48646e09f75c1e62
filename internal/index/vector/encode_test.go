package vector

import (
	"bytes"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

// TestEncodeParallelIsSerial: the encoder's workers give the storage a
// serial encoding gives: each row in its nearest centroid's partition, in
// arrival order, with the codes of its residual.
func TestEncodeParallelIsSerial(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	seg := benchPQ(1)
	const dim, m = 768, 48
	// Centroids that are not all equal, so rows spread over partitions.
	r := rand.New(rand.NewPCG(21, 22))
	cent := seg.Index.IVF.CentroidsTensor.Data
	for i := 0; i < len(cent); i += 4 {
		copy(cent[i:], f32bytes(float32(r.NormFloat64())))
	}
	v := &Vectors{Dim: dim}
	for i := range 1000 {
		v.Addrs = append(v.Addrs, uint64(i)*7)
		for range dim {
			v.Data = append(v.Data, float32(r.NormFloat64()))
		}
	}
	got, err := seg.Encode(v)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := seg.Index.Centroids()
	parts := seg.Storage.Partitions()
	ids := make([][]uint64, parts)
	codes := make([][]byte, parts)
	for i, a := range v.Addrs {
		x := v.Data[i*dim : (i+1)*dim]
		p := nearestCentroid(x, c, dim, "l2")
		res := make([]float32, dim)
		for k := range dim {
			res[k] = x[k] - c[p*dim+k]
		}
		code := make([]byte, m)
		pqEncodeInto(code, seg.Storage.PQ, res, false, nil)
		ids[p] = append(ids[p], a)
		codes[p] = append(codes[p], code...)
	}
	used := 0
	for p := range parts {
		off, n := int(got.IVF.Offsets[p]), int(got.IVF.Lengths[p])
		if n > 0 {
			used++
		}
		if !slices.Equal(got.RowIDs[off:off+n], ids[p]) {
			t.Fatalf("partition %d: rows %v, want %v", p, got.RowIDs[off:off+n], ids[p])
		}
		if !bytes.Equal(got.Columns[0].Children[0].Values[off*m:(off+n)*m], codes[p]) {
			t.Fatalf("partition %d: codes differ from a serial encoding", p)
		}
	}
	if used < 2 {
		t.Fatalf("rows fell into %d partitions: the test cannot see the partitions' order", used)
	}
}

func f32bytes(x float32) []byte {
	var b [4]byte
	u := math.Float32bits(x)
	b[0], b[1], b[2], b[3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
	return b[:]
}
