package sandbox

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/nsbox/nsbox/pkg/landlock"
	"golang.org/x/sys/unix"
)

// Socket filters of the Landlock backend (setupMsg.SocketFilter).
const (
	// socketFilterNone refuses socket(2) for every family: network none
	// without a network namespace of its own.
	socketFilterNone = "none"
	// socketFilterUnix refuses socket(AF_UNIX): --net host, where the
	// host's unix sockets (a container runtime's, a D-Bus bus) are still
	// no business of the sandbox's.
	socketFilterUnix = "unix"
)

// landlockSteps is the Landlock worker's ordered setup: no namespace to
// set up, so no hostname, loopback or root to build.
func (w *worker) landlockSteps() []step {
	return []step{
		{"open nsbox binary", w.openSelf},
		{"use nsbox binary read-only", w.shimFromSelf},
		// landlock_init.c confined the process before the Go runtime
		// started: every thread (the tools' too) and every command is in
		// the domain. A worker that is not must not serve.
		{"confine with landlock", landlockApplied},
		// Orphans of commands (a daemon that double-forked and setsid'd)
		// are reparented to the worker, not to the host's init, so that
		// the worker can kill them at the session's end (killDescendants).
		{"become child subreaper", func() error { return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }},
		{"close inherited fds", w.closeFDs},
		{"set rlimits", w.setRlimits},
		{"drop capabilities", w.dropCaps},
		{"set no_new_privs", setNoNewPrivs},
		// Before the profile's filter: both stay (the stricter answer
		// wins), and the profile may deny seccomp(2) itself.
		{"install socket filter", w.installSocketFilter},
		// seccomp is last: every step above needs syscalls it denies.
		{"install seccomp filter", w.installSeccomp},
	}
}

// shimFromSelf is cloneShim without a mount namespace: the limit shim runs
// from the binary itself, which the Landlock rules grant read and execute
// only (landlockGrants), so no process inside can write it through
// /proc/PID/exe or any path (CVE-2019-5736 class).
func (w *worker) shimFromSelf() error {
	if !w.needsShim() {
		return nil
	}
	fd, err := unix.FcntlInt(uintptr(w.selfFD), unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return err
	}
	w.shimFD = fd
	return nil
}

// landlockScopes is the namespace sandbox's second layer (issue 17): the
// abstract unix socket and signal scopes of Landlock ABI 6 on the thread
// that forks every command. With --net host the sandbox shares the host's
// abstract socket namespace; the scope refuses connects to sockets made
// outside the sandbox, and signals to processes outside it. Without ABI 6
// it does nothing (nsbox status says so).
func (w *worker) landlockScopes() error {
	if w.setup.NoScopes {
		return nil
	}
	abi, err := landlock.ABI()
	if err != nil || abi < 6 {
		return nil
	}
	rs, err := landlock.Build(landlock.Config{Scoped: landlock.ScopeAbstractUnix | landlock.ScopeSignal})
	if err != nil {
		return err
	}
	defer rs.Close()
	// On this thread: commands fork from it (forkTid). The worker's other
	// threads run only its own code.
	return rs.RestrictSelf()
}

// installSocketFilter adds a small seccomp filter refusing socket(2) (all
// families, or AF_UNIX only) and io_uring_setup (whose operations would
// open and connect sockets past seccomp), on every thread (TSYNC). A
// foreign ABI (i386's socketcall, x32) gets EACCES for everything.
func (w *worker) installSocketFilter() error {
	if w.setup.SocketFilter == "" {
		return nil
	}
	prog, err := socketFilter(w.setup.SocketFilter == socketFilterNone)
	if err != nil {
		return err
	}
	fp := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fp))); errno != 0 {
		return fmt.Errorf("seccomp(SET_MODE_FILTER): %w", errno)
	}
	runtime.KeepAlive(prog)
	return nil
}

// auditArch is the AUDIT_ARCH_* of this build's architecture.
func auditArch() (uint32, error) {
	switch runtime.GOARCH {
	case "amd64":
		return 0xc000003e, nil
	case "arm64":
		return 0xc00000b7, nil
	}
	return 0, fmt.Errorf("no socket filter for %s", runtime.GOARCH)
}

// socketFilter assembles the filter (classic BPF on struct seccomp_data:
// nr at 0, arch at 4, args[0] at 16, low word first on these
// little-endian architectures).
func socketFilter(all bool) ([]unix.SockFilter, error) {
	arch, err := auditArch()
	if err != nil {
		return nil, err
	}
	const (
		ld  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		ret = unix.BPF_RET | unix.BPF_K
	)
	deny := uint32(unix.SECCOMP_RET_ERRNO | uint32(unix.EACCES))
	allow := uint32(unix.SECCOMP_RET_ALLOW)
	// Indices: 8 = allow, 9 = deny; jumps are relative to the next one.
	prog := []unix.SockFilter{
		{Code: ld, K: 4},                                      // 0: arch
		{Code: jeq, K: arch, Jt: 0, Jf: 7},                    // 1: foreign ABI -> deny
		{Code: ld, K: 0},                                      // 2: nr
		{Code: jge, K: 0x40000000, Jt: 5, Jf: 0},              // 3: x32 -> deny
		{Code: jeq, K: unix.SYS_IO_URING_SETUP, Jt: 4, Jf: 0}, // 4: -> deny
		{Code: jeq, K: unix.SYS_SOCKET, Jt: 0, Jf: 2},         // 5: not socket -> allow
		{Code: ld, K: 16},                                     // 6: args[0], the family
		{Code: jeq, K: unix.AF_UNIX, Jt: 1, Jf: 0},            // 7: AF_UNIX -> deny
		{Code: ret, K: allow},                                 // 8
		{Code: ret, K: deny},                                  // 9
	}
	if all {
		// Every family: index 6 jumps straight to deny.
		prog[6] = unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JA, K: 2}
	}
	return prog, nil
}

// killDescendants kills every process the Landlock worker started and
// every orphan reparented to it (it is their subreaper), until none is
// left: with no PID namespace, nothing else ends them with the session.
// Each pass SIGKILLs the worker's children; a child's own children are
// reparented to the worker when it dies and are killed by the next pass.
func killDescendants() {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		kids := children()
		if len(kids) == 0 {
			return
		}
		for _, pid := range kids {
			unix.Kill(pid, unix.SIGKILL)
			// Its process group too: a command is a group leader.
			unix.Kill(-pid, unix.SIGKILL)
		}
		// Reap what died (the reaper goroutine may race us for it; either
		// one reaping is fine) so that the next pass sees their orphans.
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, unix.WNOHANG|unix.WALL, nil)
			if err == unix.EINTR {
				continue
			}
			if pid <= 0 || err != nil {
				break
			}
		}
		time.Sleep(time.Millisecond)
	}
}

// children lists the worker's children (of all its threads), from
// /proc/self/task/*/children (CONFIG_PROC_CHILDREN), zombies included.
func children() []int {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil
	}
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				out = append(out, pid)
			}
		}
	}
	return out
}
