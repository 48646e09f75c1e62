#include "textflag.h"

// The float16 kernels of kernels_f16.go (f16Kernel) with the FMA unit:
// lanes 0-7 in Y0 and 8-15 in Y1, one fused multiply-add per element
// (VFMADD231PS rounds once, as fma32 does), the lanes reduced as
// (r3+r2)+(r1+r0) over 4-wide registers, then (v0+v2)+(v1+v3), then the
// elements past the last multiple of 16 one fused step at a time
// (VFMADD231SS). Float addition is commutative bit for bit, so only the
// grouping matters.

// REDUCE16 sums the 16 lanes of Y0 (lanes 0-7) and Y1 (8-15) into X4's
// low float: (r3+r2)+(r1+r0) over 4-wide registers, then (v0+v2)+(v1+v3).
#define REDUCE16 \
	VEXTRACTF128 $1, Y0, X5 \
	VADDPS X5, X0, X0 \
	VEXTRACTF128 $1, Y1, X6 \
	VADDPS X6, X1, X1 \
	VADDPS X0, X1, X1 \
	VMOVHLPS X1, X1, X2 \
	VADDPS X2, X1, X2 \
	VMOVSHDUP X2, X3 \
	VADDSS X3, X2, X4

// func l2F16FMA(x, y *float32, n int) float32
TEXT ·l2F16FMA(SB), NOSPLIT, $0-28
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPS X4, X4, X4
	MOVQ CX, DX
	SHRQ $4, DX
	JZ l2tail
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
l2body:
	VMOVUPS (SI), Y2
	VMOVUPS 32(SI), Y3
	VSUBPS (DI), Y2, Y2
	VSUBPS 32(DI), Y3, Y3
	VFMADD231PS Y2, Y2, Y0
	VFMADD231PS Y3, Y3, Y1
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ DX
	JNZ l2body
	REDUCE16
l2tail:
	ANDQ $15, CX
	JZ l2done
l2tailloop:
	VMOVSS (SI), X2
	VSUBSS (DI), X2, X2
	VFMADD231SS X2, X2, X4
	ADDQ $4, SI
	ADDQ $4, DI
	DECQ CX
	JNZ l2tailloop
l2done:
	VMOVSS X4, ret+24(FP)
	VZEROUPPER
	RET

// func dotF16FMA(x, y *float32, n int) float32
TEXT ·dotF16FMA(SB), NOSPLIT, $0-28
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPS X4, X4, X4
	MOVQ CX, DX
	SHRQ $4, DX
	JZ dottail
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
dotbody:
	VMOVUPS (SI), Y2
	VMOVUPS 32(SI), Y3
	VFMADD231PS (DI), Y2, Y0
	VFMADD231PS 32(DI), Y3, Y1
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ DX
	JNZ dotbody
	REDUCE16
dottail:
	ANDQ $15, CX
	JZ dotdone
dottailloop:
	VMOVSS (SI), X2
	VFMADD231SS (DI), X2, X4
	ADDQ $4, SI
	ADDQ $4, DI
	DECQ CX
	JNZ dottailloop
dotdone:
	VMOVSS X4, ret+24(FP)
	VZEROUPPER
	RET
