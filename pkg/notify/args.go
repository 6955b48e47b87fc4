package notify

import (
	"encoding/binary"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The target's arguments: the address, the data and the msghdr of a socket
// call, copied from the target's memory once, and the calls the supervisor
// makes with those copies.

// riov is an iovec of the target: an address there, not here.
type riov struct{ base, n uint64 }

// readAddr copies the address argument (ptr, n) of the target.
func (s *Server) readAddr(c *SockCall, ptr, n uint64) ([]byte, unix.Errno) {
	if ptr == 0 {
		if n != 0 && c.Syscall == Connect {
			return nil, unix.EFAULT
		}
		return nil, 0
	}
	ln := int64(int32(n))
	if ln < 0 || ln > maxAddr {
		return nil, unix.EINVAL
	}
	if ln == 0 {
		return nil, 0
	}
	b := make([]byte, ln)
	if err := readMem(c.Pid, ptr, b); err != nil {
		return nil, unix.EFAULT
	}
	if !c.Valid() {
		return nil, unix.EINTR
	}
	return b, 0
}

// readData copies the bytes of iovs from the target, at most MaxData.
func (s *Server) readData(c *SockCall, iovs []riov) ([]byte, unix.Errno) {
	var total uint64
	for _, v := range iovs {
		total += v.n
		if total > 1<<40 {
			return nil, unix.EINVAL
		}
	}
	if total > uint64(s.o.MaxData) {
		if c.Type == 0 {
			t, err := unix.GetsockoptInt(c.Sock, unix.SOL_SOCKET, unix.SO_TYPE)
			if err != nil {
				return nil, errnoOf(err)
			}
			c.Type = t
		}
		if c.Type != unix.SOCK_STREAM {
			// A datagram is sent whole or not at all.
			return nil, unix.EMSGSIZE
		}
		total = uint64(s.o.MaxData) // a short write, which a stream allows
	}
	buf := make([]byte, total)
	off := uint64(0)
	for _, v := range iovs {
		if off == total {
			break
		}
		k := min(v.n, total-off)
		if k == 0 {
			continue
		}
		if err := readMem(c.Pid, v.base, buf[off:off+k]); err != nil {
			return nil, unix.EFAULT
		}
		off += k
	}
	if !c.Valid() {
		return nil, unix.EINTR
	}
	return buf, 0
}

// msg is the supervisor's copy of a struct msghdr's payload.
type msg struct {
	data []byte
	oob  []byte
	fds  []int // supervisor fds carried by oob (SCM_RIGHTS), closed after
}

func (m *msg) close() {
	for _, fd := range m.fds {
		unix.Close(fd)
	}
}

// Layout of struct msghdr on 64-bit Linux.
const (
	sizeofMsghdr  = 56
	sizeofMmsghdr = 64
	sizeofIovec   = 16
	maxIov        = 1024 // UIO_MAXIOV
	maxControl    = 4096
)

// readMsg copies the msghdr at ptr: its name (into c.Addr), its data and
// its control messages. File descriptors passed with SCM_RIGHTS are the
// target's numbers: each is taken with pidfd_getfd, so the message carries
// the very files the target named.
func (s *Server) readMsg(c *SockCall, ptr uint64) (*msg, unix.Errno) {
	var h [sizeofMsghdr]byte
	if err := readMem(c.Pid, ptr, h[:]); err != nil {
		return nil, unix.EFAULT
	}
	if !c.Valid() {
		return nil, unix.EINTR
	}
	le := binary.LittleEndian
	name, namelen := le.Uint64(h[0:]), uint64(le.Uint32(h[8:]))
	iov, iovlen := le.Uint64(h[16:]), le.Uint64(h[24:])
	ctl, ctllen := le.Uint64(h[32:]), le.Uint64(h[40:])
	var errno unix.Errno
	if c.Addr, errno = s.readAddr(c, name, namelen); errno != 0 {
		return nil, errno
	}
	if iovlen > maxIov {
		return nil, unix.EMSGSIZE
	}
	iovs := make([]riov, iovlen)
	if iovlen > 0 {
		raw := make([]byte, iovlen*sizeofIovec)
		if err := readMem(c.Pid, iov, raw); err != nil {
			return nil, unix.EFAULT
		}
		for i := range iovs {
			iovs[i] = riov{le.Uint64(raw[i*16:]), le.Uint64(raw[i*16+8:])}
		}
	}
	m := &msg{}
	if m.data, errno = s.readData(c, iovs); errno != 0 {
		return nil, errno
	}
	if ctllen == 0 {
		return m, 0
	}
	if ctllen > maxControl {
		return nil, unix.ENOBUFS
	}
	oob := make([]byte, ctllen)
	if err := readMem(c.Pid, ctl, oob); err != nil {
		return nil, unix.EFAULT
	}
	if !c.Valid() {
		return nil, unix.EINTR
	}
	if errno := s.translateControl(c, m, oob); errno != 0 {
		m.close()
		return nil, errno
	}
	return m, 0
}

// translateControl rebuilds the control messages for the supervisor's
// send. Only what carries no credential of the sender passes: the
// supervisor sends with its own credentials, and a control message the
// kernel checks against the sender's (SCM_CREDENTIALS, SO_MARK,
// SO_PRIORITY...) would be checked against the supervisor's, a confused
// deputy. SCM_RIGHTS on unix sockets is translated fd by fd; a few
// per-packet IP options are copied; anything else fails with EOPNOTSUPP.
func (s *Server) translateControl(c *SockCall, m *msg, oob []byte) unix.Errno {
	cmsgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return unix.EINVAL
	}
	var out []byte
	for _, cm := range cmsgs {
		h := cm.Header
		switch {
		case c.Domain == unix.AF_UNIX && h.Level == unix.SOL_SOCKET && h.Type == unix.SCM_RIGHTS:
			if len(cm.Data)%4 != 0 || len(cm.Data)/4 > 253 { // SCM_MAX_FD
				return unix.EINVAL
			}
			var fds []int
			for i := 0; i < len(cm.Data); i += 4 {
				tfd := int(int32(binary.LittleEndian.Uint32(cm.Data[i:])))
				fd, e := s.getfd(c, tfd)
				if e != 0 {
					m.fds = append(m.fds, fds...)
					return e
				}
				fds = append(fds, fd)
			}
			m.fds = append(m.fds, fds...)
			out = append(out, unix.UnixRights(fds...)...)
		case c.Domain != unix.AF_UNIX && perPacketOption(int(h.Level), int(h.Type)):
			b := make([]byte, unix.CmsgSpace(len(cm.Data)))
			hdr := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
			hdr.Level, hdr.Type = h.Level, h.Type
			hdr.SetLen(unix.CmsgLen(len(cm.Data)))
			copy(b[unix.CmsgLen(0):], cm.Data)
			out = append(out, b...)
		default:
			return unix.EOPNOTSUPP
		}
	}
	m.oob = out
	return 0
}

// perPacketOption: IP options of one datagram that need no privilege of
// the sender (ip(7), ipv6(7), udp(7) GSO).
func perPacketOption(level, typ int) bool {
	switch level {
	case unix.IPPROTO_IP:
		return typ == unix.IP_TOS || typ == unix.IP_TTL || typ == unix.IP_PKTINFO
	case unix.IPPROTO_IPV6:
		return typ == unix.IPV6_TCLASS || typ == unix.IPV6_HOPLIMIT || typ == unix.IPV6_PKTINFO
	case unix.IPPROTO_UDP:
		return typ == unix.UDP_SEGMENT
	}
	return false
}

// sendmmsg handles each message as a sendmsg, in order, and writes each
// msg_len back as the kernel does. It stops at the first failure: the
// count sent so far is the result, or the error when nothing was sent.
func (s *Server) sendmmsg(c *SockCall, vec uint64, vlen uint32, flags int) (int64, unix.Errno, bool) {
	vlen = min(vlen, maxIov)
	sent := int64(0)
	for i := uint32(0); i < vlen; i++ {
		at := vec + uint64(i)*sizeofMmsghdr
		m, errno := s.readMsg(c, at)
		if errno == 0 {
			c.Data = m.data
			v := s.verdict(c)
			var val int64
			val, errno, _ = s.perform(c, v, func(addr []byte) (int64, unix.Errno) {
				return sysSendmsg(c.Sock, m.data, m.oob, addr, flags)
			})
			m.close()
			if errno == 0 {
				var l [4]byte
				binary.LittleEndian.PutUint32(l[:], uint32(val))
				if s.writeMem(c, at+sizeofMsghdr, l[:]) != nil {
					errno = unix.EFAULT
				}
			}
		}
		if errno != 0 {
			if sent == 0 {
				return 0, errno, false
			}
			break
		}
		sent++
		c.Addr = nil
	}
	return sent, 0, false
}

func sysConnect(fd int, addr []byte) (int64, unix.Errno) {
	var p unsafe.Pointer
	if len(addr) > 0 {
		p = unsafe.Pointer(&addr[0])
	}
	_, _, e := unix.Syscall(unix.SYS_CONNECT, uintptr(fd), uintptr(p), uintptr(len(addr)))
	if e != 0 {
		return 0, e
	}
	return 0, 0
}

// sysSendmsg sends data with oob to addr (nil: the connected peer).
// MSG_NOSIGNAL is added: a broken pipe must not signal the supervisor (the
// target gets EPIPE, without the SIGPIPE it would have got).
func sysSendmsg(fd int, data, oob, addr []byte, flags int) (int64, unix.Errno) {
	if flags&unix.MSG_ZEROCOPY != 0 {
		// The kernel would keep sending from the supervisor's copy after
		// the call returns, and the completions would reach the target
		// for a buffer it never lent: refused, the target copies.
		return 0, unix.EOPNOTSUPP
	}
	var h unix.Msghdr
	var iov unix.Iovec
	if len(data) > 0 {
		iov.Base = &data[0]
		iov.SetLen(len(data))
		h.Iov = &iov
		h.SetIovlen(1)
	}
	if len(oob) > 0 {
		h.Control = &oob[0]
		h.SetControllen(len(oob))
	}
	if len(addr) > 0 {
		h.Name = &addr[0]
		h.Namelen = uint32(len(addr))
	}
	r, _, e := unix.Syscall(unix.SYS_SENDMSG, uintptr(fd), uintptr(unsafe.Pointer(&h)), uintptr(flags|unix.MSG_NOSIGNAL))
	if e != 0 {
		return 0, e
	}
	return int64(r), 0
}
