package notify

import (
	"runtime"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestShortSlice checks that a serving thread gets the short slice it
// asks for where the kernel keeps one (EEVDF, Linux 6.12), and that its
// nice value and policy stay what they were.
func TestShortSlice(t *testing.T) {
	runtime.LockOSThread() // the thread is changed: it ends with the test
	get := func() schedAttr {
		var a schedAttr
		if _, _, e := unix.Syscall6(unix.SYS_SCHED_GETATTR, 0, uintptr(unsafe.Pointer(&a)), unsafe.Sizeof(a), 0, 0, 0); e != 0 {
			t.Skipf("sched_getattr: %v", e)
		}
		return a
	}
	before := get()
	if before.Policy != unix.SCHED_NORMAL {
		t.Skipf("the test thread runs under policy %d", before.Policy)
	}
	shortSlice()
	after := get()
	if after.Runtime == 0 {
		t.Skip("the kernel keeps no slice for SCHED_OTHER (before 6.12)")
	}
	if after.Runtime != serveSlice {
		t.Errorf("slice %d ns, want %d", after.Runtime, serveSlice)
	}
	if after.Policy != before.Policy || after.Nice != before.Nice {
		t.Errorf("policy/nice changed: %d/%d -> %d/%d", before.Policy, before.Nice, after.Policy, after.Nice)
	}
	if after.Flags&unix.SCHED_FLAG_RESET_ON_FORK == 0 {
		t.Errorf("flags %#x: no SCHED_FLAG_RESET_ON_FORK", after.Flags)
	}
}
