package netfilter

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultSNIPorts are the ports whose connections the SNI check
// (Config.CheckSNI) applies to: TLS on 443. Other ports keep the kernel's
// data path.
var DefaultSNIPorts = []uint16{443}

const (
	// maxClientHello bounds what is read before the decision: one TLS
	// record (2^14 bytes) and its header.
	maxClientHello = 5 + 1<<14
	// helloTimeout bounds the wait for the ClientHello.
	helloTimeout = 10 * time.Second
	// maxServerRecord bounds a record read from the server before the
	// relay copies plainly: a TLS record's largest (2^14 bytes and a
	// TLS 1.2 ciphertext's 2048 more, RFC 5246 section 6.2.3) and its
	// header.
	maxServerRecord = 5 + 1<<14 + 2048
	// maxServerRecords bounds the records read from the server before its
	// ServerHello (change_cipher_spec and warning alerts, forwarded).
	maxServerRecords = 4
	// serverHelloTimeout bounds the wait for the server's answer to a
	// ClientHello, as a blocking connect is bounded (DefaultConnectTimeout).
	serverHelloTimeout = 30 * time.Second
)

// TLS record content types (RFC 8446 section 5.1).
const (
	recChangeCipherSpec = 20
	recAlert            = 21
	recHandshake        = 22
)

// helloRetryRandom is the Random of a ServerHello that is a
// HelloRetryRequest: SHA-256 of "HelloRetryRequest" (RFC 8446 section
// 4.1.3).
var helloRetryRandom = []byte{
	0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
	0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
}

// errNotServerHello is a server whose answer to a ClientHello is not a
// TLS ServerHello the check can follow.
var errNotServerHello = errors.New("the server's answer is not a TLS ServerHello")

// errServerEnded is a server that answered a ClientHello with a fatal
// alert: the handshake is over, the alert was passed on.
var errServerEnded = errors.New("the server ended the handshake")

// errNoSNI is a ClientHello without a server name, or not a ClientHello.
var errNoSNI = errors.New("not a TLS ClientHello with a server name")

// errECH is a ClientHello carrying Encrypted Client Hello (or ESNI): its
// clear server name is not the one the server will serve.
var errECH = errors.New("a TLS ClientHello with Encrypted Client Hello")

// sniConnect connects the sandbox to real through a relay in the
// supervisor that reads the TLS ClientHello first: the connection goes on
// only when its server name (SNI) is the allowed name the sandbox
// resolved. That catches the SNI form of domain fronting (a connection to
// an allowed name's address on a shared CDN that names another site in
// its ClientHello); what TLS encrypts (an HTTP Host header naming another
// site, renegotiation, early data) it cannot see.
//
// The socket installed in the sandbox is one end of a TCP connection over
// the host's loopback to the relay; the data path is the supervisor's
// (io.Copy, which splices on Linux), not the kernel's alone.
//
// A nonblocking socket's connect does not wait for the upstream dial
// (sniConnectAsync).
func (f *Filter) sniConnect(ctx context.Context, sock Socket, name string, real netip.AddrPort) (*Conn, unix.Errno, error) {
	if sock.Nonblock {
		return f.sniConnectAsync(sock, name, real)
	}
	ctx, cancel := context.WithTimeout(ctx, f.cfg.ConnectTimeout)
	defer cancel()
	var d net.Dialer
	up, err := d.DialContext(ctx, "tcp", real.String())
	if err != nil {
		f.release()
		var se unix.Errno
		if errors.As(err, &se) {
			return nil, se, nil
		}
		return nil, unix.ETIMEDOUT, nil
	}
	client, relay, id, errno, err := f.relayPair(sock, up)
	if errno != 0 {
		up.Close()
		return nil, errno, err
	}
	go f.relay(relay, up, id, name, real.Port())
	return &Conn{fd: client, Addr: real, relayed: true}, 0, nil
}

// sniConnectAsync is sniConnect for a nonblocking socket: the relay's pair
// is installed at once (connected, as a loopback connect may be) and the
// upstream is dialled in the background; a dial that fails resets the
// installed end, which the program then reads as the connection's error.
// Waiting for the dial held one of the trap's few handlers for up to the
// connect timeout: eight nonblocking connects to a silent address stalled
// every trapped call of the sandbox, DNS included, for 30 s (review 74).
func (f *Filter) sniConnectAsync(sock Socket, name string, real netip.AddrPort) (*Conn, unix.Errno, error) {
	client, relay, id, errno, err := f.relayPair(sock, nil)
	if errno != 0 {
		return nil, errno, err
	}
	go func() {
		// Bounded by the connect timeout, and ended by Close (f.ctx).
		ctx, cancel := context.WithTimeout(f.ctx, f.cfg.ConnectTimeout)
		var d net.Dialer
		up, err := d.DialContext(ctx, "tcp", real.String())
		cancel()
		if err == nil && !f.addRelayUp(up) {
			up.Close()
			err = ErrClosed
		}
		if err != nil {
			_ = relay.SetLinger(0) // a reset, not an orderly end
			f.dropRelay(relay, nil, id)
			f.servers.Done()
			return
		}
		f.relay(relay, up, id, name, real.Port())
	}()
	return &Conn{fd: client, Addr: real, relayed: true}, 0, nil
}

// relayPair makes the relay's loopback pair for sock (the end to install,
// nonblocking as sock is, and the relay's) and records it, with up (nil:
// dialled later, addRelayUp). A failure releases the connection reserved
// and returns the errno the sandbox's connect gets.
func (f *Filter) relayPair(sock Socket, up net.Conn) (client int, relay *net.TCPConn, id uint64, errno unix.Errno, err error) {
	client, relay, err = loopbackPair(sock.Family)
	if err != nil {
		f.release()
		return -1, nil, 0, unix.EIO, fmt.Errorf("network filter: SNI relay: %w", err)
	}
	if sock.Nonblock {
		if err := setNonblock(client, true); err != nil {
			unix.Close(client)
			relay.Close()
			f.release()
			return -1, nil, 0, unix.EIO, err
		}
	}
	id, err = f.addRelay(relay, up, client)
	if err != nil {
		unix.Close(client)
		relay.Close()
		f.release()
		if errors.Is(err, ErrClosed) {
			return -1, nil, 0, unix.ECONNABORTED, err
		}
		return -1, nil, 0, unix.ENOBUFS, fmt.Errorf("network filter: counting a connection: %w", err)
	}
	return client, relay, id, 0, nil
}

// addRelayUp records the upstream connection of a relay whose dial ended
// after the relay started (sniConnectAsync), so that Close ends it; false
// once the filter is closed.
func (f *Filter) addRelayUp(up net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.relays[up] = struct{}{}
	return true
}

// errRelayPort is a relay socket no local port could be bound for.
var errRelayPort = errors.New("no local port could be bound for the relay's socket")

// loopbackPair returns a connected TCP socket of family (the one to
// install) and the relay's end, over the host's loopback.
func loopbackPair(family int) (int, *net.TCPConn, error) {
	ln, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return -1, nil, err
	}
	defer ln.Close()
	la := ln.Addr().(*net.TCPAddr)
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		return -1, nil, err
	}
	// The socket installed in the sandbox is the host's: its local port
	// is bound here, explicitly, so that the kernel keeps it once the
	// relay cuts the connection (SOCK_BINDPORT_LOCK). A port the connect
	// picked is given back at TCP_CLOSE, and the sandbox, whose bind(2)
	// is not trapped, then bound the socket to a host port of its
	// choosing (found by review: TestReviewDNSSNIRelaySocketSquatsHostPort;
	// see bindLocked). Unlike dial, no bound port: no relay (fail closed).
	bindLocked(fd, family)
	if bound, err := unix.Getsockname(fd); err != nil || sockPort(bound) == 0 {
		unix.Close(fd)
		return -1, nil, errRelayPort
	}
	var sa unix.Sockaddr = &unix.SockaddrInet4{Port: la.Port, Addr: [4]byte{127, 0, 0, 1}}
	if family == unix.AF_INET6 {
		sa = &unix.SockaddrInet6{Port: la.Port, Addr: netip.AddrFrom4([4]byte{127, 0, 0, 1}).As16()}
	}
	if err := unix.Connect(fd, sa); err != nil {
		unix.Close(fd)
		return -1, nil, err
	}
	local, err := unix.Getsockname(fd)
	if err != nil {
		unix.Close(fd)
		return -1, nil, err
	}
	port := sockPort(local)
	// Another process of the host could connect to the listener in the
	// meantime: only the connection from our own socket is taken.
	_ = ln.SetDeadline(time.Now().Add(helloTimeout))
	for range 8 {
		c, err := ln.AcceptTCP()
		if err != nil {
			unix.Close(fd)
			return -1, nil, err
		}
		if c.RemoteAddr().(*net.TCPAddr).Port == port {
			return fd, c, nil
		}
		c.Close()
	}
	unix.Close(fd)
	return -1, nil, errors.New("the relay's listener was raced")
}

func sockPort(sa unix.Sockaddr) int {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return a.Port
	case *unix.SockaddrInet6:
		return a.Port
	}
	return 0
}

// addRelay records a relay about to start (its two connections, a and b)
// and registers client, the end to be installed in the sandbox, in the
// live set under the relay's id.
//
// An SNI connection counts against MaxConns once, for as long as either
// its relay runs or its installed end is open (reserve,
// relaysUncountedLocked): the installed end is a host socket the sandbox
// holds, and once the relay cut it, it was counted nowhere (found by
// review: TestReviewDNSSNIRelaySquatsPastConnCap); a relay whose sandbox
// end closed lives on while its upstream answers.
func (f *Filter) addRelay(a, b net.Conn, client int) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return 0, ErrClosed
	}
	f.relayNext++
	id := f.relayNext
	if err := f.live.addTagged(client, id); err != nil {
		return 0, err
	}
	f.relays[a] = struct{}{}
	if b != nil {
		f.relays[b] = struct{}{}
	}
	f.relayIDs[id] = struct{}{}
	f.servers.Add(1)
	return id, nil
}

func (f *Filter) dropRelay(a, b net.Conn, id uint64) {
	a.Close()
	if b != nil {
		b.Close()
	}
	f.mu.Lock()
	delete(f.relays, a)
	if b != nil {
		delete(f.relays, b)
	}
	delete(f.relayIDs, id)
	f.mu.Unlock()
}

// relaysUncountedLocked is the number of relays running whose installed
// end the live set no longer counts (closed at its last count): with the
// live set's count, each SNI connection counted once. Called with mu held.
func (f *Filter) relaysUncountedLocked() int {
	n := 0
	for id := range f.relayIDs {
		if !f.live.open(id) {
			n++
		}
	}
	return n
}

// relay reads the ClientHello from the sandbox's side, checks its server
// name, and then copies both ways until either side ends.
func (f *Filter) relay(sandbox *net.TCPConn, up net.Conn, id uint64, name string, port uint16) {
	defer f.servers.Done()
	defer f.dropRelay(sandbox, up, id)
	_ = sandbox.SetReadDeadline(time.Now().Add(helloTimeout))
	hello, sni, err := readClientHello(sandbox)
	if err != nil || !sameName(sni, name) {
		f.refuse(&Refusal{Op: OpConnect, Host: name, Port: port, Reason: helloRefused(sni, name, err, false), Errno: unix.ECONNRESET})
		return
	}
	if _, err := up.Write(hello); err != nil {
		return
	}
	// The first ClientHello is not the only one sent in clear: the
	// handshake is followed until the server's ServerHello (below), and
	// only then is the connection copied unread.
	if !f.followHello(sandbox, up, name, port) {
		return
	}
	_ = sandbox.SetReadDeadline(time.Time{})
	_ = up.SetReadDeadline(time.Time{})
	done := make(chan struct{}, 2)
	sandboxDone := make(chan struct{})
	go func() {
		io.Copy(up, sandbox)
		closeWrite(up)
		// Also wakes a read of up already waiting (net.Conn deadlines).
		_ = up.SetReadDeadline(time.Now().Add(relayLinger))
		close(sandboxDone)
		done <- struct{}{}
	}()
	go func() { copyLingering(sandbox, up, sandboxDone); closeWrite(sandbox); done <- struct{}{} }()
	<-done
	<-done
}

// sameName reports whether a ClientHello's server name is the allowed
// name the connection was opened for.
//
// Only ASCII letters fold (a DNS name's case rule, RFC 4343): EqualFold
// folded U+212A (the Kelvin sign) to "k", so a name no server answers to
// passed as the allowed one (review 74).
func sameName(sni, name string) bool {
	sni = strings.TrimSuffix(sni, ".")
	if len(sni) != len(name) {
		return false
	}
	for i := 0; i < len(sni); i++ {
		a, b := sni[i], name[i]
		if 'A' <= a && a <= 'Z' {
			a += 'a' - 'A'
		}
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		if a != b {
			return false
		}
	}
	return true
}

// helloRefused says why a ClientHello (retried: the one sent again after
// a HelloRetryRequest) was refused.
func helloRefused(sni, name string, err error, retried bool) string {
	switch {
	case errors.Is(err, errECH):
		return fmt.Sprintf("the TLS ClientHello (outer server name %q) carries Encrypted Client Hello, whose inner server name the SNI check cannot read (refused under --check-sni; a browser's GREASE ECH too)", sni)
	case err != nil && retried:
		return "after a HelloRetryRequest the connection did not send a TLS ClientHello naming its server (the SNI check is on for this port)"
	case err != nil:
		return "the connection did not start with a TLS ClientHello naming its server (the SNI check is on for this port)"
	}
	again := ""
	if retried {
		again = " in the ClientHello sent again after a HelloRetryRequest"
	}
	return fmt.Sprintf("the TLS server name %q%s is not %s, the name the connection was opened for (domain fronting)", sni, again, name)
}

// followHello reads the server's answer to the ClientHello just relayed
// and passes it on; when it is a HelloRetryRequest it reads the client's
// second ClientHello and checks it as the first. It returns true once the
// server sent a ServerHello that is not a HelloRetryRequest: from there on
// the handshake runs under the keys the checked ClientHello started, and
// no further ClientHello is sent in clear (a TLS 1.2 renegotiation's is
// encrypted). False: the relay ends (refused, or the connection failed).
//
// A HelloRetryRequest (RFC 8446 section 4.1.4) makes the client send a
// second ClientHello, in clear, which a relay that copies after the first
// passed unread: a client names the allowed host in the first and another
// site in the second, and a front end that routes by the second (as a
// server re-running its name callback on it does) serves that site
// (domain fronting; found by review:
// TestReview2DNSSNISecondClientHelloUnchecked). The second is checked
// rather than every retry refused: a retry is ordinary TLS 1.3 (the
// server prefers a group the client sent no key share for, or wants a
// cookie), and refusing it would cut clients that did nothing wrong;
// RFC 8446 section 4.1.2 has the client repeat its server_name, so the
// same name is required, read by the same parser (ECH refused as in the
// first). A second HelloRetryRequest is refused (the RFC has the client
// abort). Bounded as the first read: record sizes, record count, and a
// deadline on each read.
func (f *Filter) followHello(sandbox, up net.Conn, name string, port uint16) bool {
	for hellos := 1; ; hellos++ {
		_ = up.SetReadDeadline(time.Now().Add(serverHelloTimeout))
		retry, err := passServerHello(up, sandbox)
		switch {
		case errors.Is(err, errNotServerHello):
			f.refuse(&Refusal{Op: OpConnect, Host: name, Port: port, Reason: "the server's answer to the TLS ClientHello is not a ServerHello the SNI check can follow (the SNI check is on for this port)", Errno: unix.ECONNRESET})
			return false
		case err != nil:
			return false // ended, failed or silent: nothing more to relay
		case !retry:
			return true
		case hellos == 2:
			f.refuse(&Refusal{Op: OpConnect, Host: name, Port: port, Reason: "the server sent a second HelloRetryRequest, which TLS 1.3 forbids (RFC 8446 section 4.1.4): a third ClientHello is not relayed", Errno: unix.ECONNRESET})
			return false
		}
		_ = sandbox.SetReadDeadline(time.Now().Add(helloTimeout))
		hello, sni, err := readRetriedHello(sandbox, up)
		// The second ClientHello names the same host as the first, or
		// the connection is cut before it reaches the server: no other
		// site is asked for in clear after a retry.
		if err != nil || !sameName(sni, name) {
			f.refuse(&Refusal{Op: OpConnect, Host: name, Port: port, Reason: helloRefused(sni, name, err, true), Errno: unix.ECONNRESET})
			return false
		}
		if _, err := up.Write(hello); err != nil {
			return false
		}
	}
}

// passServerHello reads the server's records up to its first handshake
// record, passes each on to the sandbox, and reports whether that record
// starts a HelloRetryRequest. A change_cipher_spec (middlebox
// compatibility, RFC 8446 appendix D.4) and a warning alert (a TLS 1.2
// server's unrecognized_name) are passed on and skipped; a fatal alert
// ends the handshake (errServerEnded); anything else, or a ServerHello
// split so that its Random is not in the first record, is
// errNotServerHello (fail closed).
func passServerHello(up, sandbox net.Conn) (bool, error) {
	for range maxServerRecords {
		rec, err := readTLSRecord(up, maxServerRecord)
		if err != nil {
			if errors.Is(err, errNotRecord) {
				return false, errNotServerHello
			}
			return false, err
		}
		if _, err := sandbox.Write(rec); err != nil {
			return false, err
		}
		body := rec[5:]
		switch rec[0] {
		case recChangeCipherSpec:
			continue
		case recAlert:
			if len(body) == 2 && body[0] == 1 { // level warning
				continue
			}
			return false, errServerEnded
		case recHandshake:
			// msg_type server_hello (2), its 3-byte length, legacy_version,
			// then the Random (RFC 8446 section 4.1.3).
			if len(body) < 4+2+32 || body[0] != 2 {
				return false, errNotServerHello
			}
			return bytes.Equal(body[6:38], helloRetryRandom), nil
		}
		return false, errNotServerHello
	}
	return false, errNotServerHello
}

// readRetriedHello reads the ClientHello a client sends after a
// HelloRetryRequest. One change_cipher_spec record may come first
// (middlebox compatibility, RFC 8446 appendix D.4: "immediately before its
// second flight"); it is passed on to up. Anything else before the
// ClientHello (early data among it: RFC 8446 section 4.2.10 rejects it
// with a retry) is refused, as a first record that is not a ClientHello
// is.
func readRetriedHello(sandbox, up net.Conn) ([]byte, string, error) {
	rec, err := readTLSRecord(sandbox, maxClientHello)
	if err == nil && rec[0] == recChangeCipherSpec && len(rec) == 6 && rec[5] == 1 {
		if _, err := up.Write(rec); err != nil {
			return nil, "", err
		}
		rec, err = readTLSRecord(sandbox, maxClientHello)
	}
	if errors.Is(err, errNotRecord) || (err == nil && rec[0] != recHandshake) {
		return nil, "", errNoSNI
	}
	if err != nil {
		return nil, "", err
	}
	sni, err := parseSNI(rec[5:])
	return rec, sni, err
}

// relayLinger is how long the upstream may stay silent once the sandbox
// has stopped sending: a silent upstream then ends the relay, which
// otherwise held two sockets and two goroutines for as long as the
// upstream kept its half of the connection open, after the sandbox had
// closed its socket (found by review).
const relayLinger = 60 * time.Second

// copyLingering copies up to sandbox until either ends. Once sandboxDone
// is closed (its closer set the first deadline), each read that brings
// data gives the next one relayLinger more.
func copyLingering(sandbox, up net.Conn, sandboxDone <-chan struct{}) {
	buf := make([]byte, 32<<10)
	for {
		n, err := up.Read(buf)
		if n > 0 {
			if _, werr := sandbox.Write(buf[:n]); werr != nil {
				return
			}
			select {
			case <-sandboxDone:
				_ = up.SetReadDeadline(time.Now().Add(relayLinger))
			default:
			}
		}
		if err != nil {
			return
		}
	}
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.CloseWrite()
	}
}

// readClientHello reads one TLS record holding a ClientHello and returns
// the bytes read and the server name it asks for.
func readClientHello(r io.Reader) ([]byte, string, error) {
	buf, err := readTLSRecord(r, maxClientHello)
	if errors.Is(err, errNotRecord) || (err == nil && buf[0] != recHandshake) {
		return nil, "", errNoSNI
	}
	if err != nil {
		return nil, "", err
	}
	sni, err := parseSNI(buf[5:])
	return buf, sni, err
}

// errNotRecord is a header that is not a TLS record's, or one longer than
// the reader's bound.
var errNotRecord = errors.New("not a TLS record")

// readTLSRecord reads one TLS record, header included, of at most max
// bytes; the header's length is checked before anything is allocated.
func readTLSRecord(r io.Reader, max int) ([]byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint16(hdr[3:5]))
	if hdr[0] < recChangeCipherSpec || hdr[0] > 23 || hdr[1] != 3 || n == 0 || 5+n > max {
		return nil, errNotRecord
	}
	buf := make([]byte, 5+n)
	copy(buf, hdr[:])
	if _, err := io.ReadFull(r, buf[5:]); err != nil {
		return nil, err
	}
	return buf, nil
}

// parseSNI reads the server_name extension of a ClientHello handshake
// message (RFC 8446 section 4.1.2, RFC 6066 section 3). A ClientHello
// split over several records is not read: it is refused (fail closed).
func parseSNI(b []byte) (string, error) {
	p := reader(b)
	if t, ok := p.u8(); !ok || t != 1 { // client_hello
		return "", errNoSNI
	}
	// Exactly one handshake message: the ClientHello fills the record's
	// data to its end. A second message packed behind it (another
	// ClientHello naming another host, which a server that answers the
	// first with a HelloRetryRequest takes for the retried one) would
	// reach the server unread (found by review:
	// TestReview3NetSNISecondHelloInFirstRecord). RFC 8446 section 5.1:
	// a ClientHello must not share a record with another message.
	if l, ok := p.u24(); !ok || l != len(p) {
		return "", errNoSNI
	}
	if !p.skip(2 + 32) { // legacy_version, random
		return "", errNoSNI
	}
	if !p.skipVec8() || !p.skipVec16() || !p.skipVec8() { // session id, cipher suites, compression
		return "", errNoSNI
	}
	exts, ok := p.vec16()
	if !ok {
		return "", errNoSNI
	}
	var (
		sni     string
		seen    bool // a server_name extension was read
		wrapped bool // an ECH or ESNI extension was seen
	)
	for len(exts) > 0 {
		typ, ok1 := exts.u16()
		body, ok2 := exts.vec16()
		if !ok1 || !ok2 {
			return "", errNoSNI
		}
		switch typ {
		case extECH, extESNI:
			wrapped = true
		case extServerName:
			if seen {
				// Two server names: which one a server reads is its
				// choice, not the check's (fail closed).
				return "", errNoSNI
			}
			seen = true
			// Invariant: exactly one entry, a host_name (RFC 6066 3:
			// "MUST NOT contain more than one name of the same
			// name_type"; only host_name is defined), with nothing after
			// it. A list of an unknown type first and the allowed name
			// second, or two host names, was taken by its first host
			// name, while a front end that reads another entry would
			// route by that one (review 74): fail closed.
			list, ok := body.vec16()
			kind, ok1 := list.u8()
			host, ok2 := list.vec16()
			if !ok || !ok1 || !ok2 || kind != 0 || len(list) != 0 {
				return "", errNoSNI
			}
			sni = string(host)
		}
	}
	if wrapped {
		// The clear name is only the outer one: a client-facing server
		// holding the ECH key serves the encrypted inner name, which
		// the check cannot read (domain fronting; found by review:
		// TestReviewDNSSNIBypassedByEncryptedClientHello). Refused,
		// GREASE ECH too (draft-ietf-tls-esni section 6.2).
		return sni, errECH
	}
	if sni == "" {
		return "", errNoSNI
	}
	return sni, nil
}

// TLS extensions parseSNI reads (IANA "TLS ExtensionType Values").
const (
	extServerName = 0      // RFC 6066
	extECH        = 0xfe0d // encrypted_client_hello, draft-ietf-tls-esni
	extESNI       = 0xffce // encrypted_server_name, its earlier drafts
)

type reader []byte

func (r *reader) u8() (int, bool) {
	if len(*r) < 1 {
		return 0, false
	}
	v := int((*r)[0])
	*r = (*r)[1:]
	return v, true
}

func (r *reader) u16() (int, bool) {
	if len(*r) < 2 {
		return 0, false
	}
	v := int(binary.BigEndian.Uint16(*r))
	*r = (*r)[2:]
	return v, true
}

func (r *reader) u24() (int, bool) {
	if len(*r) < 3 {
		return 0, false
	}
	v := int((*r)[0])<<16 | int((*r)[1])<<8 | int((*r)[2])
	*r = (*r)[3:]
	return v, true
}

func (r *reader) skip(n int) bool {
	if len(*r) < n {
		return false
	}
	*r = (*r)[n:]
	return true
}

func (r *reader) vec16() (reader, bool) {
	n, ok := r.u16()
	if !ok || len(*r) < n {
		return nil, false
	}
	v := (*r)[:n]
	*r = (*r)[n:]
	return v, true
}

func (r *reader) skipVec8() bool {
	n, ok := r.u8()
	return ok && r.skip(n)
}

func (r *reader) skipVec16() bool {
	_, ok := r.vec16()
	return ok
}
