package notify

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Options configure a Server.
type Options struct {
	// Unix decides calls on AF_UNIX sockets; nil allows them all.
	Unix Handler
	// Inet decides calls on AF_INET and AF_INET6 sockets; nil allows
	// them all (performed by the supervisor in the socket's own network
	// namespace: with --net none, that holds only lo).
	Inet Handler
	// MaxInFlight bounds the calls handled at once: the Server's
	// goroutines (a call the supervisor makes can block); 0 means 8.
	MaxInFlight int
	// AsTarget makes the AF_UNIX calls the supervisor performs on a
	// thread holding the calling task's own host ids (asTarget). Set it
	// when the supervisor runs as root; a root-less supervisor's ids are
	// the sandbox's already.
	AsTarget bool
	// OwnPIDNamespace says that every process under the filter is in a
	// PID namespace of its own, below the supervisor's (the namespace
	// backend), so that none can name a supervisor thread. With
	// AsTarget, a serving thread then keeps the last target's ids
	// between its unix connects and sends instead of switching back
	// after each (servingThread.take says why that needs this). Never
	// set it for a sandbox that shares the host's PID namespace (the
	// Landlock backend).
	OwnPIDNamespace bool
	// SandboxPid is a process whose /proc/PID names the sandbox's user
	// namespace and id maps (its PID 1, the worker). A Server without a
	// Unix handler builds its open gate from it (ungatedGate); without
	// it, such a Server refuses path addresses (EACCES).
	SandboxPid int
	// MaxData bounds the bytes of one send the supervisor copies (a
	// datagram larger than that fails with EMSGSIZE; a stream send is
	// shortened, as a short write); 0 means 256 KiB.
	MaxData int
	// SandboxNetns is the netns cookie (SO_NETNS_COOKIE) of the
	// sandbox's own network namespace: a device ioctl is answered on a
	// socket of it only, every other socket's is refused (ioctl.go); 0
	// refuses them all.
	SandboxNetns uint64
	// Meta decides the metadata calls (chmod, utimensat and their kin)
	// a Landlock sandbox's filter hands over; nil answers them ENOSYS.
	Meta *MetaGate
}

// Server answers the notifications of one listener.
type Server struct {
	listener int
	stop     int // eventfd: Close wakes Serve
	o        Options
	// turn is held by the goroutine that polls and reads, and kept while
	// it answers what it read, unless that takes longer than slowCall
	// (see follow); ending (under turn) tells the others to stop.
	turn   sync.Mutex
	ending bool
	// slow is a timer armed while the turn's holder answers a call;
	// holder is the number of that call (0: the holder is not answering
	// one, or handed the turn on), calls counts them, began is when the
	// holder's call began (since epoch). armed says the timer is set: a
	// call that finds it set leaves it (arming may wake a thread of the
	// runtime's, and took a system call when this was a timerfd: ~5 µs on
	// a VM, more than a tenth of a connect), and watch, when it fires
	// early for a later call, sets it again for that call's deadline.
	//
	// A runtime timer, not a timerfd that watch polls: a goroutine
	// blocked in a system call keeps its P, so with the serving thread in
	// poll as well, a supervisor with GOMAXPROCS=2 had no idle P left;
	// the runtime's monitor (sysmon) then took one back nearly every
	// connect and, having found work, went on waking every 20 µs. 5000
	// filtered connects (perf probes on the runtime, uid 0): 773 P
	// hand-offs and 8163 monitor wake-ups before, 144 and 2193 with the
	// timer; the supervisor and sandbox used 26 % less CPU.
	slow   *time.Timer
	holder atomic.Uint64
	calls  uint64
	began  atomic.Int64
	armed  atomic.Bool
	epoch  time.Time
	wg     sync.WaitGroup // Serve's goroutines
	// followers counts the goroutines taking turns; Serve starts one and
	// watch adds one per hand-off, up to MaxInFlight.
	followers atomic.Int32
	ctx       context.Context
	cancel    context.CancelFunc

	mu       sync.Mutex
	inflight map[int]inflightCall // supervisor socket fds being used
	closed   bool
	// procs caches, per thread id, descriptors that name the thread
	// itself (at most maxPidfds; see proc).
	procs  map[int]*proc
	fdinfo fdinfoCache // for InstallFD's close-on-exec flag
	done   chan struct{}
	// groupsMoved is set, for good, at the first setgroups(2) of any
	// thread under the filter: from then on the groups kept per thread
	// (proc.groups) are not used (creds). noPidfdInfo is set when the
	// kernel has no PIDFD_GET_INFO (before 6.13).
	groupsMoved, noPidfdInfo atomic.Bool

	// ungated (under mu) is the open gate of a Server without a unix
	// handler (ungatedGate).
	ungated *UnixGate

	// replaced (under mu) are copies of sockets InstallFD took out of
	// a target's fd table, to be closed off the serving thread
	// (dropReplacedLocked); closeReplaced (cap 1) wakes reap for them.
	replaced      []int
	closeReplaced chan struct{}

	// ownRoot is this process's root: a metadata call is resolved here
	// only for a target whose root it is too (metaObject).
	ownRoot rootID
}

// NewServer takes ownership of listener (closed by Close).
func NewServer(listener int, o Options) (*Server, error) {
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 8
	}
	if o.MaxData <= 0 {
		o.MaxData = 256 << 10
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, err
	}
	// Synchronous wake-ups (6.6): the supervisor's thread runs on the
	// target's CPU when it answers, which halves a round trip. Optional.
	flag := uint64(unix.SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP)
	unix.Syscall(unix.SYS_IOCTL, uintptr(listener), unix.SECCOMP_IOCTL_NOTIF_SET_FLAGS, uintptr(flag))
	root, err := statRoot(unix.AT_FDCWD, "/", 0)
	if err != nil {
		unix.Close(efd)
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	slow := time.NewTimer(time.Hour)
	slow.Stop()
	return &Server{listener: listener, stop: efd, slow: slow, o: o,
		ctx: ctx, cancel: cancel, epoch: time.Now(), inflight: map[int]inflightCall{}, procs: map[int]*proc{}, done: make(chan struct{}),
		closeReplaced: make(chan struct{}, 1), ownRoot: root}, nil
}

// Serve answers notifications until Close, or until no process is left
// under the filter (the sandbox ended).
//
// Leader and followers: goroutines take turns at the listener. The one
// holding the turn polls, reads one notification and answers it itself,
// so that the target waits on the very thread that read its call, and
// keeps the turn for the next one: no other goroutine is woken on the way
// (a hand-off per call cost more than the rest of a connect). A call that
// blocks in the supervisor (a connect to a full backlog, a dial, a lookup
// on a mount that hangs) must not hold the others up: when one lasts
// longer than slowCall, watch hands the turn on for its holder, and a
// follower answers the next calls meanwhile. So a server inside that must
// send before it accepts is never starved by its own client, and at most
// MaxInFlight calls are made at once.
//
// Followers are started when needed: one at first, one more at each
// hand-off, up to MaxInFlight. Most sandboxes never make a slow call, and
// with AsTarget every follower is a locked OS thread that must be created
// at the start and torn down at the end (eight of them cost a root start
// ~1 ms).
func (s *Server) Serve() {
	defer close(s.done)
	go s.reap()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.watch()
	}()
	s.addFollower()
	s.wg.Wait()
}

// addFollower starts one more goroutine taking turns. Called from Serve,
// watch and a retiring follower, each of them counted in wg, so wg.Wait
// has not returned.
func (s *Server) addFollower() {
	s.followers.Add(1)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.followers.Add(-1)
		s.follow()
	}()
}

// slowCall is how long the turn's holder may answer one call before the
// turn is handed on for it.
const slowCall = 500 * time.Microsecond

// slowCheck is how often, at most, watch looks again at a stream of
// calls: a call it finds younger than slowCall is looked at again once
// it is slowCheck old, and handed on then if it still runs. Each look is
// a timer interrupt and a wake-up of watch's goroutine; once per slowCall,
// in a stream of connects, that was ~8 µs of CPU per connect on a VM.
const slowCheck = 4 * slowCall

func (s *Server) follow() {
	p := []unix.PollFd{{Fd: int32(s.listener), Events: unix.POLLIN}, {Fd: int32(s.stop), Events: unix.POLLIN}}
	var n seccompNotif
	var th *servingThread
	// This goroutine's buffer for /proc/TID/status, which a call reads at
	// most once (SockCall.status): one call at a time is answered here,
	// and a 4 KiB buffer made per call was, with a root supervisor, most
	// of the allocation and garbage collection on the path of a connect
	// (pprof: the status read's make and the GC assists it caused).
	scratch := make([]byte, statusBufSize)
	// Locked for good, and so ended with this goroutine: the thread
	// carries a scheduling attribute of its own (shortSlice; Go makes
	// no new thread from a locked one, so it is not inherited), and with
	// AsTarget, asTarget changes its ids for a call and back (a thread
	// whose ids could not be given back must serve nothing else).
	// Never unlocked: the thread ends with this goroutine, and no other
	// goroutine ever runs on it, with the ids it may keep (servingThread).
	runtime.LockOSThread()
	shortSlice()
	if s.o.AsTarget {
		th, _ = newServingThread(s.stickyIDs()) // nil: asTarget fails closed
	}
	lead := false
	for {
		if !lead {
			s.turn.Lock()
		}
		if !s.next(p, &n) {
			s.turn.Unlock()
			if th != nil && th.held {
				// Root's ids back before the thread ends (if it
				// cannot, it ends all the same).
				th.release()
			}
			return
		}
		// Still under the turn: number the call and arm the timer.
		s.calls++
		call := s.calls
		s.began.Store(int64(time.Since(s.epoch)))
		s.holder.Store(call)
		// Armed if no earlier call left it armed. The store of holder
		// comes before this load, and watch clears armed before it
		// loads holder: one of the two sees the other, so a call is
		// never left unwatched.
		if s.armed.CompareAndSwap(false, true) {
			s.setSlow(slowCall)
		}
		tainted := s.handle(&n, th, scratch)
		// The turn is still ours unless watch handed it on.
		// The timer is left armed: it fires at most slowCall after this
		// call began, finds no holder (or a later call, for which it is
		// set again) and does nothing; a disarm per call would cost
		// every call the timer's upkeep.
		lead = s.holder.CompareAndSwap(call, 0)
		if tainted {
			// This thread's ids are not its own: it serves no more
			// calls and ends (locked) with this goroutine; a fresh one
			// takes its place.
			if lead {
				s.turn.Unlock()
			}
			s.addFollower()
			return
		}
	}
}

// setSlow arms the slow-call timer (d > 0), or disarms it.
func (s *Server) setSlow(d time.Duration) {
	s.slow.Reset(d)
}

// watch hands the turn on for a holder whose call outlasts slowCall.
func (s *Server) watch() {
	for {
		select {
		case <-s.ctx.Done():
			return // Close
		case <-s.slow.C:
		}
		call := s.holder.Load()
		if call != 0 {
			age := time.Since(s.epoch) - time.Duration(s.began.Load())
			if age < slowCall {
				// A call that began after the one the timer was set
				// for (calls are flowing): looked at again when it is
				// slowCheck old.
				s.setSlow(slowCheck - age)
				continue
			}
			if s.holder.CompareAndSwap(call, 0) {
				// The holder no longer owns the turn (its
				// CompareAndSwap will fail); a sync.Mutex may be
				// unlocked by another goroutine than the one that
				// locked it.
				s.turn.Unlock()
				// Someone must be there to take it: the holder
				// is busy.
				if s.followers.Load() < int32(s.o.MaxInFlight) {
					s.addFollower()
				}
			}
		}
		// No call is being answered, or its holder was just relieved:
		// the timer stays unset until the next call sets it, or until a
		// call that began before this store saw it still set: then it is
		// set here.
		s.armed.Store(false)
		if s.holder.Load() != 0 && s.armed.CompareAndSwap(false, true) {
			s.setSlow(slowCall)
		}
	}
}

// next waits for and reads one notification; false when the Server is done.
func (s *Server) next(p []unix.PollFd, n *seccompNotif) bool {
	for {
		if s.ending {
			return false
		}
		p[0].Revents, p[1].Revents = 0, 0
		if _, err := unix.Poll(p, -1); err != nil {
			if err == unix.EINTR {
				continue
			}
			s.ending = true
			return false
		}
		if p[1].Revents != 0 {
			s.ending = true
			return false
		}
		if p[0].Revents&unix.POLLIN != 0 {
			if err := recv(s.listener, n); err != nil {
				if err == unix.ENOENT || err == unix.EINTR {
					continue // the target went away before the read
				}
				s.ending = true
				return false
			}
			return true
		}
		if p[0].Revents&(unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0 {
			s.ending = true // every process under the filter is gone
			return false
		}
	}
}

// Close stops Serve, wakes the calls still being made (their sockets are
// shut down: a connect blocked in the supervisor must not outlive the
// sandbox), waits for them and closes the listener.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	for fd := range s.inflight {
		unix.Shutdown(fd, unix.SHUT_RDWR)
	}
	s.mu.Unlock()
	s.cancel()
	unix.Write(s.stop, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	<-s.done
	s.mu.Lock()
	for pid, p := range s.procs {
		delete(s.procs, pid)
		s.putLocked(p)
	}
	s.procs = nil
	replaced := s.replaced
	s.replaced = nil
	s.mu.Unlock()
	for _, fd := range replaced {
		unix.Close(fd)
	}
	s.fdinfo.close()
	unix.Close(s.stop)
	s.slow.Stop()
	unix.Close(s.listener)
}

// Done is closed when Serve has returned.
func (s *Server) Done() <-chan struct{} { return s.done }

// reap runs while Serve does: every second, a call the supervisor is still
// making for a target that is gone (killed: its notification is no longer
// valid) is stopped by shutting its socket down, so that a connect to an
// address that never answers does not hold one of the Server's goroutines
// for minutes after the process that asked for it died. Connects only: a
// send's socket is connected, maybe shared with processes that live on,
// and shutting it down would end their connection too.
func (s *Server) reap() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.done:
			return
		case <-s.closeReplaced:
			s.closeReplacedBatch()
			continue
		case <-t.C:
		}
		// Also every second: a batch not yet full.
		s.closeReplacedBatch()
		s.mu.Lock()
		for fd, call := range s.inflight {
			if call.id != 0 && !idValid(s.listener, call.id) {
				unix.Shutdown(fd, unix.SHUT_RDWR)
				if call.cancel == nil {
					continue
				}
				// And whatever the handler waits on for it (the
				// filtered network's dial of a host socket, which
				// shutting this one down does not reach): a target
				// that gave up (killed, or a signal ended its wait)
				// held a serving goroutine, and with it the end of
				// its session, for the dial's whole timeout.
				call.cancel()
			}
		}
		s.mu.Unlock()
	}
}

// setCancel records the cancel of the context the handler of fd's call
// runs in (reap).
func (s *Server) setCancel(fd int, cancel context.CancelFunc) {
	s.mu.Lock()
	if call, ok := s.inflight[fd]; ok {
		call.cancel = cancel
		s.inflight[fd] = call
	}
	s.mu.Unlock()
}

// inflightCall is a socket call being made: the id of a connect (0: a
// send, never reaped) and the cancel of the context its handler runs in
// (nil: the Server's own).
type inflightCall struct {
	id     uint64
	cancel context.CancelFunc
}

func (s *Server) track(fd int, call inflightCall) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.inflight[fd] = call
	return true
}

// untrack stops tracking fd, before the call is answered: once it is,
// the reaper would take the id's end for a dead target and shut down a
// socket the target goes on using. The fd itself is closed after the
// answer (closeLater).
func (s *Server) untrack(c *SockCall, fd int) {
	s.mu.Lock()
	delete(s.inflight, fd)
	// Only the copy of a socket InstallFD took out of the target's table
	// waits: the target's number names the installed socket now. Any
	// other copy is closed right after the answer: the target may have
	// closed its own, and a late last close would hold its connection
	// open (no FIN to the peer).
	if c.replaced && !s.closed {
		s.dropReplacedLocked(fd)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	c.closeLater(fd)
}

// replacedBatch is how many replaced sockets wait before reap closes them.
const replacedBatch = 8

// dropReplacedLocked queues fd, the supervisor's copy of a socket that
// InstallFD took out of the target's fd table (a filtered connect's
// sandbox socket, never connected), to be closed by reap, in batches of
// replacedBatch or within a second. The copy is most often the socket's
// last reference: its close releases the whole socket (~9 µs here, timed
// on the serving thread), work the target waited for, since the serving
// thread makes its closes after the answer but before it sleeps, and the
// target runs on its CPU only then (SYNC_WAKE_UP). Nothing waits for that
// close: the target's number names the installed socket already. Bounded:
// at most replacedBatch wait at once, and Close closes those left.
func (s *Server) dropReplacedLocked(fd int) {
	s.replaced = append(s.replaced, fd)
	if len(s.replaced) >= replacedBatch {
		select {
		case s.closeReplaced <- struct{}{}:
		default:
		}
	}
}

// closeReplacedBatch closes the replaced sockets queued (reap).
func (s *Server) closeReplacedBatch() {
	s.mu.Lock()
	fds := s.replaced
	s.replaced = nil
	s.mu.Unlock()
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// handle answers one notification. Every exit path answers it: a target
// left without an answer would wait until the sandbox ends.
// It reports whether the thread was left tainted (asTarget).
func (s *Server) handle(n *seccompNotif, th *servingThread, scratch []byte) (tainted bool) {
	if isSetgroups(n.Data.Arch, n.Data.Nr) {
		// The flag is set before the call goes on, so every later
		// call reads the groups afresh (creds). CONTINUE is safe
		// here, unlike for a socket call (see the package doc): nothing
		// is decided on the arguments, and the kernel makes its own
		// permission check when it runs the call.
		s.groupsMoved.Store(true)
		respondContinue(s.listener, n.ID)
		return false
	}
	c := &SockCall{Pid: int(n.Pid), Syscall: syscallOf(n.Data.Nr), FD: int(int32(n.Data.Args[0])), id: n.ID, listener: s.listener, th: th, srv: s, scratch: scratch}
	var val int64
	var errno unix.Errno
	var installed bool
	if metaOp(n.Data.Arch, n.Data.Nr) {
		c.Syscall, c.FD = 0, -1
		val, errno = s.decideMeta(n, c)
	} else {
		val, errno, installed = s.decide(n, c)
	}
	if th != nil && th.held && !th.sticky && !th.release() {
		// A thread that switches per call took the target's ids for the
		// gate's lookup (holdTarget) and gives them back after every
		// call, the refused ones too: between calls a process of the
		// target's uid could signal it (servingThread.take).
		c.tainted = true
	}
	if !installed {
		respond(s.listener, n.ID, val, errno)
	}
	// The supervisor's copies (the socket, a pin, an installed socket)
	// are closed once the target runs again: a close, the last one of a
	// replaced socket among them, is no part of the target's wait.
	for _, fd := range c.later {
		unix.Close(fd)
	}
	s.put(c.proc)
	return c.tainted
}

func syscallOf(nr int32) Syscall {
	switch uintptr(nr) {
	case unix.SYS_CONNECT:
		return Connect
	case unix.SYS_SENDTO:
		return SendTo
	case unix.SYS_SENDMSG:
		return SendMsg
	case unix.SYS_SENDMMSG:
		return SendMmsg
	case unix.SYS_SHUTDOWN:
		return Shutdown
	case unix.SYS_LISTEN:
		return Listen
	case unix.SYS_IOCTL:
		return Ioctl
	}
	return 0
}

// maxAddr is sizeof(struct sockaddr_storage): the kernel refuses longer
// addresses with EINVAL (move_addr_to_kernel).
const maxAddr = 128

func (s *Server) decide(n *seccompNotif, c *SockCall) (val int64, errno unix.Errno, installed bool) {
	if c.Syscall == 0 {
		return 0, unix.ENOSYS, false
	}
	if c.FD < 0 {
		return 0, unix.EBADF, false
	}
	// The socket itself, from the target's fd table: the call is made on
	// this file, whatever the target's fd number names by then.
	sock, e := s.getfd(c, c.FD)
	if e != 0 {
		return 0, e, false
	}
	var err error
	call := inflightCall{}
	c.ctx = s.ctx
	if c.Syscall == Connect {
		call.id = n.ID
	}
	if !s.track(sock, call) {
		unix.Close(sock)
		return 0, unix.ECONNABORTED, false
	}
	defer s.untrack(c, sock)
	c.Sock = sock
	if c.Domain, err = unix.GetsockoptInt(sock, unix.SOL_SOCKET, unix.SO_DOMAIN); err != nil {
		if c.Syscall == Ioctl {
			return 0, unix.ENOTTY, false // a device ioctl of a file that is no socket
		}
		return 0, errnoOf(err), false // ENOTSOCK, as the call would fail
	}
	// Up to here the thread may still hold an earlier call's target ids
	// (servingThread): the pidfd and /proc opens, pidfd_getfd and
	// SO_DOMAIN need no more than stickyCaps. Every call but a unix
	// connect or send (inet handlers that dial, listen, shutdown,
	// sendmmsg's write into the target's memory) is answered with the
	// thread's own ids, taken back here; if they cannot be, the thread
	// is tainted and this call refused.
	if th := c.th; th != nil && th.held && !s.stay(c) {
		if !th.release() {
			c.tainted = true
			return 0, unix.EACCES, false
		}
	}
	if c.Domain != unix.AF_UNIX {
		// The unix gate decides without the type; a send reads it
		// (sockType) to tell a datagram from a stream.
		if c.Type, err = unix.GetsockoptInt(sock, unix.SOL_SOCKET, unix.SO_TYPE); err != nil {
			return 0, errnoOf(err), false
		}
		if call.id != 0 {
			// An internet connect's handler may wait (a dial): it
			// gets a context of its own, which the reaper ends when
			// the target stops waiting for it. (A unix one never
			// waits in its handler: no context is made for it.)
			var cancel context.CancelFunc
			c.ctx, cancel = context.WithCancel(s.ctx)
			defer cancel()
			s.setCancel(sock, cancel)
		}
	}
	a := n.Data.Args
	switch c.Syscall {
	case Connect:
		if c.Addr, errno = s.readAddr(c, a[1], a[2]); errno != 0 {
			return 0, errno, false
		}
		v := s.verdict(c)
		return s.perform(c, v, func(addr []byte) (int64, unix.Errno) {
			return sysConnect(sock, addr)
		})
	case SendTo:
		if c.Addr, errno = s.readAddr(c, a[4], a[5]); errno != 0 {
			return 0, errno, false
		}
		data, errno := s.readData(c, []riov{{a[1], a[2]}})
		if errno != 0 {
			return 0, errno, false
		}
		c.Data, c.Flags = data, int(int32(a[3]))
		v := s.verdict(c)
		return s.perform(c, v, func(addr []byte) (int64, unix.Errno) {
			return sysSendmsg(sock, data, nil, addr, int(int32(a[3])))
		})
	case SendMsg:
		m, errno := s.readMsg(c, a[1])
		if errno != 0 {
			return 0, errno, false
		}
		defer m.close()
		c.Data, c.Flags = m.data, int(int32(a[2]))
		v := s.verdict(c)
		return s.perform(c, v, func(addr []byte) (int64, unix.Errno) {
			return sysSendmsg(sock, m.data, m.oob, addr, int(int32(a[2])))
		})
	case SendMmsg:
		c.Flags = int(int32(a[3]))
		return s.sendmmsg(c, a[1], uint32(a[2]), c.Flags)
	case Ioctl:
		// Decided here, by the socket's namespace, not by a handler.
		val, errno := s.ioctl(c, uint32(a[1]), a[2])
		return val, errno, false
	case Shutdown, Listen:
		// Decided by the handler like a call without an address, and
		// made on the supervisor's copy of the very socket it checked
		// (never CONTINUE: another thread could put another socket at
		// the number meanwhile). Neither call checks a credential, but
		// a unix listen records its caller's: the peers that connect
		// later see them (SO_PEERCRED, SO_PEERGROUPS; unix(7)), so it is
		// made as the target (run), or a host client of a socket the
		// sandbox serves would take the sandbox for root (the
		// CVE-2020-15257 pattern; TestListenIsTheTargets).
		switch v := s.verdict(c); v.kind {
		case vAllow:
			if c.Syscall == Shutdown {
				if err := unix.Shutdown(sock, int(int32(a[1]))); err != nil {
					return 0, errnoOf(err), false
				}
				return 0, 0, false
			}
			_, e := s.run(c, func() (int64, unix.Errno) {
				_, _, e := unix.Syscall(unix.SYS_LISTEN, uintptr(sock), uintptr(int32(a[1])), 0)
				return 0, e
			})
			return 0, e, false
		case vErrno:
			return 0, v.errno, false
		}
		return 0, unix.EINVAL, false
	}
	return 0, unix.ENOSYS, false
}

// verdict asks the handler of the socket's family. A call without an
// address on a connected socket goes to the handler too: it is performed
// by the supervisor all the same.
func (s *Server) verdict(c *SockCall) Verdict {
	var h Handler
	switch c.Domain {
	case unix.AF_UNIX:
		h = s.o.Unix
	case unix.AF_INET, unix.AF_INET6:
		h = s.o.Inet
	case unix.AF_VSOCK:
		// A vsock socket made where socket(2) was not refused (an ABI
		// the filter cannot read, found by review): it ignores network
		// namespaces, so none of its calls is made.
		return Deny(unix.EACCES)
	}
	if h == nil {
		if c.Domain == unix.AF_UNIX {
			if p, ok := unixPath(c.Addr); ok {
				// No policy, but the target's own view: a path is
				// resolved in the target's root, as the target (the
				// gate's lookup, pin and write check without its mount
				// policy), never by the kernel in the supervisor's root
				// and mount namespace with the supervisor's rights
				// (found by review: a sandbox reached host sockets
				// hidden behind its private /tmp, and a sticky thread
				// walked the path with CAP_DAC_READ_SEARCH and
				// CAP_SYS_PTRACE; path_resolution(7)).
				g, err := s.ungatedGate(c)
				if err != nil {
					return Deny(unix.EACCES) // fail closed: no view of the sandbox
				}
				return g.decidePath(c, p)
			}
		}
		return Allow()
	}
	return h.Decide(c.ctx, c)
}
