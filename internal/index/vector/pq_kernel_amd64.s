#include "textflag.h"

// The codebook is transposed per eight entries (pq_kernel.go): a block is
// 16 rows of eight floats, row k holding element k of its eight entries,
// 512 bytes. One YMM register then carries the running sums of eight
// entries, each lane a serial sum over the elements in order 0..15 with
// a separate subtract, multiply and add (no fused multiply-add): the
// order of the scalar kernel, so the same bits.
//
// The argmin is kept per lane: Y13 the smallest distance lane l has seen
// (entries 8b+l, b in block order), Y14 its entry, Y15 the entries of the
// current block. A lane takes a block's distance only when strictly
// smaller (an ordered compare: a NaN is never taken), so it keeps the
// first of equal distances; the caller reduces the eight lanes.

DATA pqIota<>+0(SB)/4, $0
DATA pqIota<>+4(SB)/4, $1
DATA pqIota<>+8(SB)/4, $2
DATA pqIota<>+12(SB)/4, $3
DATA pqIota<>+16(SB)/4, $4
DATA pqIota<>+20(SB)/4, $5
DATA pqIota<>+24(SB)/4, $6
DATA pqIota<>+28(SB)/4, $7
GLOBL pqIota<>(SB), RODATA|NOPTR, $32

DATA pqEight<>+0(SB)/4, $8
DATA pqEight<>+4(SB)/4, $8
DATA pqEight<>+8(SB)/4, $8
DATA pqEight<>+12(SB)/4, $8
DATA pqEight<>+16(SB)/4, $8
DATA pqEight<>+20(SB)/4, $8
DATA pqEight<>+24(SB)/4, $8
DATA pqEight<>+28(SB)/4, $8
GLOBL pqEight<>(SB), RODATA|NOPTR, $32

// STEP8(k) adds element k's squared difference to the eight blocks'
// sums Y0-Y7; Y8 is x[k] broadcast, Y9-Y12 rotating temporaries.
#define STEP8(k) \
	VBROADCASTSS (k*4)(SI), Y8; \
	VSUBPS (k*32)(DI), Y8, Y9; \
	VMULPS Y9, Y9, Y9; \
	VADDPS Y9, Y0, Y0; \
	VSUBPS (512+k*32)(DI), Y8, Y10; \
	VMULPS Y10, Y10, Y10; \
	VADDPS Y10, Y1, Y1; \
	VSUBPS (1024+k*32)(DI), Y8, Y11; \
	VMULPS Y11, Y11, Y11; \
	VADDPS Y11, Y2, Y2; \
	VSUBPS (1536+k*32)(DI), Y8, Y12; \
	VMULPS Y12, Y12, Y12; \
	VADDPS Y12, Y3, Y3; \
	VSUBPS (2048+k*32)(DI), Y8, Y9; \
	VMULPS Y9, Y9, Y9; \
	VADDPS Y9, Y4, Y4; \
	VSUBPS (2560+k*32)(DI), Y8, Y10; \
	VMULPS Y10, Y10, Y10; \
	VADDPS Y10, Y5, Y5; \
	VSUBPS (3072+k*32)(DI), Y8, Y11; \
	VMULPS Y11, Y11, Y11; \
	VADDPS Y11, Y6, Y6; \
	VSUBPS (3584+k*32)(DI), Y8, Y12; \
	VMULPS Y12, Y12, Y12; \
	VADDPS Y12, Y7, Y7

// STEP1(k) is STEP8 for one block, summed in Y0.
#define STEP1(k) \
	VBROADCASTSS (k*4)(SI), Y8; \
	VSUBPS (k*32)(DI), Y8, Y9; \
	VMULPS Y9, Y9, Y9; \
	VADDPS Y9, Y0, Y0

// ARGMIN(d) folds the block of distances d into Y13/Y14 and steps Y15
// to the next block's entries.
#define ARGMIN(d) \
	VCMPPS $1, Y13, d, Y9; \
	VBLENDVPS Y9, d, Y13, Y13; \
	VBLENDVPS Y9, Y15, Y14, Y14; \
	VPADDD pqEight<>(SB), Y15, Y15

// func pqNearest16x8AVX2(x, book *float32, blocks int, dist *float32, mins *[8]float32, idx *[8]int32)
// For the blocks*8 entries of the transposed book: dist[i] (unless dist
// is nil) the squared L2 of the 16 floats at x and entry i; mins[l] and
// idx[l] the smallest distance of lane l's entries and the first entry
// with it (+Inf and 0 when none is smaller than +Inf).
TEXT ·pqNearest16x8AVX2(SB), NOSPLIT, $0-48
	MOVQ x+0(FP), SI
	MOVQ book+8(FP), DI
	MOVQ blocks+16(FP), CX
	MOVQ dist+24(FP), DX
	MOVQ $0x7f800000, AX
	MOVQ AX, X13
	VPBROADCASTD X13, Y13
	VPXOR Y14, Y14, Y14
	VMOVDQU pqIota<>(SB), Y15
	CMPQ CX, $8
	JLT one
eight:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	STEP8(0)
	STEP8(1)
	STEP8(2)
	STEP8(3)
	STEP8(4)
	STEP8(5)
	STEP8(6)
	STEP8(7)
	STEP8(8)
	STEP8(9)
	STEP8(10)
	STEP8(11)
	STEP8(12)
	STEP8(13)
	STEP8(14)
	STEP8(15)
	TESTQ DX, DX
	JZ eightmin
	VMOVUPS Y0, 0(DX)
	VMOVUPS Y1, 32(DX)
	VMOVUPS Y2, 64(DX)
	VMOVUPS Y3, 96(DX)
	VMOVUPS Y4, 128(DX)
	VMOVUPS Y5, 160(DX)
	VMOVUPS Y6, 192(DX)
	VMOVUPS Y7, 224(DX)
	ADDQ $256, DX
eightmin:
	ARGMIN(Y0)
	ARGMIN(Y1)
	ARGMIN(Y2)
	ARGMIN(Y3)
	ARGMIN(Y4)
	ARGMIN(Y5)
	ARGMIN(Y6)
	ARGMIN(Y7)
	ADDQ $4096, DI
	SUBQ $8, CX
	CMPQ CX, $8
	JGE eight
one:
	TESTQ CX, CX
	JZ done
	VXORPS Y0, Y0, Y0
	STEP1(0)
	STEP1(1)
	STEP1(2)
	STEP1(3)
	STEP1(4)
	STEP1(5)
	STEP1(6)
	STEP1(7)
	STEP1(8)
	STEP1(9)
	STEP1(10)
	STEP1(11)
	STEP1(12)
	STEP1(13)
	STEP1(14)
	STEP1(15)
	TESTQ DX, DX
	JZ onemin
	VMOVUPS Y0, (DX)
	ADDQ $32, DX
onemin:
	ARGMIN(Y0)
	ADDQ $512, DI
	DECQ CX
	JMP one
done:
	MOVQ mins+32(FP), R8
	MOVQ idx+40(FP), R9
	VMOVUPS Y13, (R8)
	VMOVDQU Y14, (R9)
	VZEROUPPER
	RET
