package notify

import (
	"encoding/binary"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Socket ioctls in a network namespace of the sandbox's own. A socket
// answers the device ioctls for the namespace it was made in (sock_ioctl,
// dev_ioctl and arp_ioctl on sock_net(sk)), whatever its family, and two
// kinds of socket of the host's namespace reach a sandbox that has its
// own: the hostCall socket the supervisor places at fd 3 of every command
// (review 39: under --net none, the default), and with a filtered network
// the sockets it installs (review 38). On either, SIOCGIFCONF listed every
// host interface with its address and SIOCGARP read the host's neighbour
// table, no privilege asked, where the sandbox's namespace holds lo alone.
// Program sends the socket layer's device ioctls (type 0x89, and the
// wireless extensions' 0x8B) to the supervisor, except those that set
// (the kernel asks CAP_NET_ADMIN over the socket's namespace for each,
// which no sandbox holds over the host's) and the two that concern the
// socket itself; the supervisor refuses them on a socket of the host's
// namespace, and makes the ones that only read on its copy of any other
// socket, which answers for the sandbox's namespace, copying the argument
// in and the answer out. Never CONTINUE: another thread could put a
// socket of the host's at the fd number between the check and the call.

const (
	siocFirst     = 0x8910 // SIOCGIFNAME: the first device ioctl
	siocEnd       = 0x8a00 // past SIOCDEVPRIVATE+15
	siocWireless  = 0x8b00 // SIOCIWFIRST (uapi linux/wireless.h)
	siocWirelessE = 0x8c00 // past SIOCIWLASTPRIV
	siocOutqNSD   = 0x894b // SIOCOUTQNSD: the socket's own send queue
	siocGSKNS     = 0x894c // SIOCGSKNS: needs CAP_NET_ADMIN over the namespace
	siocGIFCONF   = 0x8912
	siocEthtool   = 0x8946
	sizeofIfreq   = 40 // struct ifreq (IFNAMSIZ and a 24-byte union)
	sizeofIfconf  = 16 // struct ifconf: int ifc_len, a pointer
	sizeofArpreq  = 68 // struct arpreq
	// maxIfconf bounds the buffer the supervisor fills for SIOCGIFCONF:
	// the sandbox's namespace has a handful of interfaces, 40 bytes each.
	maxIfconf = 64 << 10
)

// siocSets are the device ioctls that change something: the kernel asks
// CAP_NET_ADMIN over the socket's network namespace for each (dev_ioctl,
// devinet_ioctl, arp_ioctl, the bonding, bridge, VLAN and timestamping
// handlers), so on an installed socket they fail, and on the sandbox's own
// they are its own business: Program lets them run.
var siocSets = []uint32{
	0x8911 /* SIOCSIFLINK */, 0x8914 /* SIOCSIFFLAGS */, 0x8916, /* SIOCSIFADDR */
	0x8918 /* SIOCSIFDSTADDR */, 0x891a /* SIOCSIFBRDADDR */, 0x891c, /* SIOCSIFNETMASK */
	0x891e /* SIOCSIFMETRIC */, 0x8920 /* SIOCSIFMEM */, 0x8922, /* SIOCSIFMTU */
	0x8923 /* SIOCSIFNAME */, 0x8924 /* SIOCSIFHWADDR */, 0x8926, /* SIOCSIFENCAP */
	0x8930 /* SIOCSIFSLAVE */, 0x8931 /* SIOCADDMULTI */, 0x8932, /* SIOCDELMULTI */
	0x8934 /* SIOCSIFPFLAGS */, 0x8936 /* SIOCDIFADDR */, 0x8937, /* SIOCSIFHWBROADCAST */
	0x8943 /* SIOCSIFTXQLEN */, 0x8953 /* SIOCDARP */, 0x8955, /* SIOCSARP */
	0x8960 /* SIOCDRARP */, 0x8962 /* SIOCSRARP */, 0x8971, /* SIOCSIFMAP */
	0x8990 /* SIOCBONDENSLAVE */, 0x8991 /* SIOCBONDRELEASE */, 0x8992, /* SIOCBONDSETHWADDR */
	0x8993 /* SIOCBONDCHANGEACTIVE */, 0x89a0 /* SIOCBRADDBR */, 0x89a1, /* SIOCBRDELBR */
	0x89a2 /* SIOCBRADDIF */, 0x89a3 /* SIOCBRDELIF */, 0x89b0, /* SIOCSHWTSTAMP */
}

// siocReads are the device ioctls the supervisor makes for a socket of the
// sandbox's namespace, with the size of the argument they read and write
// back; beside them SIOCGIFCONF and the ethtool reads of a fixed size
// (ethtool), every other one notified is EOPNOTSUPP (MII, bridge and
// bonding queries, wireless: nothing lo answers, and their arguments
// point further into the caller's memory).
var siocReads = map[uint32]int{
	0x8910 /* SIOCGIFNAME */ : sizeofIfreq, 0x8913 /* SIOCGIFFLAGS */ : sizeofIfreq,
	0x8915 /* SIOCGIFADDR */ : sizeofIfreq, 0x8917 /* SIOCGIFDSTADDR */ : sizeofIfreq,
	0x8919 /* SIOCGIFBRDADDR */ : sizeofIfreq, 0x891b /* SIOCGIFNETMASK */ : sizeofIfreq,
	0x891d /* SIOCGIFMETRIC */ : sizeofIfreq, 0x891f /* SIOCGIFMEM */ : sizeofIfreq,
	0x8921 /* SIOCGIFMTU */ : sizeofIfreq, 0x8925 /* SIOCGIFENCAP */ : sizeofIfreq,
	0x8927 /* SIOCGIFHWADDR */ : sizeofIfreq, 0x8929 /* SIOCGIFSLAVE */ : sizeofIfreq,
	0x8933 /* SIOCGIFINDEX */ : sizeofIfreq, 0x8935 /* SIOCGIFPFLAGS */ : sizeofIfreq,
	0x8938 /* SIOCGIFCOUNT */ : sizeofIfreq, 0x8942 /* SIOCGIFTXQLEN */ : sizeofIfreq,
	0x8970 /* SIOCGIFMAP */ : sizeofIfreq,
	0x8954 /* SIOCGARP */ :   sizeofArpreq, 0x8961 /* SIOCGRARP */ : sizeofArpreq,
}

// ioctl answers a notified device ioctl on c.Sock, the supervisor's copy
// of the target's socket.
func (s *Server) ioctl(c *SockCall, req uint32, arg uint64) (int64, unix.Errno) {
	// Only a socket of the sandbox's own namespace answers: one of the
	// supervisor's (the hostCall socket, an installed one), and one of
	// any other, is refused. Comparing with the supervisor's namespace
	// alone let a stdin socket through when nsbox itself ran in a
	// namespace of its own (ip netns exec, PrivateNetwork=yes with
	// socket activation: review 42). Without a cookie to compare (a
	// kernel before 5.14) every one is refused.
	ns, err := netnsCookie(c.Sock)
	if err != nil || s.o.SandboxNetns == 0 || ns != s.o.SandboxNetns {
		return 0, unix.EPERM
	}
	switch req {
	case siocGIFCONF:
		return s.ifconf(c, arg)
	case siocEthtool:
		return s.ethtool(c, arg)
	}
	n, ok := siocReads[req]
	if !ok {
		return 0, unix.EOPNOTSUPP
	}
	buf := make([]byte, n)
	if err := readMem(c.Pid, arg, buf); err != nil {
		return 0, unix.EFAULT
	}
	if !c.Valid() {
		return 0, unix.EINTR
	}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(c.Sock), uintptr(req), uintptr(unsafe.Pointer(&buf[0]))); e != 0 {
		return 0, e
	}
	if s.writeMem(c, arg, buf) != nil {
		return 0, unix.EFAULT
	}
	return 0, 0
}

// ifconf answers SIOCGIFCONF: struct ifconf at arg names a buffer of
// ifc_len bytes (NULL: the length the list needs is written back).
func (s *Server) ifconf(c *SockCall, arg uint64) (int64, unix.Errno) {
	var hdr [sizeofIfconf]byte
	if err := readMem(c.Pid, arg, hdr[:]); err != nil {
		return 0, unix.EFAULT
	}
	if !c.Valid() {
		return 0, unix.EINTR
	}
	n := int32(binary.NativeEndian.Uint32(hdr[0:4]))
	ptr := binary.NativeEndian.Uint64(hdr[8:16])
	var own struct {
		len int32
		_   int32
		buf uintptr
	}
	var buf []byte
	if ptr != 0 {
		if n < 0 {
			return 0, unix.EINVAL
		}
		buf = make([]byte, min(int(n), maxIfconf)+1)
		own.buf = uintptr(unsafe.Pointer(&buf[0]))
		own.len = int32(len(buf) - 1)
	}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(c.Sock), siocGIFCONF, uintptr(unsafe.Pointer(&own))); e != 0 {
		return 0, e
	}
	if ptr != 0 && own.len > 0 {
		if own.len > int32(len(buf)-1) || s.writeMem(c, ptr, buf[:own.len]) != nil {
			return 0, unix.EFAULT
		}
	}
	binary.NativeEndian.PutUint32(hdr[0:4], uint32(own.len))
	if s.writeMem(c, arg, hdr[0:4]) != nil {
		return 0, unix.EFAULT
	}
	return 0, 0
}

// ethtoolReads are the ethtool commands of a fixed size that only read,
// with that size: lo answers them (its link state, offloads, driver,
// timestamping), and the previous build let programs ask (review 42).
// Every other command, those that set among them, is EOPNOTSUPP: the
// supervisor would make a set with its own capabilities, and the
// variable-size reads point further into the caller's memory.
var ethtoolReads = map[uint32]int{
	0x03 /* ETHTOOL_GDRVINFO: struct ethtool_drvinfo */ :    196,
	0x41 /* ETHTOOL_GET_TS_INFO: struct ethtool_ts_info */ : 44,
	// struct ethtool_value (cmd, data):
	// (uapi linux/ethtool.h; 0x12 is GPAUSEPARAM, 16 bytes: review 45)
	0x0a /* GLINK */ : 8, 0x14 /* GRXCSUM */ : 8, 0x16 /* GTXCSUM */ : 8,
	0x18 /* GSG */ : 8, 0x1e /* GTSO */ : 8, 0x21 /* GUFO */ : 8,
	0x23 /* GGSO */ : 8, 0x25 /* GFLAGS */ : 8, 0x27 /* GPFLAGS */ : 8,
	0x2b /* GGRO */ : 8,
}

// ethtool answers SIOCETHTOOL: struct ifreq at arg names the device, and
// its ifr_data the command's buffer, whose first word is the command.
func (s *Server) ethtool(c *SockCall, arg uint64) (int64, unix.Errno) {
	var req [sizeofIfreq]byte
	if err := readMem(c.Pid, arg, req[:]); err != nil {
		return 0, unix.EFAULT
	}
	data := binary.NativeEndian.Uint64(req[16:24])
	var cmd [4]byte
	if err := readMem(c.Pid, data, cmd[:]); err != nil {
		return 0, unix.EFAULT
	}
	want := binary.NativeEndian.Uint32(cmd[:])
	n, ok := ethtoolReads[want]
	if !ok {
		return 0, unix.EOPNOTSUPP
	}
	buf := make([]byte, n)
	if err := readMem(c.Pid, data, buf); err != nil {
		return 0, unix.EFAULT
	}
	// Invariant: the command the kernel runs is the one the size was
	// chosen for. The kernel reads it from buf, the second copy; another
	// process of the sandbox sharing that page could have changed it
	// since the first read, and ETHTOOL_GSTRINGS then wrote 2 KiB into
	// this 8- to 196-byte buffer (a heap overflow of the supervisor),
	// or a set ran with the supervisor's capabilities (review 43).
	if binary.NativeEndian.Uint32(buf[:4]) != want {
		return 0, unix.EINVAL
	}
	if !c.Valid() {
		return 0, unix.EINTR
	}
	// The supervisor's ifreq points at the supervisor's copy.
	binary.NativeEndian.PutUint64(req[16:24], uint64(uintptr(unsafe.Pointer(&buf[0]))))
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(c.Sock), siocEthtool, uintptr(unsafe.Pointer(&req[0])))
	runtime.KeepAlive(buf)
	if e != 0 {
		return 0, e
	}
	if s.writeMem(c, data, buf) != nil {
		return 0, unix.EFAULT
	}
	return 0, 0
}
