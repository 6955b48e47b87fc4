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
		{"drop capabilities", w.dropCapsLandlock},
		{"set no_new_privs", setNoNewPrivs},
		{"probe pidfds", w.probePidfds},
		// Before the profile's filter: both stay (the stricter answer
		// wins), and the profile may deny seccomp(2) itself.
		{"install socket filter", w.installSocketFilter},
		// seccomp is last: every step above needs syscalls it denies.
		{"install seccomp filter", w.installSeccomp},
	}
}

// dropCapsLandlock drops every capability as dropCaps does when the worker
// holds any (nsbox run by root, in a container too: the capabilities are
// the host's or the container's own, here); a worker without any (a
// non-root caller) cannot lock securebits, and needs not: with
// no_new_privs nothing it executes can gain one.
func (w *worker) dropCapsLandlock() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err
	}
	if data[0].Permitted|data[1].Permitted|data[0].Effective|data[1].Effective != 0 || w.setup.AllowPrivileged {
		// --allow-privileged is meaningless without a user namespace of
		// the sandbox's own: dropCaps refuses nothing, so refuse here.
		if w.setup.AllowPrivileged {
			return fmt.Errorf("--allow-privileged needs the native backend: without a user namespace the capabilities would be the host's")
		}
		return w.dropCaps()
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	var none [2]unix.CapUserData
	return unix.Capset(&hdr, &none[0])
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

// installSocketFilter adds the Landlock backend's own seccomp filter, on
// every thread (TSYNC), inherited by every command:
//   - socket(2) refused for every family, or for AF_UNIX only, and
//     io_uring_setup (whose operations would open and connect sockets past
//     seccomp);
//   - signals to the worker refused (kill, tgkill, rt_sigqueueinfo,
//     rt_tgsigqueueinfo of its pid or process group, kill(-1), tkill, and
//     pidfd_send_signal altogether: a /proc/PID fd is a pidfd too), and
//     pidfd_open and prlimit64 of it. Without a PID namespace the worker
//     is an ordinary process of the same uid and domain; killed, it could
//     not kill the session's processes at its end (no cgroup without
//     limits), which would outlive the session. SIGURG (the Go runtime's
//     preemption signal, which it sends to its own threads) and signal 0
//     stay allowed;
//   - a foreign ABI (i386's socketcall, x32) refused outright.
func (w *worker) installSocketFilter() error {
	if w.setup.SocketFilter == "" {
		return nil
	}
	prog, err := socketFilter(w.setup.SocketFilter == socketFilterNone, os.Getpid())
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

// probePidfds is serve's pidfd check done before the filter, which
// refuses pidfd_open of the worker's own pid.
func (w *worker) probePidfds() error {
	if fd, err := unix.PidfdOpen(os.Getpid(), 0); err == nil {
		unix.Close(fd)
		w.pidfdsOK = true
	}
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

// bpfAsm assembles classic BPF with symbolic jump targets.
type bpfAsm struct {
	prog   []unix.SockFilter
	labels map[string]int
	fixups []bpfFixup
}

type bpfFixup struct {
	at         int
	jt, jf, ja string
}

func (a *bpfAsm) label(name string) { a.labels[name] = len(a.prog) }
func (a *bpfAsm) stmt(code uint16, k uint32) {
	a.prog = append(a.prog, unix.SockFilter{Code: code, K: k})
}

// jump jumps to jt when the comparison holds, else to jf ("" is the next
// instruction).
func (a *bpfAsm) jump(code uint16, k uint32, jt, jf string) {
	a.fixups = append(a.fixups, bpfFixup{at: len(a.prog), jt: jt, jf: jf})
	a.prog = append(a.prog, unix.SockFilter{Code: code, K: k})
}

// ja jumps to a label unconditionally.
func (a *bpfAsm) ja(to string) {
	a.fixups = append(a.fixups, bpfFixup{at: len(a.prog), ja: to})
	a.prog = append(a.prog, unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JA})
}

func (a *bpfAsm) done() ([]unix.SockFilter, error) {
	for _, f := range a.fixups {
		if f.ja != "" {
			to, ok := a.labels[f.ja]
			if !ok || to <= f.at {
				return nil, fmt.Errorf("bpf: bad jump to %q", f.ja)
			}
			a.prog[f.at].K = uint32(to - f.at - 1)
			continue
		}
		for i, l := range []string{f.jt, f.jf} {
			if l == "" {
				continue
			}
			to, ok := a.labels[l]
			off := to - f.at - 1
			if !ok || off < 0 || off > 255 {
				return nil, fmt.Errorf("bpf: bad jump to %q", l)
			}
			if i == 0 {
				a.prog[f.at].Jt = uint8(off)
			} else {
				a.prog[f.at].Jf = uint8(off)
			}
		}
	}
	return a.prog, nil
}

// socketFilter assembles the filter (classic BPF on struct seccomp_data:
// nr at 0, arch at 4, args[i] at 16+8i, the low word first on these
// little-endian architectures; pids and signals are ints, so the low word
// is the whole value).
func socketFilter(allSockets bool, worker int) ([]unix.SockFilter, error) {
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
	arg := func(i int) uint32 { return uint32(16 + 8*i) }
	self, group := uint32(worker), uint32(-worker)
	a := &bpfAsm{labels: map[string]int{}}
	a.stmt(ld, 4)
	a.jump(jeq, arch, "", "deny")
	a.stmt(ld, 0)
	a.jump(jge, 0x40000000, "deny", "") // x32
	a.jump(jeq, unix.SYS_IO_URING_SETUP, "deny", "")
	a.jump(jeq, unix.SYS_TKILL, "deny", "")
	// A /proc/PID directory fd is a pidfd too: its target cannot be told.
	a.jump(jeq, unix.SYS_PIDFD_SEND_SIGNAL, "deny", "")
	a.jump(jeq, unix.SYS_SOCKET, "socket", "")
	a.jump(jeq, unix.SYS_KILL, "sig1", "")
	a.jump(jeq, unix.SYS_RT_SIGQUEUEINFO, "sig1", "")
	a.jump(jeq, unix.SYS_TGKILL, "sig2", "")
	a.jump(jeq, unix.SYS_RT_TGSIGQUEUEINFO, "sig2", "")
	a.jump(jeq, unix.SYS_PIDFD_OPEN, "target", "")
	a.jump(jeq, unix.SYS_PRLIMIT64, "target", "allow")
	// Signal in args[1] (kill, rt_sigqueueinfo) or args[2] (tgkill,
	// rt_tgsigqueueinfo): 0 and SIGURG are harmless to the worker.
	a.label("sig1")
	a.stmt(ld, arg(1))
	a.ja("sigcheck")
	a.label("sig2")
	a.stmt(ld, arg(2))
	a.label("sigcheck")
	a.jump(jeq, 0, "allow", "")
	a.jump(jeq, uint32(unix.SIGURG), "allow", "target")
	a.label("target")
	a.stmt(ld, arg(0))
	a.jump(jeq, self, "deny", "")
	a.jump(jeq, group, "deny", "")
	a.jump(jeq, 0xffffffff, "deny", "allow") // kill(-1): every process the uid may signal
	a.label("socket")
	if allSockets {
		a.ja("deny")
	}
	a.stmt(ld, arg(0)) // the family
	a.jump(jeq, unix.AF_UNIX, "deny", "allow")
	a.label("allow")
	a.stmt(ret, unix.SECCOMP_RET_ALLOW)
	a.label("deny")
	a.stmt(ret, unix.SECCOMP_RET_ERRNO|uint32(unix.EACCES))
	return a.done()
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
