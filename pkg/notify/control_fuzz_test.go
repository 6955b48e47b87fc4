package notify

import (
	"bytes"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// FuzzTranslateControl gives translateControl any control buffer a
// sandbox can pass to a sendmsg the supervisor makes for it on an internet
// socket (go test -run '^$' -fuzz FuzzTranslateControl ./pkg/notify). What
// the supervisor sends must carry no message the kernel would check
// against the sender's credentials (it would check the supervisor's): so
// either the call fails, or every message sent is one of perPacketOption's
// with the data the sandbox gave, in order. Never a panic.
func FuzzTranslateControl(f *testing.F) {
	cmsg := func(level, typ int, data []byte) []byte {
		b := make([]byte, unix.CmsgSpace(len(data)))
		h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
		h.Level, h.Type = int32(level), int32(typ)
		h.SetLen(unix.CmsgLen(len(data)))
		copy(b[unix.CmsgLen(0):], data)
		return b
	}
	f.Add(cmsg(unix.IPPROTO_IP, unix.IP_TOS, []byte{0x10, 0, 0, 0}))
	f.Add(append(cmsg(unix.IPPROTO_IP, unix.IP_TTL, []byte{7, 0, 0, 0}), cmsg(unix.IPPROTO_UDP, unix.UDP_SEGMENT, []byte{0, 5})...))
	f.Add(cmsg(unix.SOL_SOCKET, unix.SCM_CREDENTIALS, make([]byte, 12)))
	f.Add(cmsg(unix.SOL_SOCKET, unix.SO_MARK, []byte{1, 0, 0, 0}))
	f.Add(cmsg(unix.SOL_SOCKET, unix.SCM_RIGHTS, []byte{3, 0, 0, 0}))
	f.Add(cmsg(unix.IPPROTO_IPV6, unix.IPV6_PKTINFO, make([]byte, 20)))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})
	f.Add([]byte{})

	f.Fuzz(func(t *testing.T, oob []byte) {
		for _, domain := range []int{unix.AF_INET, unix.AF_INET6} {
			var s Server
			m := &msg{}
			errno := s.translateControl(&SockCall{Domain: domain}, m, oob)
			if len(m.fds) != 0 {
				t.Fatalf("an internet socket's message took files: %v", m.fds)
			}
			if errno != 0 {
				continue
			}
			in, err := unix.ParseSocketControlMessage(oob)
			if err != nil {
				t.Fatalf("accepted a control buffer the parser refuses: %v", err)
			}
			out, err := unix.ParseSocketControlMessage(m.oob)
			if err != nil {
				t.Fatalf("built a control buffer that does not parse: %v (%x)", err, m.oob)
			}
			if len(out) != len(in) {
				t.Fatalf("%d messages sent for %d given", len(out), len(in))
			}
			for i, cm := range out {
				h := cm.Header
				if !perPacketOption(int(h.Level), int(h.Type)) {
					t.Fatalf("message %d sent with level %d type %d", i, h.Level, h.Type)
				}
				if h.Level != in[i].Header.Level || h.Type != in[i].Header.Type || !bytes.Equal(cm.Data, in[i].Data) {
					t.Fatalf("message %d changed: %+v %x, given %+v %x", i, h, cm.Data, in[i].Header, in[i].Data)
				}
			}
		}
	})
}
