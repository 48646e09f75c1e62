package vector

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	ipb "github.com/compactord/compactord/gen/lanceindexpb"
	"github.com/compactord/compactord/internal/format/file"
)

// benchPQ is a PQ segment of 768-d vectors, 48 sub-vectors, 64
// partitions, with rows stored rows (codes random) and a random codebook.
func benchPQ(rows int) *Segment {
	const dim, m, parts = 768, 48, 64
	r := rand.New(rand.NewPCG(7, 8))
	cb := make([]float32, 256*dim)
	for i := range cb {
		cb[i] = float32(r.NormFloat64())
	}
	cent := make([]byte, 0, 4*parts*dim)
	for range parts * dim {
		cent = append(cent, 0, 0, 0, 0)
	}
	codes := make([]byte, rows*m)
	for i := range codes {
		codes[i] = byte(r.IntN(256))
	}
	ids := make([]uint64, rows)
	for i := range ids {
		ids[i] = uint64(i/1000)<<32 | uint64(i%1000)
	}
	ivf := &ipb.IVF{Offsets: make([]uint64, parts), Lengths: make([]uint32, parts)}
	for p := range parts {
		ivf.Offsets[p] = uint64(p * rows / parts)
		ivf.Lengths[p] = uint32((p+1)*rows/parts - p*rows/parts)
	}
	s := &Storage{Quantizer: QuantPQ, Distance: "l2", IVF: ivf, RowIDs: ids, Columns: []*file.Array{fslU8(codes, m)},
		PQ: &PQParams{CodebookPosition: 2, NBits: 8, NumSubVectors: m, Dimension: dim, Transposed: true, Codebook: cb}}
	x := &SubIndex{Type: TypeIVFPQ, Distance: "l2", IVF: &ipb.IVF{CentroidsTensor: &ipb.Tensor{DataType: ipb.Tensor_FLOAT32, Shape: []uint32{parts, dim}, Data: cent}}}
	return &Segment{Index: x, Storage: s}
}

// BenchmarkEncodePQ768: catch-up's per-vector work (nearest of 64
// centroids, residual, 48 nearest-of-256 sub-vector searches).
func BenchmarkEncodePQ768(b *testing.B) {
	seg := benchPQ(1)
	r := rand.New(rand.NewPCG(1, 1))
	v := &Vectors{Dim: 768}
	for i := range 1000 {
		v.Addrs = append(v.Addrs, uint64(i))
		for range 768 {
			v.Data = append(v.Data, float32(r.NormFloat64()))
		}
	}
	b.SetBytes(int64(len(v.Data) * 4))
	for b.Loop() {
		if _, err := seg.Encode(v); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Seconds())/float64(b.N)/1000*1e6, "µs/vector")
}

// BenchmarkRemapPQ: a remap of 1 M rows of PQ codes dropping 10 %, then
// the per-partition transposition of the write, in memory.
func BenchmarkRemapPQ(b *testing.B) {
	seg := benchPQ(1 << 20)
	seg.Storage.Fields = nil
	remap := func(a uint64) (uint64, bool) { return a + 1<<40, a%10 != 0 }
	b.SetBytes(int64(len(seg.Storage.RowIDs) * (8 + 48)))
	for b.Loop() {
		ns, _, _ := RemapStorage(seg.Storage, remap)
		_ = transposePQ(ns)
	}
}

// BenchmarkL2Kernel768: the squared-L2 kernel on 768-d float32 vectors,
// against the memory bandwidth it would need streaming both operands.
func BenchmarkL2Kernel768(b *testing.B) {
	d := distanceFunc("l2")
	r := rand.New(rand.NewPCG(3, 3))
	xs := make([]float32, 768*1024)
	for i := range xs {
		xs[i] = float32(r.NormFloat64())
	}
	q := xs[:768]
	b.SetBytes(768 * 4)
	var sink float32
	for b.Loop() {
		for i := range 1024 {
			sink += d(q, xs[i*768:(i+1)*768])
		}
	}
	b.SetBytes(768 * 4 * 1024)
	_ = sink
}

// hnswBench768 are 5 000 clustered 768-d vectors (64 centres plus noise)
// and their SQ codes over the data's bounds.
func hnswBench768() (data []float32, codes []byte, lo, hi float64) {
	const n, dim = 5000, 768
	r := rand.New(rand.NewPCG(5, 5))
	centres := make([]float32, 64*dim)
	for i := range centres {
		centres[i] = float32(r.Float64()*2 - 1)
	}
	data = make([]float32, n*dim)
	for i := range n {
		c := centres[(i%64)*dim:]
		for k := range dim {
			data[i*dim+k] = c[k] + 0.1*float32(r.Float64()*2-1)
		}
	}
	lo, hi = float64(slices.Min(data)), float64(slices.Max(data))
	codes = make([]byte, len(data))
	for i, x := range data {
		codes[i] = byte(math.Round((float64(x) - lo) * 255 / (hi - lo)))
	}
	return data, codes, lo, hi
}

// BenchmarkHNSWBuild768: one partition's HNSW graph over 5 000 clustered
// 768-d vectors' SQ codes with LanceDB's default parameters (m 20,
// ef_construction 300), as catch-up and remap build an IVF_HNSW_SQ
// partition's.
func BenchmarkHNSWBuild768(b *testing.B) {
	_, codes, lo, hi := hnswBench768()
	v := sqVectors(codes, 768, 0, 5000, lo, hi)
	for b.Loop() {
		buildGraph(v, 5000, 20, 300, 7, graphSeed, true)
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)/5000*1e6, "µs/node")
}

// BenchmarkHNSWBuild768Float: the same graph over the float32 vectors
// (squared L2), as a MemWAL generation's copy and IVF_HNSW_PQ's
// reconstructed vectors are built.
func BenchmarkHNSWBuild768Float(b *testing.B) {
	data, _, _, _ := hnswBench768()
	v := &vectors{dim: 768, data: data, dist: distanceFunc("l2")}
	for b.Loop() {
		buildGraph(v, 5000, 20, 300, 7, graphSeed, true)
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)/5000*1e6, "µs/node")
}

// BenchmarkL2U8Kernel768: the SQ distance kernel on 768-byte codes (1 024
// rows, 768 KiB, in cache).
func BenchmarkL2U8Kernel768(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 3))
	xs := make([]byte, 768*1024)
	for i := range xs {
		xs[i] = byte(r.IntN(256))
	}
	q := xs[:768]
	var sink uint32
	for b.Loop() {
		for i := range 1024 {
			sink += l2U8(q, xs[i*768:(i+1)*768])
		}
	}
	b.SetBytes(768 * 1024)
	_ = sink
}

// streamFloats is 256 MiB of float32, far beyond any cache: what the
// kernels' bandwidth ceiling is measured over.
func streamFloats() []float32 {
	xs := make([]float32, 64<<20)
	for i := range xs {
		xs[i] = float32(i&1023) / 1024
	}
	return xs
}

// BenchmarkMemoryBandwidth: one core's sequential read bandwidth, a sum
// of 256 MiB of float32 with eight independent sums: the ceiling of a
// kernel that streams its operand from memory. Run it in the same
// go test as BenchmarkL2Kernel768Stream to compare the two.
func BenchmarkMemoryBandwidth(b *testing.B) {
	xs := streamFloats()
	b.SetBytes(int64(4 * len(xs)))
	var sink float32
	for b.Loop() {
		sink += sum8(xs)
	}
	_ = sink
}

// sum8 is the sum of xs in eight independent sums. A function of its
// own: inside the b.Loop body the compiler kept the sums on the stack,
// which measured store forwarding, not memory.
func sum8(xs []float32) float32 {
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	for i := 0; i+8 <= len(xs); i += 8 {
		x := xs[i : i+8 : i+8] // one bounds check per eight loads
		s0 += x[0]
		s1 += x[1]
		s2 += x[2]
		s3 += x[3]
		s4 += x[4]
		s5 += x[5]
		s6 += x[6]
		s7 += x[7]
	}
	return s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7
}

// BenchmarkL2Kernel768Stream: the squared-L2 kernel of one 768-d query
// (in cache) against 256 MiB of vectors streamed from memory, as a
// partition scan reads them.
func BenchmarkL2Kernel768Stream(b *testing.B) {
	xs := streamFloats()
	q := make([]float32, 768)
	for i := range q {
		q[i] = float32(i) / 768
	}
	b.SetBytes(int64(4 * len(xs)))
	var sink float32
	for b.Loop() {
		for i := 0; i+768 <= len(xs); i += 768 {
			sink += l2(q, xs[i:i+768])
		}
	}
	_ = sink
}

// BenchmarkNearestSub16: PQ encoding's inner step, the nearest of 256
// 16-float codebook entries (16 KiB, in cache).
func BenchmarkNearestSub16(b *testing.B) {
	r := rand.New(rand.NewPCG(9, 9))
	book := make([]float32, 256*16)
	for i := range book {
		book[i] = float32(r.NormFloat64())
	}
	x := book[100*16 : 101*16]
	b.SetBytes(256 * 16 * 4)
	var sink int
	for b.Loop() {
		sink += nearestSub16(x, book, 256)
	}
	_ = sink
}
