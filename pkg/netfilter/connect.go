package netfilter

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Action is what the trap handler does with a connect or send.
type Action int

const (
	// Continue lets the syscall run as the sandbox made it: a
	// destination on the sandbox's own loopback.
	Continue Action = iota
	// Install puts Conn in place of the sandbox's socket (ADDFD with
	// SETFD) and answers the syscall with -Errno (0 or EINPROGRESS).
	Install
	// Fail answers the syscall with -Errno.
	Fail
)

// Verdict is the filter's answer to a trapped connect or send.
type Verdict struct {
	Action Action
	// Conn is the host socket to install (Install only). The caller
	// installs it and then calls Conn.Close: the sandbox's copy keeps
	// the connection.
	Conn *Conn
	// Errno is the syscall's result: 0, EINPROGRESS (Install of a
	// nonblocking socket), or the error (Fail).
	Errno unix.Errno
}

// Socket describes the sandbox's socket a connect or send was made on.
type Socket struct {
	Family   int // AF_INET or AF_INET6
	Type     int // SOCK_STREAM, SOCK_DGRAM, ... (flags masked off)
	Protocol int
	// Nonblock is O_NONBLOCK of the sandbox's open file.
	Nonblock bool
	// FD, when >= 0, is a duplicate of the sandbox's socket in the
	// supervisor (pidfd_getfd); options set on it before connect are
	// copied to the host socket. The caller owns it.
	FD int
}

// Conn is a socket the supervisor opened in the host's network namespace
// for the sandbox.
type Conn struct {
	fd      int
	relayed bool           // one end of an SNI relay's loopback pair
	Host    string         // the allowed name
	Addr    netip.AddrPort // the real destination
}

// FD is the socket's descriptor, for SECCOMP_IOCTL_NOTIF_ADDFD.
func (c *Conn) FD() int { return c.fd }

// Release hands the descriptor over to the caller, who closes it (the
// notification server, after the ADDFD).
func (c *Conn) Release() int {
	fd := c.fd
	c.fd = -1
	return fd
}

// Close closes the supervisor's descriptor (after it was installed, the
// sandbox's copy keeps the connection open). It is idempotent.
func (c *Conn) Close() error {
	if c == nil || c.fd < 0 {
		return nil
	}
	fd := c.fd
	c.fd = -1
	return unix.Close(fd)
}

// Connect decides a connect the sandbox made to dst on sock. A refusal is
// returned as a *Refusal beside a Fail verdict carrying its errno (the
// caller reports it); other errors are the supervisor's own and also come
// with a Fail verdict.
func (f *Filter) Connect(ctx context.Context, dst netip.AddrPort, sock Socket) (Verdict, error) {
	addr := dst.Addr().Unmap()
	// The sandbox's own loopback stays its own: its connects there run
	// unchanged in its network namespace (which holds only lo), where
	// nothing of the host can be reached. nsbox's resolver is there too.
	if addr.IsLoopback() {
		return Verdict{Action: Continue}, nil
	}
	if sock.Family != unix.AF_INET && sock.Family != unix.AF_INET6 {
		return f.refusal(OpConnect, addr.String(), dst.Port(), "not an internet socket")
	}
	if sock.Type != unix.SOCK_STREAM || (sock.Protocol != 0 && sock.Protocol != unix.IPPROTO_TCP) {
		// UDP, ICMP and raw traffic leave only as DNS to nsbox's
		// resolver (on the loopback, above): a datagram to any other
		// address could carry data out without a name the allowlist
		// saw.
		return f.refusal(OpConnect, f.hostOf(addr), dst.Port(), "only TCP connections leave a filtered network (UDP only as DNS to nsbox's resolver)")
	}
	// A socket that is connected, connecting or listening in the
	// sandbox's namespace (to its own loopback) is answered as the kernel
	// answers a second connect: EISCONN, or EALREADY while a handshake
	// runs. Replaced by a host connection instead, its peer got no FIN
	// and a listener kept completing handshakes until the supervisor's
	// copy was closed (found by review).
	if errno := connectedErrno(sock.FD); errno != 0 {
		return Verdict{Action: Fail, Errno: errno}, nil
	}
	// Only an address nsbox handed out for an allowed name is reachable:
	// a literal IP (or an address the sandbox learnt elsewhere) names no
	// host the allowlist could have checked.
	e := f.lookupVirtual(addr)
	if e == nil {
		return f.refusal(OpConnect, addr.String(), dst.Port(), "not an address nsbox's resolver handed out: connect by an allowed name")
	}
	if !f.cfg.Allow.Allowed(e.name, dst.Port()) {
		return f.refusal(OpConnect, e.name, dst.Port(), f.portNotAllowed(e.name, dst.Port()))
	}
	real, ok := pickAddr(e, sock.Family)
	if !ok {
		return f.refusal(OpConnect, e.name, dst.Port(), "the name has no address of this socket's family")
	}
	if err := f.reserve(); err != nil {
		// At the cap: refused and reported like any refusal, with the
		// bound named (ENOBUFS: no buffer space, as the kernel says
		// when sockets run out).
		r := f.refuse(&Refusal{Op: OpConnect, Host: e.name, Port: dst.Port(), Reason: err.Error(), Errno: unix.ENOBUFS, Err: err})
		return Verdict{Action: Fail, Errno: r.Errno}, r
	}
	var (
		c     *Conn
		errno unix.Errno
		err   error
	)
	if f.cfg.CheckSNI && slices.Contains(f.cfg.SNIPorts, dst.Port()) {
		c, errno, err = f.sniConnect(ctx, sock, e.name, netip.AddrPortFrom(real, dst.Port()))
	} else {
		c, errno, err = f.dial(ctx, sock, netip.AddrPortFrom(real, dst.Port()))
	}
	if err != nil {
		return Verdict{Action: Fail, Errno: errno}, err
	}
	if c == nil {
		// The real destination answered with an error (refused,
		// unreachable): the sandbox sees it as its own connect would.
		return Verdict{Action: Fail, Errno: errno}, nil
	}
	c.Host = e.name
	if c.relayed {
		// Counted already: its installed end is in the live set, under
		// its relay's id (addRelay).
		f.mu.Lock()
		f.dialing--
		f.mu.Unlock()
		f.stats.connects.Add(1)
		return Verdict{Action: Install, Conn: c, Errno: errno}, nil
	}
	if err := f.track(c); err != nil {
		c.Close()
		return Verdict{Action: Fail, Errno: unix.ENOBUFS}, fmt.Errorf("network filter: counting a connection: %w", err)
	}
	f.stats.connects.Add(1)
	return Verdict{Action: Install, Conn: c, Errno: errno}, nil
}

// Send decides a sendto/sendmsg with a destination address: allowed only
// on the sandbox's own loopback (DNS to nsbox's resolver among them).
func (f *Filter) Send(dst netip.AddrPort, sock Socket) (Verdict, error) {
	addr := dst.Addr().Unmap()
	if addr.IsLoopback() {
		return Verdict{Action: Continue}, nil
	}
	// A datagram (or a TCP Fast Open send) to any other address would
	// leave without the connect checks above.
	return f.refusal(OpSend, f.hostOf(addr), dst.Port(), "datagrams leave a filtered network only as DNS to nsbox's resolver")
}

func (f *Filter) hostOf(a netip.Addr) string {
	if e := f.lookupVirtual(a); e != nil {
		return e.name
	}
	return a.String()
}

func (f *Filter) refusal(op, host string, port uint16, why string) (Verdict, error) {
	r := f.refuse(&Refusal{Op: op, Host: host, Port: port, Reason: why, Errno: unix.EACCES})
	return Verdict{Action: Fail, Errno: r.Errno}, r
}

// pickAddr chooses the real address to dial for a socket of family: an
// AF_INET socket needs an IPv4 address; an AF_INET6 one takes either (IPv4
// as a mapped address).
func pickAddr(e *entry, family int) (netip.Addr, bool) {
	for _, a := range e.real {
		if a.Is4() {
			if family == unix.AF_INET6 {
				return netip.AddrFrom16(a.As16()), true
			}
			return a, true
		}
	}
	if family == unix.AF_INET6 {
		for _, a := range e.real {
			if a.Is6() {
				return a, true
			}
		}
	}
	return netip.Addr{}, false
}

// copiedOptions are the socket options a program may set before connect
// that change how the connection behaves; they are copied from the
// sandbox's socket to the host one. (Buffer sizes are not: getsockopt
// reports the doubled value the kernel keeps.)
var copiedOptions = []struct{ level, opt int }{
	{unix.SOL_SOCKET, unix.SO_KEEPALIVE},
	{unix.SOL_SOCKET, unix.SO_PRIORITY},
	{unix.SOL_SOCKET, unix.SO_OOBINLINE},
	{unix.IPPROTO_TCP, unix.TCP_NODELAY},
	{unix.IPPROTO_TCP, unix.TCP_KEEPIDLE},
	{unix.IPPROTO_TCP, unix.TCP_KEEPINTVL},
	{unix.IPPROTO_TCP, unix.TCP_KEEPCNT},
	{unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT},
	{unix.IPPROTO_TCP, unix.TCP_SYNCNT},
	{unix.IPPROTO_TCP, unix.TCP_QUICKACK},
}

// optionDefaults are copiedOptions' values on a fresh TCP socket, per
// family, read once.
var optionDefaults sync.Map // family -> []int

func defaultOptions(family int) []int {
	if v, ok := optionDefaults.Load(family); ok {
		return v.([]int)
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		return nil
	}
	defer unix.Close(fd)
	def := make([]int, len(copiedOptions))
	for i, o := range copiedOptions {
		v, err := unix.GetsockoptInt(fd, o.level, o.opt)
		if err != nil {
			return nil // then every option is copied
		}
		def[i] = v
	}
	optionDefaults.Store(family, def)
	return def
}

// dial opens a socket of the sandbox socket's kind in the supervisor's
// (the host's) network namespace and connects it to to. It returns the
// connected socket and 0, a socket in progress and EINPROGRESS (for a
// nonblocking sandbox socket), or nil and the connect's errno.
func (f *Filter) dial(ctx context.Context, sock Socket, to netip.AddrPort) (*Conn, unix.Errno, error) {
	// A socket made ahead (hostSockets), already bound, or one made now.
	fd := f.spares.take(sock.Family)
	if fd < 0 {
		var err error
		if fd, err = newHostSocket(sock.Family); err != nil {
			f.release()
			return nil, errnoOf(err), fmt.Errorf("network filter: socket: %w", err)
		}
	}
	c := &Conn{fd: fd, Addr: to}
	fail := func(errno unix.Errno, err error) (*Conn, unix.Errno, error) {
		c.Close()
		f.release()
		return nil, errno, err
	}
	copyOptions(fd, sock)
	var err error
	sa := makeSockaddr(sock.Family, to.Addr(), to.Port())
	for try := 1; ; try++ {
		err = rawConnect(fd, &sa)
		if err != unix.EADDRNOTAVAIL || try > maxBindTries {
			break
		}
		// The port bindLocked chose still has a connection to this
		// very destination in TIME_WAIT (the connect's own choice
		// steps over those): a fresh socket on another port, and at
		// the last try the connect's own choice.
		nfd, serr := rawSocket(sock.Family)
		if serr != nil {
			break
		}
		unix.Close(fd)
		fd, c.fd = nfd, nfd
		copyOptions(fd, sock)
		if try < maxBindTries {
			bindLocked(fd, sock.Family)
		}
	}
	if err == unix.EINPROGRESS {
		if sock.Nonblock {
			// The sandbox's socket was nonblocking: it gets the socket
			// in progress and EINPROGRESS, and learns the outcome as
			// it would have (poll for POLLOUT, then SO_ERROR).
			return c, unix.EINPROGRESS, nil
		}
		err = f.finishConnect(ctx, fd, &sa)
	}
	if err != nil {
		return fail(errnoOf(err), nil)
	}
	if !sock.Nonblock {
		// The installed socket has the sandbox socket's file status
		// flags: a blocking socket stays blocking.
		// The socket was made here with SOCK_NONBLOCK as its only
		// status flag: clearing them all clears it, without F_GETFL.
		if err := rawSetfl(fd, 0); err != nil {
			return fail(unix.EIO, fmt.Errorf("network filter: fcntl: %w", err))
		}
	}
	return c, 0, nil
}

// finishConnect completes the connect of a blocking sandbox socket whose
// first connect on fd answered EINPROGRESS: nil once fd is connected,
// else the connect's error.
//
// It makes the connect again: the kernel marks the socket connected
// (SS_CONNECTED) only in a connect that finds the handshake done. Left
// "connecting", a reset later would let a fast-open send turn it back into
// an unconnected socket of the host's namespace (found by review; the trap
// refuses those sends, and listen, too). A reset racing this call takes
// that very path: then the socket is not installed.
//
// The second connect is made at once, without a poll first: on the host's
// loopback the handshake is done before the first connect returns (the
// SYN-ACK waits in the socket's backlog, which the kernel processes as
// that connect releases the socket), and this one answers 0. EALREADY
// says the SYN is still unanswered: only then is the outcome waited for
// (waitConnected: ConnectTimeout, ctx), and the connect made once more.
func (f *Filter) finishConnect(ctx context.Context, fd int, sa *rawSockaddr) error {
	err := rawConnect(fd, sa)
	if err == unix.EALREADY {
		if errno := f.waitConnected(ctx, fd); errno != 0 {
			return errno
		}
		err = rawConnect(fd, sa)
	}
	if err == unix.EISCONN {
		return nil
	}
	return err
}

// maxBindTries bounds the fresh sockets dial makes when the port it bound
// meets a connection of the same four addresses in TIME_WAIT.
const maxBindTries = 8

// copyOptions copies to fd the options the program set on its socket
// before connect (copiedOptions, SO_LINGER).
func copyOptions(fd int, sock Socket) {
	if sock.FD < 0 {
		return
	}
	def := defaultOptions(sock.Family)
	for i, o := range copiedOptions {
		// Only what the program changed is set: a fresh socket
		// already has the kernel's defaults.
		if v, err := getsockoptInt(sock.FD, o.level, o.opt); err == nil && (def == nil || v != def[i]) {
			// Invariant: the supervisor sets on the host socket only what
			// the program could set there itself. A priority above 6
			// takes CAP_NET_ADMIN (socket(7)), which a program with
			// --allow-privileged holds in the sandbox's namespaces, and a
			// root supervisor in the host's: copied as it was, the
			// sandbox chose a host traffic class (review 74).
			if o.opt == unix.SO_PRIORITY && o.level == unix.SOL_SOCKET && (v < 0 || v > 6) {
				continue
			}
			_ = unix.SetsockoptInt(fd, o.level, o.opt, v)
		}
	}
	var l unix.Linger
	if getsockopt(sock.FD, unix.SOL_SOCKET, unix.SO_LINGER, unsafe.Pointer(&l), unsafe.Sizeof(l)) == nil && l.Onoff != 0 {
		_ = unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &l)
	}
}

// getsockopt is getsockopt(2) made as a raw system call, without the
// runtime's bookkeeping around one that may block (unix.GetsockoptInt's
// Syscall6): ~0.1 µs here, on each of the dozen options copyOptions reads
// while the sandbox waits. Reading these options never blocks (a socket
// lock at most, which no one holds across a sleep).
func getsockopt(fd, level, opt int, val unsafe.Pointer, size uintptr) error {
	l := uint32(size)
	if _, _, e := unix.RawSyscall6(unix.SYS_GETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt), uintptr(val), uintptr(unsafe.Pointer(&l)), 0); e != 0 {
		return e
	}
	return nil
}

func getsockoptInt(fd, level, opt int) (int, error) {
	var v int32
	err := getsockopt(fd, level, opt, unsafe.Pointer(&v), unsafe.Sizeof(v))
	return int(v), err
}

// bindLocked binds fd, before its connect, to a local port chosen here
// from the ephemeral range: a port given explicitly is the socket's for
// good (the kernel sets SOCK_BINDPORT_LOCK and keeps it when the socket
// goes back to TCP_CLOSE). A port the connect picked instead is given
// back when the connection fails (a reset while the sandbox holds the
// socket in progress), and the sandbox could then bind that host socket
// to a host port of its choosing, squatting one a host service wants
// (found by review; it cannot listen there: its shutdown is trapped and
// the socket never becomes unconnected, see pkg/sandbox's netTrap).
//
// SO_REUSEADDR lets the bind take a port that a closed connection still
// holds in TIME_WAIT, as the connect's own choice would: without it, at
// a few thousand connections a minute, 16 random tries all met such ports
// and connects failed. Should every try fail, the socket connects without
// the bind (the connect then picks the port, which a reset gives back):
// the connection is made, and only that squatting stays possible for it.
func bindLocked(fd, family int) {
	rawSetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	lo, hi := localPortRange()
	for try := 0; try < 32; try++ {
		// The unspecified address: any of the host's.
		sa := makeSockaddr(family, netip.Addr{}, uint16(lo+rand.IntN(hi-lo+1)))
		if err := rawBind(fd, &sa); err != unix.EADDRINUSE {
			return
		}
	}
}

// localPortRange is the host's ephemeral port range
// (net.ipv4.ip_local_port_range, read once), or Linux's default.
var localPortRange = sync.OnceValues(func() (int, int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		var lo, hi int
		if _, err := fmt.Sscan(string(b), &lo, &hi); err == nil && 1024 <= lo && lo < hi && hi <= 65535 {
			return lo, hi
		}
	}
	return 32768, 60999
})

// waitConnected waits for a nonblocking connect on fd to complete, within
// ConnectTimeout and ctx, and returns its outcome.
func (f *Filter) waitConnected(ctx context.Context, fd int) unix.Errno {
	deadline := time.Now().Add(f.cfg.ConnectTimeout)
	for {
		if ctx.Err() != nil {
			return unix.EINTR
		}
		left := time.Until(deadline)
		if left <= 0 {
			return unix.ETIMEDOUT
		}
		// Short slices so that a cancelled ctx (the sandboxed thread
		// was killed, the session closes) ends the wait soon.
		ms := min(left, 200*time.Millisecond).Milliseconds() + 1
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		n, err := unix.Poll(pfd, int(ms))
		if err == unix.EINTR || n == 0 {
			continue
		}
		if err != nil {
			return errnoOf(err)
		}
		if pfd[0].Revents&(unix.POLLERR|unix.POLLHUP) == 0 {
			// Writable and no error: established (tcp_poll gives a
			// socket still in SYN_SENT no POLLOUT). The usual case on
			// the host's loopback, where the handshake is done before
			// connect returns; SO_ERROR is read only on a failure.
			return 0
		}
		v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
		if err != nil {
			return errnoOf(err)
		}
		return unix.Errno(v)
	}
}

func setNonblock(fd int, on bool) error {
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		return err
	}
	if on {
		fl |= unix.O_NONBLOCK
	} else {
		fl &^= unix.O_NONBLOCK
	}
	_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl)
	return err
}

func errnoOf(err error) unix.Errno {
	if e, ok := err.(unix.Errno); ok {
		return e
	}
	return unix.EIO
}

// reserve takes a connection slot, first recounting the connections the
// sandbox still holds when the table looks full.
//
// Bounded: the sockets the supervisor opens are charged to the
// supervisor's memory cgroup, not the sandbox's; without a cap a sandbox
// could hold an unbounded number of them (and their buffers) outside its
// own limits.
func (f *Filter) reserve() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrClosed
	}
	// An SNI connection counts while its installed end is open (live)
	// or its relay runs: one whose sandbox end is closed lives on while
	// its upstream answers, which the live set no longer sees (found by
	// review); one the relay cut is a host socket the sandbox holds.
	relays := f.relaysUncountedLocked()
	if f.live.n+relays+f.dialing >= f.cfg.MaxConns {
		f.live.count()
		relays = f.relaysUncountedLocked()
	}
	if f.live.n+relays+f.dialing >= f.cfg.MaxConns {
		return &LimitError{What: "connections", Limit: f.cfg.MaxConns}
	}
	f.dialing++
	if !f.spares.started {
		// Started at the first connect (a session that makes none
		// never starts it), stopped with the filter (Close waits).
		f.spares.started = true
		f.servers.Add(1)
		go func() { defer f.servers.Done(); f.spares.run(f.ctx) }()
	}
	return nil
}

func (f *Filter) release() {
	f.mu.Lock()
	f.dialing--
	f.mu.Unlock()
}

// track counts a connection until the sandbox closes it (liveSet). A
// connection that cannot be counted is not made: the cap would not see
// it.
func (f *Filter) track(c *Conn) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dialing--
	if f.closed {
		return ErrClosed
	}
	return f.live.add(c.fd)
}

// OpenConns sweeps and returns the number of connections made for the
// sandbox that are still open on the host.
func (f *Filter) OpenConns() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.live.count()
}

// connectedErrno is what connect(2) fails with on the TCP socket fd given
// its state: EALREADY while a handshake is under way, EISCONN when it is
// connected, closing or listening (inet_stream_connect: a socket whose
// state is not TCP_CLOSE); 0 when a connect may proceed, or when fd is
// not known (-1).
func connectedErrno(fd int) unix.Errno {
	if fd < 0 {
		return 0
	}
	info, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
	if err != nil {
		return 0
	}
	// tcpi_state holds the kernel's TCP states (include/net/tcp_states.h).
	const (
		tcpSynSent = 2
		tcpClose   = 7
	)
	switch info.State {
	case tcpClose:
		return 0
	case tcpSynSent:
		return unix.EALREADY
	}
	return unix.EISCONN
}
