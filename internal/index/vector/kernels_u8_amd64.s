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

// func l2U8Rows(q, base *byte, dim int, rows *uint32, n int, out *uint32)
// out[k] = l2U8(q, row rows[k] of base) for k < n, dim a positive multiple
// of 32 (the loop of l2U8AVX2). While it sums row k it has row k+1's
// cache lines prefetched: a graph search reads rows at random, and the
// sum is over long before the next row would arrive from memory.
TEXT ·l2U8Rows(SB), NOSPLIT, $0-48
	MOVQ q+0(FP), SI
	MOVQ base+8(FP), R8
	MOVQ dim+16(FP), R9
	MOVQ rows+24(FP), R10
	MOVQ n+32(FP), R11
	MOVQ out+40(FP), R12
	TESTQ R11, R11
	JZ end
row:
	CMPQ R11, $1
	JE sum
	MOVL 4(R10), AX
	IMULQ R9, AX
	ADDQ R8, AX
	XORQ BX, BX
prefetch:
	PREFETCHT0 (AX)(BX*1)
	ADDQ $64, BX
	CMPQ BX, R9
	JLT prefetch
sum:
	MOVL (R10), DI
	IMULQ R9, DI
	ADDQ R8, DI
	MOVQ SI, DX
	MOVQ R9, CX
	SHRQ $5, CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
loop:
	VPMOVZXBW (DX), Y2
	VPMOVZXBW (DI), Y3
	VPMOVZXBW 16(DX), Y4
	VPMOVZXBW 16(DI), Y5
	VPSUBW Y3, Y2, Y2
	VPSUBW Y5, Y4, Y4
	VPMADDWD Y2, Y2, Y2
	VPMADDWD Y4, Y4, Y4
	VPADDD Y2, Y0, Y0
	VPADDD Y4, Y1, Y1
	ADDQ $32, DX
	ADDQ $32, DI
	DECQ CX
	JNZ loop
	VPADDD Y1, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDD X1, X0, X0
	VPSHUFD $0x4E, X0, X1
	VPADDD X1, X0, X0
	VPSHUFD $0xB1, X0, X1
	VPADDD X1, X0, X0
	VMOVD X0, AX
	MOVL AX, (R12)
	ADDQ $4, R10
	ADDQ $4, R12
	DECQ R11
	JNZ row
end:
	VZEROUPPER
	RET

// func prefetchRow(p *byte, n int)
// Asks for the n bytes (n > 0) from p into the cache.
TEXT ·prefetchRow(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), AX
	MOVQ n+8(FP), CX
	XORQ BX, BX
loop:
	PREFETCHT0 (AX)(BX*1)
	ADDQ $64, BX
	CMPQ BX, CX
	JLT loop
	RET
