#include "textflag.h"

// func l2U8AVX2(a, b *byte, n int) uint32
// 32 bytes an iteration in two halves: each 16 bytes zero-extended to 16
// words, subtracted (|a-b| <= 255 fits a word), squared and added in
// pairs into dwords (VPMADDWD: at most 2*255^2), accumulated in two
// registers of 8 dwords; the 16 dword sums are added at the end. Every
// add wraps modulo 2^32 like the Go path's uint32 sums, so both agree on
// every input.
TEXT ·l2U8AVX2(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ n+16(FP), CX
	SHRQ $5, CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	TESTQ CX, CX
	JZ done
loop:
	VPMOVZXBW (SI), Y2
	VPMOVZXBW (DI), Y3
	VPMOVZXBW 16(SI), Y4
	VPMOVZXBW 16(DI), Y5
	VPSUBW Y3, Y2, Y2
	VPSUBW Y5, Y4, Y4
	VPMADDWD Y2, Y2, Y2
	VPMADDWD Y4, Y4, Y4
	VPADDD Y2, Y0, Y0
	VPADDD Y4, Y1, Y1
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ loop
done:
	VPADDD Y1, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDD X1, X0, X0
	VPSHUFD $0x4E, X0, X1
	VPADDD X1, X0, X0
	VPSHUFD $0xB1, X0, X1
	VPADDD X1, X0, X0
	VMOVD X0, AX
	MOVL AX, ret+24(FP)
	VZEROUPPER
	RET
