package seccomp

import (
	"errors"
	"fmt"

	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"
)

// The filter is installed by the sandbox's worker (PID 1) on all its
// threads, as the last setup step; from then on the worker itself lives
// under it: the Go runtime (threads, signals, the scheduler), the channel
// to the supervisor, the fork and exec of every command (and of the limit
// shim, the nsbox binary again, when limits apply). A profile that kills or
// fails one of those calls does not confine the command, it breaks the
// sandbox: SCMP_ACT_KILL kills the calling thread only, so a worker whose
// serving thread dies stays half alive and its supervisor waits on it.
// Such a profile is refused before anything starts (CheckWorkerNeeds).

// Need is one system call the worker, or the start of a command, makes
// after the filter is installed.
type Need struct {
	Name string
	// Args are the arguments the call is checked with (a rule with
	// conditions is evaluated against them): the flags the worker passes.
	Args [6]uint64
	// MustSucceed: an error return breaks the worker as a kill would. The
	// others are only refused when the profile kills or traps them (the
	// worker copes with a failure: clone3 falls back to clone, ...).
	MustSucceed bool
	Why         string
}

// Flags the worker passes to clone(2): the Go runtime's new threads and
// syscall.ForkExec's child (CLONE_VFORK with a pidfd).
const (
	cloneThread = unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND | unix.CLONE_SYSVSEM |
		unix.CLONE_THREAD | unix.CLONE_SETTLS | unix.CLONE_PARENT_SETTID | unix.CLONE_CHILD_CLEARTID
	cloneFork = unix.CLONE_VM | unix.CLONE_VFORK | unix.CLONE_PIDFD | uint64(unix.SIGCHLD)
)

// WorkerNeeds is the table of what the worker and the start of a command
// call under the filter. It was taken from strace -f of `nsbox run` on
// linux/amd64 (a plain run, a run with --memory/--pids through the limit
// shim, the worker's channel and reaper), every call after the worker's
// seccomp(SECCOMP_SET_MODE_FILTER) up to the command's execve, plus the
// calls the Go runtime makes only now and then (madvise, sched_yield,
// nanosleep, ...). It is complete for those paths on that architecture;
// the built-in tools (read_file, write_file, ...) run inside the worker too
// and are not in it: a profile that denies what a tool needs makes that
// tool fail, which the tool reports. TestWorkerNeedsSuffice (test/
// integration) runs a sandbox under a profile that allows only this table.
var WorkerNeeds = []Need{
	// The Go runtime of the worker and of the limit shim.
	{Name: "futex", MustSucceed: true, Why: "Go runtime: locks and thread wake-ups"},
	{Name: "clone", Args: [6]uint64{cloneThread}, MustSucceed: true, Why: "Go runtime: new threads"},
	{Name: "clone3", Why: "Go runtime: new threads (falls back to clone)"},
	{Name: "mmap", MustSucceed: true, Why: "Go runtime: memory"},
	{Name: "munmap", Why: "Go runtime: memory"},
	{Name: "mprotect", Why: "Go runtime: memory"},
	{Name: "madvise", Why: "Go runtime: memory"},
	{Name: "brk", Why: "program start"},
	{Name: "rt_sigaction", Why: "Go runtime: signal handlers"},
	{Name: "rt_sigprocmask", MustSucceed: true, Why: "Go runtime: signal masks"},
	{Name: "rt_sigreturn", MustSucceed: true, Why: "Go runtime: return from a signal handler"},
	{Name: "sigaltstack", Why: "Go runtime: signal stacks"},
	{Name: "gettid", Why: "Go runtime: thread ids"},
	{Name: "getpid", Why: "Go runtime: signals to itself"},
	{Name: "getppid", Why: "limit shim: checks its parent"},
	{Name: "tgkill", Why: "Go runtime: preemption signals"},
	{Name: "sched_yield", Why: "Go runtime: scheduler"},
	{Name: "sched_getaffinity", Why: "Go runtime: CPU count"},
	{Name: "nanosleep", Why: "Go runtime: scheduler"},
	{Name: "epoll_pwait", Why: "Go runtime: network poller"},
	{Name: "epoll_ctl", Why: "Go runtime: network poller"},
	{Name: "epoll_create1", Why: "Go runtime: network poller"},
	{Name: "eventfd2", Why: "Go runtime: network poller"},
	{Name: "arch_prctl", Why: "program start (thread-local storage)"},
	{Name: "set_tid_address", Why: "program start"},
	{Name: "set_robust_list", Why: "program start"},
	{Name: "rseq", Why: "program start (glibc)"},
	{Name: "getrandom", Why: "Go runtime: random seed"},
	{Name: "exit", Why: "Go runtime: thread exit"},
	{Name: "exit_group", MustSucceed: true, Why: "process exit"},
	// The channel to the supervisor.
	{Name: "recvmsg", MustSucceed: true, Why: "worker: reads the supervisor's requests"},
	{Name: "sendmsg", MustSucceed: true, Why: "worker: answers the supervisor (messages with fds)"},
	{Name: "sendto", MustSucceed: true, Why: "worker: answers the supervisor (messages without fds: sendto with no address, which the socket gate does not trap)"},
	{Name: "read", MustSucceed: true, Why: "worker: pipes and files"},
	{Name: "write", MustSucceed: true, Why: "worker: pipes, limit shim: its report"},
	{Name: "ppoll", Why: "worker: waits on fds"},
	{Name: "shutdown", Why: "worker: closes the host-call socket"},
	{Name: "close", MustSucceed: true, Why: "worker: fds"},
	{Name: "fcntl", Why: "worker: fd flags"},
	{Name: "dup3", MustSucceed: true, Why: "command start: stdio"},
	{Name: "pipe2", MustSucceed: true, Why: "command start: exec status pipe"},
	{Name: "openat", Why: "worker and command start"},
	{Name: "openat2", Why: "worker: confined opens"},
	// After the profile's filter, on the thread that forks commands: the
	// openat2 guard (OpenAt2Guard) when the profile lets openat2 through;
	// such a profile that denies this is refused (NeedsOpenAt2Guard).
	{Name: "seccomp", Args: [6]uint64{unix.SECCOMP_SET_MODE_FILTER}, Why: "worker: the openat2 guard for commands"},
	{Name: "statx", MustSucceed: true, Why: "command start: the working directory entered is the one checked (dircheck.c)"},
	{Name: "readlinkat", Why: "limit shim"},
	{Name: "readlink", Why: "limit shim"},
	{Name: "prctl", Why: "limit shim: process attributes"},
	{Name: "prlimit64", Why: "limit shim: rlimits before exec"},
	// Starting, watching and ending commands.
	{Name: "clone", Args: [6]uint64{cloneFork}, MustSucceed: true, Why: "worker: forks each command"},
	{Name: "pidfd_open", Why: "worker: holds commands by pidfd"},
	{Name: "pidfd_send_signal", MustSucceed: true, Why: "worker: signals and kills commands"},
	{Name: "kill", Why: "worker: signals process groups"},
	{Name: "wait4", MustSucceed: true, Why: "worker: reaps every process (it is PID 1)"},
	{Name: "waitid", Why: "worker: reaps commands"},
	{Name: "setsid", MustSucceed: true, Why: "command start: own session"},
	{Name: "setpgid", Why: "command start: own process group"},
	{Name: "chdir", MustSucceed: true, Why: "command start: working directory"},
	{Name: "execve", MustSucceed: true, Why: "command start"},
	{Name: "execveat", Why: "command start through the limit shim"},
}

// ErrWorkerNeed is matched (errors.Is) by a *WorkerNeedError.
var ErrWorkerNeed = errors.New("seccomp profile denies a system call the sandbox needs")

// WorkerNeedError: the filter denies a call of WorkerNeeds.
type WorkerNeedError struct {
	Need   Need
	Action string // what the filter does to it: "kill", "SIGSYS trap", "errno 1", ...
}

func (e *WorkerNeedError) Error() string {
	return fmt.Sprintf("it denies %s (%s), which the sandbox's worker calls after the filter is installed (%s): no command could start or run under it", e.Need.Name, e.Action, e.Need.Why)
}

func (e *WorkerNeedError) Is(target error) bool { return target == ErrWorkerNeed }

// CheckWorkerNeeds evaluates f for each call of WorkerNeeds on this
// machine's native ABI and reports the first one it would break.
func CheckWorkerNeeds(f *Filter) error {
	native, err := libseccomp.GetNativeArch()
	if err != nil {
		return err
	}
	info := archInfoOf(native)
	if info.audit == 0 {
		return nil // an ABI whose seccomp_data.arch nsbox does not know: nothing to evaluate
	}
	for _, n := range WorkerNeeds {
		nr, _, ok := syscallNr(n.Name, native)
		if !ok {
			continue // not on this ABI (arch_prctl on arm64, ...)
		}
		v := f.verdict(nr+int32(info.nrBase), info.audit, n.Args)
		if action := breaks(v, n.MustSucceed); action != "" {
			return &WorkerNeedError{Need: n, Action: action}
		}
	}
	return nil
}

// breaks says what verdict v does to a call that must not die (and, when
// mustSucceed, must not fail), or "" when the call goes through.
func breaks(v uint32, mustSucceed bool) string {
	switch v & unix.SECCOMP_RET_ACTION_FULL {
	case unix.SECCOMP_RET_ALLOW, unix.SECCOMP_RET_LOG:
		return ""
	case unix.SECCOMP_RET_KILL_PROCESS, unix.SECCOMP_RET_KILL_THREAD:
		return "kill"
	case unix.SECCOMP_RET_TRAP:
		return "SIGSYS trap"
	}
	if !mustSucceed {
		return ""
	}
	switch v & unix.SECCOMP_RET_ACTION_FULL {
	case unix.SECCOMP_RET_ERRNO:
		return fmt.Sprintf("errno %d", v&unix.SECCOMP_RET_DATA)
	case unix.SECCOMP_RET_TRACE, unix.SECCOMP_RET_USER_NOTIF:
		return "a tracer or listener the sandbox does not have"
	}
	return fmt.Sprintf("action %#x", v)
}
