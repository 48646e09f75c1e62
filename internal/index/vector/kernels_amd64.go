package vector

import "golang.org/x/sys/cpu"

// useAVX2 selects the assembly lanes of l2 (kernels_amd64.s).
var useAVX2 = cpu.X86.HasAVX2

// lanes16AVX2 adds (a[i]-b[i])² of the chunks*16 first elements into
// out's 16 lanes (lane k: elements k, k+16, ...), each lane in element
// order with a separate multiply and add, as LanceDB's 16-lane kernel.
//
//go:noescape
func lanes16AVX2(a, b *float32, chunks int, out *[16]float32)
