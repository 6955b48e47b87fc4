package seccomp

import (
	"encoding/binary"
	"fmt"
	"testing"

	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"
)

// A classic-BPF interpreter for seccomp programs, so tests can evaluate a
// compiled filter for any (arch, nr, args) without installing it, including
// calls that cannot be made safely (x32, i386) and every personality value.

type seccompData struct {
	nr   int32
	arch uint32
	ip   uint64
	args [6]uint64
}

func (d seccompData) bytes() []byte {
	b := make([]byte, seccompDataSize)
	binary.NativeEndian.PutUint32(b[0:], uint32(d.nr))
	binary.NativeEndian.PutUint32(b[4:], d.arch)
	binary.NativeEndian.PutUint64(b[8:], d.ip)
	for i, a := range d.args {
		binary.NativeEndian.PutUint64(b[16+8*i:], a)
	}
	return b
}

// runBPF returns the filter's verdict (SECCOMP_RET_*) for d.
func runBPF(t testing.TB, prog []unix.SockFilter, d seccompData) uint32 {
	t.Helper()
	v, _ := runBPFSteps(t, prog, d)
	return v
}

// runBPFSteps also returns the number of instructions executed.
func runBPFSteps(t testing.TB, prog []unix.SockFilter, d seccompData) (verdict uint32, steps int) {
	t.Helper()
	data := d.bytes()
	var a, x uint32
	var mem [16]uint32
	for pc := 0; pc < len(prog); pc++ {
		steps++
		in := prog[pc]
		src := in.K
		if in.Code&0x08 == unix.BPF_X {
			src = x
		}
		switch in.Code & 0x07 {
		case unix.BPF_LD, unix.BPF_LDX:
			var v uint32
			switch in.Code & 0xe0 {
			case unix.BPF_ABS:
				v = binary.NativeEndian.Uint32(data[in.K:])
			case unix.BPF_IMM:
				v = in.K
			case unix.BPF_MEM:
				v = mem[in.K]
			case unix.BPF_LEN:
				v = seccompDataSize
			default:
				t.Fatalf("pc %d: unsupported load %#x", pc, in.Code)
			}
			if in.Code&0x07 == unix.BPF_LD {
				a = v
			} else {
				x = v
			}
		case unix.BPF_ST:
			mem[in.K] = a
		case unix.BPF_STX:
			mem[in.K] = x
		case unix.BPF_ALU:
			switch in.Code & 0xf0 {
			case unix.BPF_ADD:
				a += src
			case unix.BPF_SUB:
				a -= src
			case unix.BPF_MUL:
				a *= src
			case unix.BPF_DIV:
				a /= src
			case unix.BPF_MOD:
				a %= src
			case unix.BPF_AND:
				a &= src
			case unix.BPF_OR:
				a |= src
			case unix.BPF_XOR:
				a ^= src
			case unix.BPF_LSH:
				a <<= src
			case unix.BPF_RSH:
				a >>= src
			case unix.BPF_NEG:
				a = -a
			}
		case unix.BPF_JMP:
			if in.Code&0xf0 == unix.BPF_JA {
				pc += int(in.K)
				continue
			}
			var cond bool
			switch in.Code & 0xf0 {
			case unix.BPF_JEQ:
				cond = a == src
			case unix.BPF_JGT:
				cond = a > src
			case unix.BPF_JGE:
				cond = a >= src
			case unix.BPF_JSET:
				cond = a&src != 0
			}
			if cond {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		case unix.BPF_RET:
			if in.Code&0x18 == unix.BPF_A {
				return a, steps
			}
			return in.K, steps
		case unix.BPF_MISC:
			if in.Code&0xf8 == unix.BPF_TAX {
				x = a
			} else {
				a = x
			}
		}
	}
	t.Fatalf("program fell off the end")
	return 0, steps
}

const (
	retAllow       = unix.SECCOMP_RET_ALLOW
	retKillProcess = unix.SECCOMP_RET_KILL_PROCESS
	retEPERM       = unix.SECCOMP_RET_ERRNO | 1
)

func verdictString(v uint32) string {
	switch {
	case v == retAllow:
		return "ALLOW"
	case v == retKillProcess:
		return "KILL_PROCESS"
	case v&unix.SECCOMP_RET_ACTION_FULL == unix.SECCOMP_RET_ERRNO:
		return fmt.Sprintf("ERRNO(%d)", v&unix.SECCOMP_RET_DATA)
	}
	return fmt.Sprintf("%#x", v)
}

// nativeAudit is AUDIT_ARCH of the test machine.
func nativeAudit(t testing.TB) uint32 {
	n, err := libseccomp.GetNativeArch()
	if err != nil {
		t.Fatal(err)
	}
	return archInfoOf(n).audit
}

// nativeNr resolves a syscall on the native ABI, or reports false if it
// does not exist there.
func nativeNr(t testing.TB, name string) (int32, bool) {
	n, err := libseccomp.GetNativeArch()
	if err != nil {
		t.Fatal(err)
	}
	nr, _, ok := syscallNr(name, n)
	return nr, ok
}
