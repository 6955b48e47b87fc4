// Package cbpf assembles the classic BPF programs nsbox writes by hand
// (seccomp filters on struct seccomp_data), with jumps to named labels
// that are resolved when the program is complete. It is the one
// assembler of the project: the notification filter (pkg/notify), the
// Landlock backend's filters (pkg/sandbox) and the ENOSYS stub before
// libseccomp's program (pkg/seccomp) are written with it.
//
// Classic BPF jumps only forward (its offsets are unsigned), a
// conditional jump at most 255 instructions (an 8-bit offset:
// Documentation/networking/filter.rst), so Assemble refuses any other
// jump: a mistake in a
// filter is an error at assembly, never a jump the kernel refuses at
// install or, worse, a jump to another instruction than the one named.
package cbpf

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Instruction classes and operands the filters use.
const (
	LdAbs = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	Ret   = unix.BPF_RET | unix.BPF_K
	And   = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K

	JEq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	JGe  = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	JGt  = unix.BPF_JMP | unix.BPF_JGT | unix.BPF_K
	JSet = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K // any bit of k set
)

// Asm is a program being assembled. The zero value is an empty program.
type Asm struct {
	ins    []unix.SockFilter
	labels map[string]int
	fix    []fixup
}

// fixup is a jump whose offsets Assemble fills in.
type fixup struct {
	at     int
	jt, jf string // "" is the next instruction
	always bool   // BPF_JA: jt is the target, the offset goes in K
}

// Label names the next instruction appended (or, at the end, the first
// instruction of whatever is placed after the program). A name given
// twice names the later place.
func (a *Asm) Label(name string) {
	if a.labels == nil {
		a.labels = map[string]int{}
	}
	a.labels[name] = len(a.ins)
}

// Stmt appends an instruction that does not jump.
func (a *Asm) Stmt(code uint16, k uint32) {
	a.ins = append(a.ins, unix.SockFilter{Code: code, K: k})
}

// Jump appends a conditional jump (code is JEq, JGe, JGt or JSet): to jt
// when the accumulator compared with k holds, else to jf; "" is the next
// instruction.
func (a *Asm) Jump(code uint16, k uint32, jt, jf string) {
	a.fix = append(a.fix, fixup{at: len(a.ins), jt: jt, jf: jf})
	a.ins = append(a.ins, unix.SockFilter{Code: code, K: k})
}

// JA appends an unconditional jump to the label to.
func (a *Asm) JA(to string) {
	a.fix = append(a.fix, fixup{at: len(a.ins), jt: to, always: true})
	a.ins = append(a.ins, unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JA})
}

// Assemble resolves every jump and returns the program. A jump to a name
// that is no label, or to a label not after the jump, or a conditional
// jump farther than 255 instructions, is an error naming the label.
func (a *Asm) Assemble() ([]unix.SockFilter, error) {
	off := func(at int, l string, limit int) (int, error) {
		if l == "" {
			return 0, nil
		}
		to, ok := a.labels[l]
		d := to - at - 1
		if !ok || d < 0 || d > limit {
			return 0, fmt.Errorf("bpf: bad jump to %q at instruction %d", l, at)
		}
		return d, nil
	}
	for _, f := range a.fix {
		if f.always {
			d, err := off(f.at, f.jt, int(^uint32(0)>>1))
			if err != nil {
				return nil, err
			}
			a.ins[f.at].K = uint32(d)
			continue
		}
		jt, err := off(f.at, f.jt, 255)
		if err != nil {
			return nil, err
		}
		jf, err := off(f.at, f.jf, 255)
		if err != nil {
			return nil, err
		}
		a.ins[f.at].Jt, a.ins[f.at].Jf = uint8(jt), uint8(jf)
	}
	return a.ins, nil
}
