package netfilter

// Repro tests from a third outside review (branch rv3net) of the filtered
// network's fixes (issue 18). Each TestReview3Net* here FAILS on purpose
// on the code reviewed, and passes once the finding is fixed.

import (
	"encoding/binary"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// handshakeNames splits a TLS handshake record's body into its handshake
// messages, as a TLS stack's handshake layer does (RFC 8446 section 5.1:
// a record may hold several), and returns the server name of each
// ClientHello among them.
func handshakeNames(body []byte) []string {
	var names []string
	for len(body) >= 4 {
		n := int(body[1])<<16 | int(body[2])<<8 | int(body[3])
		if 4+n > len(body) {
			break
		}
		if body[0] == 1 {
			if sni, err := parseSNI(body[:4+n]); err == nil {
				names = append(names, sni)
			}
		}
		body = body[4+n:]
	}
	return names
}

// TestReview3NetSNISecondHelloInFirstRecord: the relay checks the first
// record from the sandbox with parseSNI (sni.go readClientHello), which
// reads the first handshake message's server_name and ignores whatever
// follows that message in the record (parseSNI checks only that the
// message's length is not past the record's end, sni.go parseSNI "l >
// len(p)"); the whole record is then written upstream. A record may carry
// several handshake messages, so a client inside puts ClientHello(allowed
// name) and ClientHello(other site) in one record: the check sees the
// first, the server's handshake layer gets both. A server that answers
// the first with a HelloRetryRequest takes the second, already buffered,
// as the retried ClientHello (the case 6957fe7 meant to close: a server
// that re-runs its name callback on it routes by it), and the relay's
// check of the record the client sends after the retry reads a third,
// harmless one. RFC 8446 section 5.1 has a ClientHello end at a record
// boundary, which is what the relay should hold the client to (Go's
// server holds it itself, crypto/tls handshake_server_tls13.go
// doHelloRetryRequest, "handshake buffer not empty", for this very case;
// the check must not depend on the server's stack): here the upstream sees a ClientHello naming "other.example" on a connection
// opened for good.test.
func TestReview3NetSNISecondHelloInFirstRecord(t *testing.T) {
	first := clientHello(t, "good.test")
	second := clientHello(t, "other.example")
	body := append(append([]byte{}, first[5:]...), second[5:]...)
	rec := append([]byte{22, 3, 1, 0, 0}, body...)
	binary.BigEndian.PutUint16(rec[3:5], uint16(len(body)))
	// The record is what the test says: both names, as a TLS stack splits it.
	if got := handshakeNames(rec[5:]); !slices.Equal(got, []string{"good.test", "other.example"}) {
		t.Fatalf("the crafted record holds %q, want good.test then other.example: nothing tested", got)
	}

	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	seen := make(chan []string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			seen <- nil
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(30 * time.Second))
		r, err := readRecord(c)
		if err != nil || r[0] != recHandshake {
			seen <- nil // refused by the relay: nothing reached the server
			return
		}
		seen <- handshakeNames(r[5:])
	}()
	port := ln.Addr().(*net.TCPAddr).AddrPort().Port()
	var refusals atomic.Int64
	f := newFilter(t, newFakeUpstream(t), []string{"good.test:" + itoa(port)}, nil, []string{"good.test:127.0.0.1"}, func(c *Config) {
		c.CheckSNI, c.SNIPorts = true, []uint16{port}
		c.OnRefusal = func(*Refusal) { refusals.Add(1) }
	})
	defer f.Close()
	v := resolveVia(t, serve(t, f), "good.test")
	fc := installedConn(t, f, v, port)
	if _, err := fc.Write(rec); err != nil {
		t.Fatal(err)
	}
	var got []string
	select {
	case got = <-seen:
	case <-time.After(30 * time.Second): // a deadlock guard
		t.Fatal("the upstream saw neither a record nor the end of the connection")
	}
	if slices.Contains(got, "other.example") {
		t.Errorf("CheckSNI passed a first record holding ClientHellos for %q on a connection opened for good.test (%d refusals): the handshake message after the checked one reached the server unread", got, refusals.Load())
	}
}
