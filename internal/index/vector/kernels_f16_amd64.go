package vector

import "golang.org/x/sys/cpu"

// useFMA16 selects the assembly float16 kernels (kernels_f16_amd64.s),
// which need AVX2 and the FMA unit.
var useFMA16 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// l2F16FMA is f16Kernel(x[:n], y[:n], true) with the FMA unit.
//
//go:noescape
func l2F16FMA(x, y *float32, n int) float32

// dotF16FMA is f16Kernel(x[:n], y[:n], false) with the FMA unit.
//
//go:noescape
func dotF16FMA(x, y *float32, n int) float32
