package seccomp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Filter is a compiled seccomp program. It is plain data: Bytes and
// FilterFromBytes carry it from the supervisor to the worker, and Install
// loads it without libseccomp.
type Filter struct {
	prog  []unix.SockFilter
	flags uint32 // SECCOMP_FILTER_FLAG_* besides TSYNC, which Install always adds
}

// ErrInvalidFilter is wrapped by FilterFromBytes errors.
var ErrInvalidFilter = errors.New("seccomp: invalid filter data")

// Wire format, little-endian:
//
//	"NSBXBPF1"  magic and format version
//	u32         flags (SECCOMP_FILTER_FLAG_LOG only)
//	u32         instruction count n, 1..BPF_MAXINSNS
//	n × 8 bytes struct sock_filter: u16 code, u8 jt, u8 jf, u32 k
var filterMagic = []byte("NSBXBPF1")

const headerLen = 16

// wireFlags are the flags a Filter may carry.
const wireFlags = unix.SECCOMP_FILTER_FLAG_LOG

// Bytes serializes the filter for FilterFromBytes.
func (f *Filter) Bytes() []byte {
	b := make([]byte, headerLen+8*len(f.prog))
	copy(b, filterMagic)
	binary.LittleEndian.PutUint32(b[8:], f.flags)
	binary.LittleEndian.PutUint32(b[12:], uint32(len(f.prog)))
	for i, in := range f.prog {
		o := headerLen + 8*i
		binary.LittleEndian.PutUint16(b[o:], in.Code)
		b[o+2], b[o+3] = in.Jt, in.Jf
		binary.LittleEndian.PutUint32(b[o+4:], in.K)
	}
	return b
}

// Len is the number of BPF instructions.
func (f *Filter) Len() int { return len(f.prog) }

// FilterFromBytes decodes and checks a filter produced by Bytes. The program
// is validated as the kernel will validate it (opcodes, jump targets, loads
// inside struct seccomp_data, final return), so that a corrupted message is
// reported here, by the worker's setup step, and not as EINVAL from seccomp(2).
func FilterFromBytes(b []byte) (*Filter, error) {
	if len(b) < headerLen || !bytes.Equal(b[:8], filterMagic) {
		return nil, fmt.Errorf("%w: bad header", ErrInvalidFilter)
	}
	flags := binary.LittleEndian.Uint32(b[8:])
	if flags&^wireFlags != 0 {
		return nil, fmt.Errorf("%w: unknown flags %#x", ErrInvalidFilter, flags)
	}
	n := binary.LittleEndian.Uint32(b[12:])
	if n == 0 || n > unix.BPF_MAXINSNS {
		return nil, fmt.Errorf("%w: %d instructions (must be 1 to %d)", ErrInvalidFilter, n, unix.BPF_MAXINSNS)
	}
	if uint64(len(b)) != headerLen+8*uint64(n) {
		return nil, fmt.Errorf("%w: %d bytes for %d instructions", ErrInvalidFilter, len(b), n)
	}
	prog := make([]unix.SockFilter, n)
	for i := range prog {
		o := headerLen + 8*i
		prog[i] = unix.SockFilter{
			Code: binary.LittleEndian.Uint16(b[o:]),
			Jt:   b[o+2],
			Jf:   b[o+3],
			K:    binary.LittleEndian.Uint32(b[o+4:]),
		}
	}
	if err := validateProgram(prog); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidFilter, err)
	}
	return &Filter{prog: prog, flags: flags}, nil
}

// seccompDataSize is sizeof(struct seccomp_data): nr, arch, ip, args[6].
const seccompDataSize = 64

// validateProgram applies the checks of the kernel's bpf_check_classic and
// seccomp_check_filter: only the opcodes seccomp allows, absolute loads
// 4-byte aligned inside struct seccomp_data, scratch memory indexes in
// range, no division by a zero constant, jumps forward and inside the
// program, and a return as the last instruction (so every path returns).
func validateProgram(prog []unix.SockFilter) error {
	n := len(prog)
	if n == 0 || n > unix.BPF_MAXINSNS {
		return fmt.Errorf("%d instructions (must be 1 to %d)", n, unix.BPF_MAXINSNS)
	}
	inRange := func(i int, off uint32) bool { return uint64(i)+1+uint64(off) < uint64(n) }
	for i, in := range prog {
		switch in.Code {
		case unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
			if in.K >= seccompDataSize || in.K%4 != 0 {
				return fmt.Errorf("instruction %d loads offset %d outside struct seccomp_data", i, in.K)
			}
		case unix.BPF_LD | unix.BPF_W | unix.BPF_LEN, unix.BPF_LDX | unix.BPF_W | unix.BPF_LEN,
			unix.BPF_LD | unix.BPF_IMM, unix.BPF_LDX | unix.BPF_IMM,
			unix.BPF_RET | unix.BPF_K, unix.BPF_RET | unix.BPF_A,
			unix.BPF_MISC | unix.BPF_TAX, unix.BPF_MISC | unix.BPF_TXA,
			unix.BPF_ALU | unix.BPF_NEG:
		case unix.BPF_LD | unix.BPF_MEM, unix.BPF_LDX | unix.BPF_MEM, unix.BPF_ST, unix.BPF_STX:
			if in.K >= unix.BPF_MEMWORDS {
				return fmt.Errorf("instruction %d uses scratch word %d", i, in.K)
			}
		case unix.BPF_ALU | unix.BPF_ADD | unix.BPF_K, unix.BPF_ALU | unix.BPF_ADD | unix.BPF_X,
			unix.BPF_ALU | unix.BPF_SUB | unix.BPF_K, unix.BPF_ALU | unix.BPF_SUB | unix.BPF_X,
			unix.BPF_ALU | unix.BPF_MUL | unix.BPF_K, unix.BPF_ALU | unix.BPF_MUL | unix.BPF_X,
			unix.BPF_ALU | unix.BPF_DIV | unix.BPF_X, unix.BPF_ALU | unix.BPF_MOD | unix.BPF_X,
			unix.BPF_ALU | unix.BPF_AND | unix.BPF_K, unix.BPF_ALU | unix.BPF_AND | unix.BPF_X,
			unix.BPF_ALU | unix.BPF_OR | unix.BPF_K, unix.BPF_ALU | unix.BPF_OR | unix.BPF_X,
			unix.BPF_ALU | unix.BPF_XOR | unix.BPF_K, unix.BPF_ALU | unix.BPF_XOR | unix.BPF_X,
			unix.BPF_ALU | unix.BPF_LSH | unix.BPF_X, unix.BPF_ALU | unix.BPF_RSH | unix.BPF_X:
		case unix.BPF_ALU | unix.BPF_DIV | unix.BPF_K, unix.BPF_ALU | unix.BPF_MOD | unix.BPF_K:
			if in.K == 0 {
				return fmt.Errorf("instruction %d divides by zero", i)
			}
		case unix.BPF_ALU | unix.BPF_LSH | unix.BPF_K, unix.BPF_ALU | unix.BPF_RSH | unix.BPF_K:
			if in.K >= 32 {
				return fmt.Errorf("instruction %d shifts by %d", i, in.K)
			}
		case unix.BPF_JMP | unix.BPF_JA:
			if !inRange(i, in.K) {
				return fmt.Errorf("instruction %d jumps outside the program", i)
			}
		case unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_X,
			unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K, unix.BPF_JMP | unix.BPF_JGE | unix.BPF_X,
			unix.BPF_JMP | unix.BPF_JGT | unix.BPF_K, unix.BPF_JMP | unix.BPF_JGT | unix.BPF_X,
			unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K, unix.BPF_JMP | unix.BPF_JSET | unix.BPF_X:
			if !inRange(i, uint32(in.Jt)) || !inRange(i, uint32(in.Jf)) {
				return fmt.Errorf("instruction %d jumps outside the program", i)
			}
		default:
			return fmt.Errorf("instruction %d has opcode %#x, which seccomp does not allow", i, in.Code)
		}
	}
	if last := prog[n-1].Code; last != unix.BPF_RET|unix.BPF_K && last != unix.BPF_RET|unix.BPF_A {
		return errors.New("the last instruction is not a return")
	}
	return nil
}
