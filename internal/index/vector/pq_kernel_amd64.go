package vector

import "golang.org/x/sys/cpu"

// pqAVX2 selects the transposed-codebook kernel of PQ encoding
// (pq_kernel_amd64.s).
var pqAVX2 = cpu.X86.HasAVX2

// pqNearest16x8AVX2 computes, for the blocks*8 entries of the transposed
// codebook book (transposeBook16's layout), the squared L2 distance of the
// 16 floats at x to each, summed in LanceDB's order: into dist[i] unless
// dist is nil, and per lane l (entries 8b+l) the smallest into mins[l]
// and the first entry with it into idx[l] (+Inf and 0 when no distance is
// below +Inf; NaN distances are never taken).
//
//go:noescape
func pqNearest16x8AVX2(x, book *float32, blocks int, dist *float32, mins *[8]float32, idx *[8]int32)
