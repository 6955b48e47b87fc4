package seccomp

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// verdict runs the filter, as the kernel would, on one system call and
// returns its SECCOMP_RET_* value. The program was checked by
// validateProgram (Compile and FilterFromBytes both do), so every load is
// inside struct seccomp_data, every jump forward and inside the program,
// no division is by a zero constant, and the last instruction returns.
func (f *Filter) verdict(nr int32, arch uint32, args [6]uint64) uint32 {
	var data [seccompDataSize]byte
	binary.NativeEndian.PutUint32(data[0:], uint32(nr))
	binary.NativeEndian.PutUint32(data[4:], arch)
	for i, a := range args {
		binary.NativeEndian.PutUint64(data[16+8*i:], a)
	}
	v, _, _ := runProgram(f.prog, data[:])
	return v
}

// runProgram interprets a classic-BPF seccomp program on data (a struct
// seccomp_data) and returns its verdict and the instructions it executed;
// ok is false for what validateProgram refuses (a load of another kind, a
// program that ends without a return). The one interpreter of the
// package: the tests evaluate compiled filters with it too.
func runProgram(prog []unix.SockFilter, data []byte) (verdict uint32, steps int, ok bool) {
	var a, x uint32
	var mem [unix.BPF_MEMWORDS]uint32
	for pc := 0; pc < len(prog); pc++ {
		steps++
		in := prog[pc]
		src := in.K
		if in.Code&unix.BPF_X != 0 {
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
				return 0, steps, false
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
				if src == 0 { // the kernel ends the program with 0 (KILL)
					return 0, steps, true
				}
				a /= src
			case unix.BPF_MOD:
				if src == 0 {
					return 0, steps, true
				}
				a %= src
			case unix.BPF_AND:
				a &= src
			case unix.BPF_OR:
				a |= src
			case unix.BPF_XOR:
				a ^= src
			case unix.BPF_LSH:
				a <<= src & 31
			case unix.BPF_RSH:
				a >>= src & 31
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
				return a, steps, true
			}
			return in.K, steps, true
		case unix.BPF_MISC:
			if in.Code&0xf8 == unix.BPF_TAX {
				x = a
			} else {
				a = x
			}
		}
	}
	return 0, steps, false // unreachable for a validated program: it ends with a return
}
