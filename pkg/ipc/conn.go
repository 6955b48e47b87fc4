package ipc

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	// MaxFrame is the largest datagram either side sends or accepts. Larger
	// messages are split into fragments (see docs/protocol.md). 64 KiB fits
	// in the default unix socket send buffer, so no privileged SO_SNDBUFFORCE
	// is ever needed.
	MaxFrame = 64 << 10
	// DefaultMaxMessage bounds one reassembled message. A peer that sends
	// more is disconnected: it cannot make the other side buffer without
	// limit.
	DefaultMaxMessage = 16 << 20
	// MaxFDs is the most file descriptors one message may carry.
	MaxFDs = 8

	// fragmentMark starts every fragment of a message except the last. JSON
	// text never starts with this byte, so a reader in any language tells a
	// fragment from a whole message by its first byte.
	fragmentMark = 0x1e
)

var (
	// ErrClosed is returned after Close, or when the peer hung up. It is the
	// broken-channel error, distinct from a *RemoteError.
	ErrClosed = errors.New("ipc: channel closed")
	// ErrProtocol reports a peer that broke the framing rules (oversize
	// frame, too many fds, truncated control data, garbage). The connection
	// is unusable afterwards.
	ErrProtocol = errors.New("ipc: protocol violation")
)

// Conn is one end of a SOCK_SEQPACKET socketpair. It uses the fd in blocking
// mode, so that it also works on fds inherited in any state (a hostCall
// socket in a child), and so that a reader can wait on its own thread (see
// SetWait). docs/benchmarks.md measured the netpoller: faster than a
// blocking read only when a goroutine hand-off follows each read, which
// Peer avoids for the requests it runs where it reads them (HandleInline,
// HandleDirect).
type Conn struct {
	fd         int
	maxMessage int

	// refs is 1 while the Conn is open, plus 1 for each call using fd;
	// the fd is closed when it drops to 0, never under a running syscall
	// (its number could be reused meanwhile). A count, not a lock, so a
	// call may nest in another (a write from a SetWait function).
	refs   atomic.Int32
	wmu    sync.Mutex // one writer at a time: fragments must not interleave
	rmu    sync.Mutex // one reader at a time
	closed atomic.Bool
	rbuf   []byte
	oob    []byte
	// hdr and iov describe rbuf and oob to recvmsg; kept (under rmu) so
	// that a receive allocates nothing.
	hdr unix.Msghdr
	iov unix.Iovec
	// wait: see SetWait.
	wait func(fd int)
	// budget, set by NewPeer from Options.Budget, is charged for the
	// messages this Conn reassembles (see readMessage).
	budget *Budget
}

// Socketpair returns the two ends of a new SOCK_SEQPACKET socketpair. Both
// are close-on-exec; a child inherits one only when it is passed explicitly.
func Socketpair() (*os.File, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "nsbox-ipc"), os.NewFile(uintptr(fds[1]), "nsbox-ipc"), nil
}

// NewConn takes ownership of f (a SOCK_SEQPACKET socket) and returns a Conn.
func NewConn(f *os.File) (*Conn, error) {
	// Duplicate so that the Conn owns a plain blocking fd independent of
	// the os.File's poller registration.
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 3)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("ipc: dup: %w", err)
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("ipc: set blocking: %w", err)
	}
	typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil || typ != unix.SOCK_SEQPACKET {
		unix.Close(fd)
		return nil, fmt.Errorf("ipc: fd is not a SOCK_SEQPACKET socket")
	}
	c := &Conn{
		fd:         fd,
		maxMessage: DefaultMaxMessage,
		rbuf:       make([]byte, MaxFrame+1),
		oob:        make([]byte, unix.CmsgSpace(MaxFDs*4)),
	}
	c.refs.Store(1)
	return c, nil
}

// use takes a reference on fd for one call; false once the fd is closed.
func (c *Conn) use() bool {
	for {
		n := c.refs.Load()
		if n <= 0 {
			return false
		}
		if c.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// release drops a reference; the last one closes fd.
func (c *Conn) release() {
	if c.refs.Add(-1) == 0 {
		unix.Close(c.fd)
	}
}

// SetWait has ReadMessage call wait(fd), on the reading goroutine, before
// each receive: wait returns once the socket fd is readable (or hung up),
// and may do other work on that goroutine's thread meanwhile (poll the
// socket with other fds, for example). fd stays open while wait runs; wait
// must not close it or read from it. Call SetWait before the first read.
func (c *Conn) SetWait(wait func(fd int)) { c.wait = wait }

// SetMaxMessage changes the bound on one reassembled message.
func (c *Conn) SetMaxMessage(n int) { c.maxMessage = n }

// Close shuts the socket down, which wakes any blocked reader, and
// releases the fd once no call uses it. It is safe to call more than once
// and from any goroutine.
func (c *Conn) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	// shutdown, not close, wakes a recvmsg blocked in another goroutine;
	// closing first would leave it blocked and let the fd number be reused
	// under it.
	unix.Shutdown(c.fd, unix.SHUT_RDWR)
	c.release()
	return nil
}

// WriteMessage sends one message (JSON text) with optional fds. Messages
// larger than MaxFrame are fragmented; the fds travel with the first frame.
func (c *Conn) WriteMessage(msg []byte, fds []int) error {
	if len(msg) == 0 {
		// A zero-length datagram reads as a hang-up on SOCK_SEQPACKET.
		return errors.New("ipc: empty message")
	}
	if len(msg) > c.maxMessage {
		return fmt.Errorf("ipc: message of %d bytes exceeds the %d byte limit", len(msg), c.maxMessage)
	}
	if len(fds) > MaxFDs {
		return fmt.Errorf("ipc: %d fds exceed the limit of %d per message", len(fds), MaxFDs)
	}
	if !c.use() {
		return ErrClosed
	}
	defer c.release()
	if c.closed.Load() {
		return ErrClosed
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()

	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	if len(msg) <= MaxFrame {
		return c.send(msg, oob)
	}
	frame := make([]byte, 0, MaxFrame)
	for len(msg) > 0 {
		n := MaxFrame - 1
		frame = frame[:0]
		if len(msg) > MaxFrame {
			frame = append(frame, fragmentMark)
			frame = append(frame, msg[:n]...)
			msg = msg[n:]
		} else {
			frame = append(frame, msg...)
			msg = nil
		}
		if err := c.send(frame, oob); err != nil {
			return err
		}
		oob = nil
	}
	return nil
}

func (c *Conn) send(frame, oob []byte) error {
	for {
		var err error
		if len(oob) == 0 {
			// send(2) without an address, not sendmsg: inside a sandbox
			// with the unix socket gate (pkg/notify), sendto without an
			// address is the one send that costs no round trip to the
			// supervisor; sendmsg always makes one.
			err = unix.Sendto(c.fd, frame, unix.MSG_NOSIGNAL, nil)
		} else {
			err = unix.Sendmsg(c.fd, frame, oob, nil, unix.MSG_NOSIGNAL)
		}
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EPIPE), errors.Is(err, unix.ECONNRESET):
			return ErrClosed
		}
		if c.closed.Load() {
			return ErrClosed
		}
		return fmt.Errorf("ipc: send: %w", err)
	}
}

// ReadMessage returns the next whole message and the fds that came with it.
// The fds are close-on-exec and owned by the caller. A framing violation
// returns an error wrapping ErrProtocol; a hang-up returns ErrClosed.
func (c *Conn) ReadMessage() ([]byte, []int, error) {
	msg, fds, charge, err := c.readMessage()
	// The caller, not a Peer, keeps the message: it is its own to bound.
	c.budget.give(charge)
	return msg, fds, err
}

// readMessage is ReadMessage that also returns the bytes of c's budget
// the message holds (cap(msg)); the caller gives them back once it no
// longer holds the message.
func (c *Conn) readMessage() ([]byte, []int, int64, error) {
	if !c.use() {
		return nil, nil, 0, ErrClosed
	}
	defer c.release()
	c.rmu.Lock()
	defer c.rmu.Unlock()

	var msg []byte
	var fds []int
	var charge int64
	fail := func(err error) ([]byte, []int, int64, error) {
		closeFDs(fds)
		c.budget.give(charge)
		return nil, nil, 0, err
	}
	reset := false
	for {
		if c.closed.Load() {
			return fail(ErrClosed)
		}
		if c.wait != nil {
			c.wait(c.fd)
		}
		// MSG_CMSG_CLOEXEC: fds received from the peer are never leaked
		// into a program we start later (see close-before-exec).
		n, oobn, flags, err := c.recvmsg(unix.MSG_CMSG_CLOEXEC)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if errors.Is(err, unix.ECONNRESET) && !reset {
				// A peer that hung up with our messages unread
				// (unix_release_sock) leaves ECONNRESET pending, and the
				// kernel reports it before the messages that peer sent
				// last (__skb_try_recv_datagram checks sk_err first), which
				// say why: a protocol error, a budget refused. Reading it
				// cleared it; the next read returns them, then EOF.
				reset = true
				continue
			}
			if errors.Is(err, unix.ECONNRESET) || errors.Is(err, unix.EBADF) || c.closed.Load() {
				return fail(ErrClosed)
			}
			return fail(fmt.Errorf("ipc: recv: %w", err))
		}
		if oobn > 0 {
			got, perr := parseRights(c.oob[:oobn])
			fds = append(fds, got...)
			if perr != nil {
				return fail(perr)
			}
			if len(fds) > MaxFDs {
				return fail(fmt.Errorf("%w: more than %d fds in one message", ErrProtocol, MaxFDs))
			}
		}
		if flags&unix.MSG_CTRUNC != 0 {
			return fail(fmt.Errorf("%w: control data truncated (too many fds)", ErrProtocol))
		}
		if n == 0 && oobn == 0 {
			// An orderly hang-up: SOCK_SEQPACKET reports EOF as a zero-length
			// read.
			return fail(ErrClosed)
		}
		// A frame larger than MaxFrame is a protocol violation: reading it
		// whole would need an unbounded buffer. MSG_TRUNC tells us it was cut.
		if flags&unix.MSG_TRUNC != 0 || n > MaxFrame {
			return fail(fmt.Errorf("%w: frame larger than %d bytes", ErrProtocol, MaxFrame))
		}
		frame := c.rbuf[:n]
		more := n > 0 && frame[0] == fragmentMark
		if more {
			frame = frame[1:]
		}
		if len(msg)+len(frame) > c.maxMessage {
			return fail(fmt.Errorf("%w: message larger than %d bytes", ErrProtocol, c.maxMessage))
		}
		if c.budget != nil && len(msg)+len(frame) > cap(msg) {
			// Security: every byte of a message being reassembled is
			// charged to the budget before it is allocated, and stays
			// charged while the message (or the request it carries) is
			// held. Without this a program could open many connections
			// and leave on each a message one fragment short of its end:
			// MaxMessage per connection, held for good, outside the
			// sandbox's memory limit. Over the budget the connection is
			// closed, which frees what it held.
			n := len(msg) + len(frame)
			if more {
				// Grow by doubling, as append does, within maxMessage.
				n = max(n, min(2*cap(msg), c.maxMessage))
			}
			if !c.budget.take(int64(n - cap(msg))) {
				return fail(c.budget.errOverBudget())
			}
			charge += int64(n - cap(msg))
			grown := make([]byte, len(msg), n)
			copy(grown, msg)
			msg = grown
		}
		msg = append(msg, frame...)
		if !more {
			return msg, fds, charge, nil
		}
	}
}

// recvmsg receives one frame into rbuf and its control data into oob. It
// is unix.Recvmsg without the sender's address (a socketpair has none),
// which that function allocates for every call. Called with rmu held.
func (c *Conn) recvmsg(flags int) (n, oobn, recvflags int, err error) {
	c.iov.Base = &c.rbuf[0]
	c.iov.SetLen(len(c.rbuf))
	c.hdr = unix.Msghdr{Iov: &c.iov, Control: &c.oob[0]}
	c.hdr.SetIovlen(1)
	c.hdr.SetControllen(len(c.oob))
	r, _, e := unix.Syscall(unix.SYS_RECVMSG, uintptr(c.fd), uintptr(unsafe.Pointer(&c.hdr)), uintptr(flags))
	if e != 0 {
		return 0, 0, 0, e
	}
	return int(r), int(c.hdr.Controllen), int(c.hdr.Flags), nil
}

func parseRights(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("%w: bad control message: %v", ErrProtocol, err)
	}
	var fds []int
	for i := range msgs {
		got, err := unix.ParseUnixRights(&msgs[i])
		if err != nil {
			// Not SCM_RIGHTS (for example credentials): ignore.
			continue
		}
		fds = append(fds, got...)
	}
	return fds, nil
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// WriteEnvelope sends one envelope with optional fds.
func (c *Conn) WriteEnvelope(env *Envelope, fds []int) error {
	data, err := json.Marshal(env)
	if err != nil {
		return err
	}
	return c.WriteMessage(data, fds)
}

// ReadEnvelope reads and decodes one envelope. Garbage is an ErrProtocol.
func (c *Conn) ReadEnvelope() (*Envelope, []int, error) {
	msg, fds, err := c.ReadMessage()
	if err != nil {
		return nil, nil, err
	}
	var env Envelope
	if err := decodeEnvelope(msg, &env); err != nil || env.Type == "" {
		closeFDs(fds)
		return nil, nil, fmt.Errorf("%w: malformed envelope", ErrProtocol)
	}
	return &env, fds, nil
}
