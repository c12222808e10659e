#include "textflag.h"

// func prefetch(addrs []uintptr)
TEXT ·prefetch(SB), NOSPLIT, $0-24
	MOVQ addrs_base+0(FP), SI
	MOVQ addrs_len+8(FP), CX
	TESTQ CX, CX
	JEQ  done

loop:
	MOVQ       (SI), AX
	PREFETCHT0 (AX)
	ADDQ       $8, SI
	DECQ       CX
	JNE        loop

done:
	RET

// func prefetchWrite(addr uintptr)
// PREFETCHW is 0F 0D /1.
TEXT ·prefetchWrite(SB), NOSPLIT, $0-8
	MOVQ      addr+0(FP), AX
	BYTE $0x0F; BYTE $0x0D; BYTE $0x08             // PREFETCHW (AX)
	BYTE $0x0F; BYTE $0x0D; BYTE $0x48; BYTE $0x40 // PREFETCHW 64(AX)
	RET

// func cpuPrefetchWrite() bool
// CPUID leaf 0x80000001 ECX bit 8: PREFETCHW.
TEXT ·cpuPrefetchWrite(SB), NOSPLIT, $0-1
	MOVL  $0x80000000, AX
	CPUID
	CMPL  AX, $0x80000001
	JB    none
	MOVL  $0x80000001, AX
	XORL  CX, CX
	CPUID
	SHRL  $8, CX
	ANDL  $1, CX
	MOVB  CX, ret+0(FP)
	RET

none:
	MOVB $0, ret+0(FP)
	RET
