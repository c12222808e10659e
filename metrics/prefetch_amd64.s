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
