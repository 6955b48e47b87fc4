package sandbox

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestReview2LandlockFilterRefusesSchedulingOthers (second outside review
// of the landlock backend): without a PID namespace a command names every
// host process of the caller by pid (as root: every root process with no
// more capabilities, such as other root sandboxes' processes), and
// Landlock's scopes cover signals and abstract sockets only, so the
// command's filters must refuse changing another process's scheduling, as
// they refuse prlimit64 of another pid. They refuse none of these; each call here targets a pid that is neither the caller (0) nor a
// command of the session. Fails on the code it was written against.
func TestReview2LandlockFilterRefusesSchedulingOthers(t *testing.T) {
	const worker, host = 4242, 1
	// Either of the two filters a command carries may refuse it (the
	// stricter answer wins).
	cmd, err := commandFilterLandlock(true, metaOff, worker, nil)
	if err != nil {
		t.Fatal(err)
	}
	sock, err := socketFilter(true, worker, true)
	if err != nil {
		t.Fatal(err)
	}
	deny := uint32(unix.SECCOMP_RET_ERRNO | uint32(unix.EACCES))
	const (
		prioProcess, prioUser = 0, 2
		ioprioWhoProcess      = 1
		ioprioIdle            = 3 << 13
	)
	for _, c := range []struct {
		name string
		nr   int
		args []uint64
	}{
		{"setpriority(PRIO_PROCESS, host pid, 19)", unix.SYS_SETPRIORITY, []uint64{prioProcess, host, 19}},
		{"setpriority(PRIO_USER, 0, 19): every process of the uid", unix.SYS_SETPRIORITY, []uint64{prioUser, 0, 19}},
		{"sched_setscheduler(host pid, SCHED_IDLE)", unix.SYS_SCHED_SETSCHEDULER, []uint64{host, 5, 0}},
		{"sched_setattr(host pid)", unix.SYS_SCHED_SETATTR, []uint64{host, 0, 0}},
		{"sched_setaffinity(host pid)", unix.SYS_SCHED_SETAFFINITY, []uint64{host, 8, 0}},
		{"ioprio_set(IOPRIO_WHO_PROCESS, host pid, idle)", unix.SYS_IOPRIO_SET, []uint64{ioprioWhoProcess, host, ioprioIdle}},
		{"setpriority(PRIO_PROCESS, worker, 19)", unix.SYS_SETPRIORITY, []uint64{prioProcess, worker, 19}},
	} {
		if runBPF(t, cmd, c.nr, c.args...) != deny && runBPF(t, sock, c.nr, c.args...) != deny {
			t.Errorf("%s: allowed by both filters, want EACCES (it lowers the priority of a process outside the sandbox)", c.name)
		}
	}
}
