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
	v, steps, ok := runProgram(prog, d.bytes())
	if !ok {
		t.Fatalf("program has an unsupported load or fell off the end (after %d instructions)", steps)
	}
	return v, steps
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
