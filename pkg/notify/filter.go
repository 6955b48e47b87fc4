package notify

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/pkg/internal/cbpf"
)

// ErrUnsupported is returned where the kernel or the architecture has no
// seccomp user notification (or no pidfd_getfd, which the supervisor needs
// to act on the target's sockets).
var ErrUnsupported = errors.New("seccomp user notification is not available")

// Offsets in struct seccomp_data.
const (
	offNr   = 0
	offArch = 4
	offArgs = 16
)

// archCalls are syscall numbers of one audit architecture.
type archCalls struct {
	arch uint32
	nrs  []uint32
}

// asm is the notification filter's assembler: the project's (cbpf), with
// the jumps it writes most spelled short.
type asm struct{ cbpf.Asm }

// jset jumps to jt when A & k != 0, else to jf.
func (a *asm) jset(k uint32, jt, jf string) { a.Jump(cbpf.JSet, k, jt, jf) }

// jge jumps to jt when A >= k, else to jf.
func (a *asm) jge(k uint32, jt, jf string) { a.Jump(cbpf.JGe, k, jt, jf) }

// jeq jumps to jt when A == k, else to jf ("" is the next instruction).
func (a *asm) jeq(k uint32, jt, jf string) { a.Jump(cbpf.JEq, k, jt, jf) }

// refuse makes each of names a jump to "eperm", falling through to the
// next instruction otherwise: a list of refused option names.
func (a *asm) refuse(names ...uint32) {
	for _, k := range names {
		a.jeq(k, "eperm", "")
	}
}

func (a *asm) done() []unix.SockFilter {
	prog, err := a.Assemble()
	if err != nil {
		panic("notify: " + err.Error()) // a bug in Program, caught by its test
	}
	return prog
}

// Program returns the notification filter: connect, sendmsg and sendmmsg
// always notify; sendto notifies only when its address argument is not
// NULL (send(2) to a connected socket costs nothing). setgroups(2), in
// every ABI, notifies too, and is let through unchanged (Server.handle):
// it tells the Server that the groups it keeps of a thread may be stale
// (creds). The same socket calls of a
// foreign ABI (i386, x32, 32-bit ARM: foreignSocketCalls) fail with
// EACCES: the supervisor reads native arguments only, and the main filter
// normally kills those ABIs anyway. Everything else is allowed here: this
// filter decides who answers, the main filter what is denied. The kernel
// keeps the stronger of the two results (seccomp(2): kill, trap, errno,
// then this filter's notification, then trace, log, allow), so a main
// filter denies a call here only with an errno or stronger: nsbox's
// profiles compile SCMP_ACT_TRACE to ENOSYS for that reason
// (pkg/seccomp).
func Program(o ProgramOptions) []unix.SockFilter {
	const ld, ret = cbpf.LdAbs, cbpf.Ret
	a := &asm{}
	a.Stmt(ld, offArch)
	a.jeq(auditArch, "native", "")
	for i, fc := range foreignSocketCalls {
		a.jeq(fc.arch, "foreign"+string(rune('0'+i)), "")
	}
	a.Stmt(ret, unix.SECCOMP_RET_ALLOW)
	// BPF jumps only forward: the blocks come first, the shared returns
	// last.
	a.Label("native")
	a.Stmt(ld, offNr)
	a.jeq(uint32(unix.SYS_CONNECT), "notify", "")
	a.jeq(uint32(unix.SYS_SENDMSG), "notify", "")
	a.jeq(uint32(unix.SYS_SENDMMSG), "notify", "")
	// shutdown(2) turns a TCP socket still connecting (SYN_SENT) back
	// into an unconnected one (inet_shutdown disconnects it): one the
	// filtered network installed from the host's network namespace could
	// then bind and listen there (found by review). Its handler sees it.
	a.jeq(uint32(unix.SYS_SHUTDOWN), "notify", "")
	a.jeq(uint32(unix.SYS_SENDTO), "sendto", "")
	if o.Filtered {
		// Sockets of the host's network namespace live in this
		// sandbox (the filtered network installs them): none may
		// listen, whatever path led it back to an unconnected state
		// (found by review, three such paths one after another);
		// listen goes to the handler, which refuses it on those.
		a.jeq(uint32(unix.SYS_LISTEN), "notify", "")
		// And none may be steered: a segment-routing header
		// (IPV6_RTHDR) sent an allowed connection's data through a
		// first hop of the program's choosing, and SO_BINDTODEVICE
		// (unprivileged since 5.7) pinned it to any host interface
		// (found by review). Refused on every socket: inside, only lo
		// exists.
		a.jeq(uint32(unix.SYS_SETSOCKOPT), "setsockopt", "")
	}
	if o.deviceIoctls() {
		// A socket's device ioctls answer for its namespace: the
		// hostCall socket's and an installed socket's for the host's
		// (ioctl.go).
		a.jeq(uint32(unix.SYS_IOCTL), "ioctl", "")
		for _, nr := range ioctlOf(auditArch) {
			a.jeq(nr, "ioctl-foreign", "")
		}
	}
	for _, nr := range socketCalls {
		a.jeq(nr, "socket", "")
	}
	for _, nr := range setgroupsOf(auditArch) {
		a.jeq(nr, "notify", "")
	}
	for _, nr := range nativeForeignCalls {
		a.jeq(nr, "deny", "")
	}
	if o.Filtered {
		for _, nr := range filteredForeign(auditArch) {
			a.jeq(nr, "deny", "")
		}
	}
	// io_uring's IORING_OP_CONNECT and IORING_OP_SENDMSG make the same
	// calls with no syscall to notify: with the gate, io_uring is not
	// there (ENOSYS, which programs take for an older kernel and fall
	// back from), in any ABI (review 38: i386's, by int $0x80 from a
	// 64-bit program, connected an installed host socket anywhere, and
	// a unix socket past the gate). The main filter denies it too; this
	// holds also under --seccomp unconfined.
	for _, nr := range ioUringSetupOf(auditArch) {
		a.jeq(nr, "nosys", "")
	}
	a.Stmt(ret, unix.SECCOMP_RET_ALLOW)
	// sendto with MSG_FASTOPEN (its 4th argument, flags, an int) goes
	// to the handler even without an address: on a socket whose connect
	// failed, the kernel's fast-open path (tcp_sendmsg_fastopen, then
	// __inet_stream_connect's error path) leaves it unconnected, and one
	// the filtered network installed from the host's network namespace
	// could then listen there (found by review). Otherwise sendto's 5th
	// argument (dest_addr), as two 32-bit words (little endian: the low
	// word first): NULL is allowed.
	a.Label("sendto")
	a.Stmt(ld, offArgs+3*8)
	a.jset(unix.MSG_FASTOPEN, "notify", "")
	a.Stmt(ld, offArgs+4*8)
	a.jeq(0, "", "notify")
	a.Stmt(ld, offArgs+4*8+4)
	a.jeq(0, "allow", "notify")
	for i, fc := range foreignSocketCalls {
		a.Label("foreign" + string(rune('0'+i)))
		a.Stmt(ld, offNr)
		for _, nr := range setgroupsOf(fc.arch) {
			a.jeq(nr, "notify", "")
		}
		for _, nr := range fc.nrs {
			a.jeq(nr, "deny", "")
		}
		for _, nr := range ioUringSetupOf(fc.arch) {
			a.jeq(nr, "nosys", "")
		}
		if o.Filtered {
			for _, nr := range filteredForeign(fc.arch) {
				a.jeq(nr, "deny", "")
			}
		}
		if o.deviceIoctls() {
			for _, nr := range ioctlOf(fc.arch) {
				a.jeq(nr, "ioctl-foreign", "")
			}
		}
		a.Stmt(ret, unix.SECCOMP_RET_ALLOW)
	}
	// socket(2)'s domain (an int: the low word): AF_VSOCK talks to the
	// hypervisor and the host's other VMs whatever the network namespace,
	// past --net none and the filtered network alike (found by review;
	// the shipped profiles deny it too, but --seccomp unconfined does
	// not). i386's socketcall hides its arguments in memory: that ABI is
	// the main filter's to kill.
	a.Label("socket")
	a.Stmt(ld, offArgs)
	a.jeq(unix.AF_VSOCK, "noafsupport", "allow")
	if o.Filtered {
		// setsockopt(fd, level, optname, ...): level and optname are
		// ints (the low words).
		a.Label("setsockopt")
		a.Stmt(ld, offArgs+1*8)
		a.jeq(unix.SOL_SOCKET, "sockopt-socket", "")
		a.jeq(unix.IPPROTO_IPV6, "sockopt-ipv6", "")
		a.jeq(unix.IPPROTO_IP, "sockopt-ip", "allow")
		a.Label("sockopt-socket")
		a.Stmt(ld, offArgs+2*8)
		a.jeq(unix.SO_BINDTODEVICE, "eperm", "")
		a.jeq(unix.SO_BINDTOIFINDEX, "eperm", "allow")
		a.Label("sockopt-ipv6")
		a.Stmt(ld, offArgs+2*8)
		a.refuse(unix.IPV6_RTHDR, unix.IPV6_2292RTHDR)
		// Every other name that installs sticky IPv6 extension headers
		// (np->opt, sent on each segment of a TCP socket; ipv6(7),
		// RFC 3542 section 6, RFC 2292; numbers of uapi linux/in6.h):
		// IPV6_2292PKTOPTIONS (6) takes a whole cmsg buffer, a routing
		// header among it with no privilege asked, and set the header
		// refused above as IPV6_RTHDR, by another name (found by review:
		// TestReview2DNSStickyRoutingHeaderViaPktoptions). IPV6_HOPOPTS
		// (54), IPV6_RTHDRDSTOPTS (55), IPV6_DSTOPTS (59) add hop-by-hop
		// and destination options that a host or router on the path
		// acts on; the kernel asks CAP_NET_RAW over the socket's network
		// namespace for them (ipv6_set_opt_hdr), refused here whatever
		// the sandbox holds. IPV6_2292HOPOPTS (3) and IPV6_2292DSTOPTS
		// (4) only ask for those headers on received packets today, but
		// name them in RFC 2292's API: refused too, nothing needs them.
		a.refuse(unix.IPV6_2292PKTOPTIONS, unix.IPV6_HOPOPTS, unix.IPV6_RTHDRDSTOPTS,
			unix.IPV6_DSTOPTS, unix.IPV6_2292HOPOPTS, unix.IPV6_2292DSTOPTS)
		// Group joins (multicast and anycast): on an installed socket,
		// one of the host's network namespace, they join a group on any
		// host interface the program names by index, and the host then
		// sends MLDv2 reports on that link carrying the group and source
		// addresses the program chose: traffic past the allowlist to the
		// host's LAN, and host state the sandbox outlives (found by
		// review: TestReview3NetMulticastJoinOnInstalledSocket). The
		// kernel refuses only IPV6_ADD_MEMBERSHIP on TCP, not
		// MCAST_JOIN_GROUP (ipv6(7), RFC 3678). Names 42-48 are MCAST_*.
		a.refuse(unix.IPV6_ADD_MEMBERSHIP, unix.IPV6_DROP_MEMBERSHIP, unix.IPV6_JOIN_ANYCAST, unix.IPV6_LEAVE_ANYCAST)
		// IPV6_UNICAST_IF and IP_UNICAST_IF name an interface by index,
		// looked up in the socket's namespace with no privilege asked:
		// on an installed socket, an oracle of the host's interface
		// indices, as SO_BINDTOIFINDEX was (review 39,
		// TestReview39InstalledSocketUnicastIfIndexOracle).
		a.refuse(unix.IPV6_UNICAST_IF)
		a.jge(unix.MCAST_JOIN_GROUP, "", "allow")
		a.jge(unix.MCAST_MSFILTER+1, "allow", "eperm")
		a.Label("sockopt-ip")
		a.Stmt(ld, offArgs+2*8)
		a.jeq(unix.IP_OPTIONS, "eperm", "")
		a.jeq(unix.IP_UNICAST_IF, "eperm", "")
		// The same joins at IPPROTO_IP (ip(7), RFC 3678), names 35-48:
		// IP_ADD_MEMBERSHIP to IP_MSFILTER and MCAST_JOIN_GROUP to
		// MCAST_MSFILTER. The IGMPv3 reports go out on the host's link.
		a.jge(unix.IP_ADD_MEMBERSHIP, "", "allow")
		a.jge(unix.MCAST_MSFILTER+1, "allow", "eperm")
	}
	if o.deviceIoctls() {
		// ioctl(fd, request, arg): request is an unsigned int (the low
		// word; the kernel ignores the high one). The device ioctls
		// notify but those that set and the socket's own two (ioctl.go);
		// most requests (a terminal's, FIONREAD) are past the first
		// test. A foreign ABI's are refused: the supervisor reads
		// native structures only.
		for _, lb := range []struct{ label, to string }{{"ioctl", "notify"}, {"ioctl-foreign", "deny"}} {
			a.Label(lb.label)
			a.Stmt(ld, offArgs+1*8)
			a.jge(siocFirst, "", "allow")
			a.jge(siocEnd, "", lb.label+"-dev")
			a.jge(siocWireless, "", "allow")
			a.jge(siocWirelessE, "allow", lb.to)
			a.Label(lb.label + "-dev")
			passed := append([]uint32{siocOutqNSD, siocGSKNS}, siocSets...)
			for i, k := range passed {
				next := ""
				if i == len(passed)-1 {
					next = lb.to
				}
				a.jeq(k, "allow", next)
			}
		}
	}
	a.Label("allow")
	a.Stmt(ret, unix.SECCOMP_RET_ALLOW)
	a.Label("eperm")
	a.Stmt(ret, unix.SECCOMP_RET_ERRNO|uint32(unix.EPERM))
	a.Label("noafsupport")
	a.Stmt(ret, unix.SECCOMP_RET_ERRNO|uint32(unix.EAFNOSUPPORT))
	a.Label("deny")
	a.Stmt(ret, unix.SECCOMP_RET_ERRNO|uint32(unix.EACCES))
	a.Label("nosys")
	a.Stmt(ret, unix.SECCOMP_RET_ERRNO|uint32(unix.ENOSYS))
	a.Label("notify")
	a.Stmt(ret, unix.SECCOMP_RET_USER_NOTIF)
	return a.done()
}

// ProgramOptions choose what Program adds for a sandbox's setup.
type ProgramOptions struct {
	// Filtered: the filtered network installs sockets of the host's
	// network namespace in the sandbox. listen(2) then notifies, and
	// the setsockopt options that steer a socket's traffic (IPV6_RTHDR
	// and the other IPv6 extension headers, SO_BINDTODEVICE, IP_OPTIONS)
	// fail with EPERM; in the foreign ABIs
	// both calls fail with EACCES.
	Filtered bool
	// OwnNetwork: the sandbox has a network namespace of its own, and
	// sockets of the host's reach it all the same (the hostCall socket
	// at fd 3 of every command; with Filtered, the installed ones): a
	// socket's device ioctls, which answer for its namespace, then
	// notify (ioctl.go). Implied by Filtered.
	OwnNetwork bool
}

func (o ProgramOptions) deviceIoctls() bool { return o.Filtered || o.OwnNetwork }

// setgroupsOf returns the numbers of setgroups(2) of audit arch arch.
func setgroupsOf(arch uint32) []uint32 { return callsOf(setgroupsCalls, arch) }

// filteredForeign returns listen(2) and setsockopt(2) of a foreign ABI
// (x32 under the native audit arch), refused under ProgramOptions.Filtered.
func filteredForeign(arch uint32) []uint32 { return callsOf(filteredForeignCalls, arch) }

// ioctlOf returns ioctl(2) of a foreign ABI (x32 under the native audit
// arch), whose device ioctls are refused under ProgramOptions.Filtered.
func ioctlOf(arch uint32) []uint32 { return callsOf(ioctlCalls, arch) }

// ioUringSetupOf returns io_uring_setup(2) of an ABI (native and x32 under
// the native audit arch).
func ioUringSetupOf(arch uint32) []uint32 { return callsOf(ioUringSetupCalls, arch) }

// callsOf returns the numbers list holds for arch.
func callsOf(list []archCalls, arch uint32) []uint32 {
	for _, c := range list {
		if c.arch == arch {
			return c.nrs
		}
	}
	return nil
}

// isSetgroups reports whether a notification is a setgroups(2) call.
func isSetgroups(arch uint32, nr int32) bool {
	for _, n := range setgroupsOf(arch) {
		if uint32(nr) == n {
			return true
		}
	}
	return false
}

// Supported reports whether this kernel and architecture can run the
// notification gate: seccomp's SECCOMP_RET_USER_NOTIF action and
// pidfd_getfd(2) (Linux 5.6).
func Supported() error {
	if err := MetaSupported(); err != nil {
		return err
	}
	// pidfd_getfd on an fd of our own: ENOSYS before 5.6.
	pfd, err := unix.PidfdOpen(unix.Getpid(), 0)
	if err != nil {
		return fmt.Errorf("%w: pidfd_open: %v", ErrUnsupported, err)
	}
	defer unix.Close(pfd)
	fd, err := unix.PidfdGetfd(pfd, pfd, 0)
	if err != nil {
		return fmt.Errorf("%w: pidfd_getfd: %v", ErrUnsupported, err)
	}
	unix.Close(fd)
	return nil
}

// MetaSupported reports whether this kernel and architecture can run the
// metadata gate (MetaGate): SECCOMP_RET_USER_NOTIF and the notification
// structures this package knows. It needs no pidfd_getfd, which a
// container runtime's default seccomp profile refuses without
// CAP_SYS_PTRACE: the gate opens the target's fds through /proc there
// (Server.metaFD), and reads its memory through /proc/TID/mem.
func MetaSupported() error {
	if auditArch == 0 {
		return fmt.Errorf("%w on %s", ErrUnsupported, runtime.GOARCH)
	}
	action := uint32(unix.SECCOMP_RET_USER_NOTIF)
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, 2 /* SECCOMP_GET_ACTION_AVAIL */, 0, uintptr(unsafe.Pointer(&action))); e != 0 {
		return fmt.Errorf("%w: the kernel has no SECCOMP_RET_USER_NOTIF (%v)", ErrUnsupported, e)
	}
	if err := checkSizes(); err != nil {
		return fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	return nil
}

// Install loads the notification filter on every thread of the calling
// process and returns the listener fd (close-on-exec). no_new_privs must
// already be set, or the caller hold CAP_SYS_ADMIN (seccomp(2)).
//
// The filter is installed with TSYNC (every thread, or none: a thread left
// out would fork unwatched children) and, where the kernel has it, with
// SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (5.19): once the supervisor has
// read a notification, only a fatal signal interrupts the target's wait,
// so a connect the supervisor already made is never restarted by a
// signal handler and made twice.
func Install(o ProgramOptions) (int, error) {
	if auditArch == 0 {
		return -1, fmt.Errorf("%w on %s", ErrUnsupported, runtime.GOARCH)
	}
	prog := Program(o)
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	base := uintptr(unix.SECCOMP_FILTER_FLAG_NEW_LISTENER | unix.SECCOMP_FILTER_FLAG_TSYNC | unix.SECCOMP_FILTER_FLAG_TSYNC_ESRCH)
	var lastErr unix.Errno
	for _, extra := range []uintptr{unix.SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, 0} {
		r, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, base|extra, uintptr(unsafe.Pointer(&fprog)))
		runtime.KeepAlive(prog)
		if e == unix.EINVAL {
			lastErr = e
			continue
		}
		if e != 0 {
			return -1, fmt.Errorf("install notification filter: %w", e)
		}
		return int(r), nil
	}
	return -1, fmt.Errorf("install notification filter: %w", lastErr)
}
