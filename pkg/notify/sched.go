package notify

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// schedAttr is struct sched_attr (sched_setattr(2)), up to sched_period:
// SCHED_ATTR_SIZE_VER0, which every kernel with the call accepts.
type schedAttr struct {
	Size     uint32
	Policy   uint32
	Flags    uint64
	Nice     int32
	Priority uint32
	Runtime  uint64
	Deadline uint64
	Period   uint64
}

// serveSlice is the time slice a serving thread asks of the scheduler:
// the shortest the kernel grants (0.1 ms; it clamps to [0.1, 100] ms).
const serveSlice = 100_000 // ns

// shortSlice asks the EEVDF scheduler (Linux 6.12) for a short time slice
// for the calling thread: sched_attr.sched_runtime of a SCHED_OTHER thread
// is its requested slice, which any thread may set for itself; its nice
// value and its share of the CPU stay what they were (the weight is the
// nice value's; a short slice gives an earlier virtual deadline, not more
// time).
//
// Why: answering a connect, the supervisor's own connect wakes the
// listener, which the scheduler then ran at once on this CPU in place of
// the supervisor (wake-up preemption: same weight, later start), so the
// target waited for the listener's accept before its answer could be
// sent (perf sched: 36–120 µs per connect on two CPUs). With the earlier
// deadline of a short slice the woken task waits until this thread
// sleeps again (in the answer, or in poll), a few microseconds later.
// Best effort: an older kernel ignores sched_runtime for SCHED_OTHER,
// and a thread under another policy (SCHED_IDLE, real time) is left as
// it is.
func shortSlice() {
	var a schedAttr
	if _, _, e := unix.Syscall6(unix.SYS_SCHED_GETATTR, 0, uintptr(unsafe.Pointer(&a)), unsafe.Sizeof(a), 0, 0, 0); e != 0 {
		return
	}
	if a.Policy != unix.SCHED_NORMAL && a.Policy != unix.SCHED_BATCH {
		return
	}
	a.Size = uint32(unsafe.Sizeof(a))
	// Reset on fork: a process started from this thread (os/exec forks
	// from the calling thread) gets the default slice, not this one.
	a.Flags = unix.SCHED_FLAG_RESET_ON_FORK
	a.Runtime = serveSlice
	unix.Syscall(unix.SYS_SCHED_SETATTR, 0, uintptr(unsafe.Pointer(&a)), 0)
}
