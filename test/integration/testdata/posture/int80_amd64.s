#include "textflag.h"

// func int80(nr uint32) uint32
//
// One i386 system call through the legacy int $0x80 gate, without
// arguments. The kernel runs it through its compat table with
// AUDIT_ARCH_I386, which a seccomp filter for x86_64 must not let through.
TEXT ·int80(SB), NOSPLIT, $0-12
	MOVL nr+0(FP), AX
	INT  $0x80
	MOVL AX, ret+8(FP)
	RET
