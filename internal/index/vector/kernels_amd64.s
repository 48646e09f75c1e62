#include "textflag.h"

// func lanes16AVX2(a, b *float32, chunks int, out *[16]float32)
// Y0 holds lanes 0-7 and Y1 lanes 8-15: each lane a serial sum in element
// order (VSUBPS, VMULPS, VADDPS; no fused multiply-add), so the lanes are
// bit for bit those of the scalar kernel.
TEXT ·lanes16AVX2(SB), NOSPLIT, $0-32
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ chunks+16(FP), CX
	MOVQ out+24(FP), DX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	TESTQ CX, CX
	JZ done
loop:
	VMOVUPS (SI), Y2
	VMOVUPS 32(SI), Y3
	VSUBPS (DI), Y2, Y2
	VSUBPS 32(DI), Y3, Y3
	VMULPS Y2, Y2, Y2
	VMULPS Y3, Y3, Y3
	VADDPS Y2, Y0, Y0
	VADDPS Y3, Y1, Y1
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ CX
	JNZ loop
done:
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	VZEROUPPER
	RET
