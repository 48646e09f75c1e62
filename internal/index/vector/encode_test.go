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

// TestGroupRows: rows are grouped by partition in place, stably, whatever
// the order they arrive in (already grouped, one partition, shuffled).
func TestGroupRows(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const width = 3
	for _, c := range []struct {
		name  string
		parts int
		rows  int
		sort  bool
	}{{"shuffled", 7, 500, false}, {"grouped already", 7, 500, true}, {"one partition", 1, 50, false}, {"no rows", 3, 0, false}} {
		t.Run(c.name, func(t *testing.T) {
			parts := make([]int32, c.rows)
			for i := range parts {
				parts[i] = int32(r.IntN(c.parts))
			}
			if c.sort {
				slices.Sort(parts)
			}
			ids := make([]uint64, c.rows)
			codes := make([]byte, c.rows*width)
			var wantIDs []uint64
			var wantCodes []byte
			offsets := make([]uint64, c.parts)
			for i := range ids {
				ids[i] = uint64(1000 + i)
				for k := range width {
					codes[i*width+k] = byte(i*width + k)
				}
			}
			for p := range c.parts {
				offsets[p] = uint64(len(wantIDs))
				for i, q := range parts {
					if int(q) == p {
						wantIDs = append(wantIDs, ids[i])
						wantCodes = append(wantCodes, codes[i*width:(i+1)*width]...)
					}
				}
			}
			groupRows(ids, codes, width, parts, offsets)
			if !slices.Equal(ids, wantIDs) {
				t.Fatalf("ids %v, want %v", ids, wantIDs)
			}
			if !bytes.Equal(codes, wantCodes) {
				t.Fatalf("codes differ from a stable grouping")
			}
		})
	}
}

// TestEncodeBatchesIsOneEncode: rows added over several batches, with a
// reservation too small for them, give the storage one Encode of all of
// them gives.
func TestEncodeBatchesIsOneEncode(t *testing.T) {
	seg := benchPQ(1)
	const dim = 768
	r := rand.New(rand.NewPCG(23, 24))
	cent := seg.Index.IVF.CentroidsTensor.Data
	for i := 0; i < len(cent); i += 4 {
		copy(cent[i:], f32bytes(float32(r.NormFloat64())))
	}
	all := &Vectors{Dim: dim}
	for i := range 300 {
		all.Addrs = append(all.Addrs, uint64(i)*3)
		for range dim {
			all.Data = append(all.Data, float32(r.NormFloat64()))
		}
	}
	want, err := seg.Encode(all)
	if err != nil {
		t.Fatal(err)
	}
	e, err := seg.newEncoder(false)
	if err != nil {
		t.Fatal(err)
	}
	e.reserve(10)
	for _, b := range [][2]int{{0, 7}, {7, 200}, {200, 300}} {
		v := &Vectors{Dim: dim, Addrs: all.Addrs[b[0]:b[1]], Data: all.Data[b[0]*dim : b[1]*dim]}
		if err := e.add(v); err != nil {
			t.Fatal(err)
		}
	}
	got := e.storage()
	if !slices.Equal(got.RowIDs, want.RowIDs) || !slices.Equal(got.IVF.Lengths, want.IVF.Lengths) || !slices.Equal(got.IVF.Offsets, want.IVF.Offsets) {
		t.Fatalf("rows or partitions differ: %v %v, want %v %v", got.IVF.Lengths, got.RowIDs[:10], want.IVF.Lengths, want.RowIDs[:10])
	}
	if !bytes.Equal(got.Columns[0].Children[0].Values, want.Columns[0].Children[0].Values) {
		t.Fatal("codes differ")
	}
	used := 0
	for _, l := range got.IVF.Lengths {
		if l > 0 {
			used++
		}
	}
	if used < 2 {
		t.Fatal("rows fell into one partition: the test cannot see the grouping")
	}
}
