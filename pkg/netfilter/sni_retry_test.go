package netfilter

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// firstWriteListener records whether the first bytes a server wrote on any
// of its connections held a HelloRetryRequest.
type firstWriteListener struct {
	net.Listener
	retried atomic.Bool
}

func (l *firstWriteListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &firstWriteConn{Conn: c, l: l}, nil
}

type firstWriteConn struct {
	net.Conn
	l    *firstWriteListener
	once sync.Once
}

func (c *firstWriteConn) Write(b []byte) (int, error) {
	c.once.Do(func() {
		if bytes.Contains(b, helloRetryRandom) {
			c.l.retried.Store(true)
		}
	})
	return c.Conn.Write(b)
}

// installedConn connects through f to v:port and returns the installed
// socket as a net.Conn.
func installedConn(t *testing.T, f *Filter, v netip.Addr, port uint16) net.Conn {
	t.Helper()
	verdict, err := f.Connect(context.Background(), netip.AddrPortFrom(v, port), Socket{Family: unix.AF_INET, Type: unix.SOCK_STREAM, FD: -1})
	if err != nil || verdict.Action != Install {
		t.Fatalf("connect: %+v %v", verdict, err)
	}
	file := os.NewFile(uintptr(verdict.Conn.Release()), "installed")
	fc, err := net.FileConn(file)
	file.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fc.Close() })
	fc.SetDeadline(time.Now().Add(30 * time.Second))
	return fc
}

// TestSNIHelloRetryChecked: under CheckSNI a TLS 1.3 handshake with a
// HelloRetryRequest (crypto/tls on both sides: the server accepts P-256
// only, the client sends an X25519 key share first) goes through the
// relay, whose check reads the second ClientHello (after the client's
// change_cipher_spec) and finds the same name. The refusal of a second
// ClientHello naming another site is TestReview2DNSSNISecondClientHelloUnchecked.
func TestSNIHelloRetryChecked(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "tls ok") }))
	lw := &firstWriteListener{Listener: srv.Listener}
	srv.Listener = lw
	srv.TLS = &tls.Config{MinVersion: tls.VersionTLS13, CurvePreferences: []tls.CurveID{tls.CurveP256}}
	srv.StartTLS()
	defer srv.Close()
	port := netip.MustParseAddrPort(srv.Listener.Addr().String()).Port()
	var refusals atomic.Int64
	f := newFilter(t, newFakeUpstream(t), []string{"good.test:" + itoa(port)}, nil, []string{"good.test:127.0.0.1"}, func(c *Config) {
		c.CheckSNI, c.SNIPorts = true, []uint16{port}
		c.OnRefusal = func(*Refusal) { refusals.Add(1) }
	})
	defer f.Close()
	v := resolveVia(t, serve(t, f), "good.test")
	tc := tls.Client(installedConn(t, f, v, port), &tls.Config{
		ServerName: "good.test", InsecureSkipVerify: true,
		CurvePreferences: []tls.CurveID{tls.X25519, tls.CurveP256},
	})
	if err := tc.Handshake(); err != nil {
		t.Fatalf("handshake with a HelloRetryRequest through the relay: %v (%d refusals)", err, refusals.Load())
	}
	io.WriteString(tc, "GET / HTTP/1.0\r\nHost: good.test\r\n\r\n")
	body, err := io.ReadAll(tc)
	if err != nil || !strings.HasSuffix(string(body), "tls ok") {
		t.Fatalf("%q %v", body, err)
	}
	if !lw.retried.Load() {
		t.Fatal("the server sent no HelloRetryRequest: the test tested nothing")
	}
	if n := refusals.Load(); n != 0 {
		t.Fatalf("%d refusals", n)
	}
}

// TestSNIHelloRetryServerAnswers: what the relay does with the server's
// answer to a ClientHello that is no plain ServerHello: a second
// HelloRetryRequest (forbidden, RFC 8446 4.1.4) and an answer that is not
// TLS are refused, so no third ClientHello reaches the server.
func TestSNIHelloRetryServerAnswers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(c net.Conn) int // after the first ClientHello; the ClientHellos it read
		reason string
	}{
		{"second retry", func(c net.Conn) int {
			c.Write(helloRetryRecord())
			if _, err := readRecord(c); err != nil {
				return 0
			}
			c.Write(helloRetryRecord())
			return 1
		}, "second HelloRetryRequest"},
		{"not a ServerHello", func(c net.Conn) int { c.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n")); return 0 }, "not a ServerHello"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp4", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			hellos := make(chan int, 1)
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				c.SetDeadline(time.Now().Add(30 * time.Second))
				n := 0
				if _, err := readRecord(c); err == nil {
					n++
				}
				n += tc.answer(c)
				for {
					rec, err := readRecord(c)
					if err != nil {
						break
					}
					if rec[0] == recHandshake {
						n++
					}
				}
				hellos <- n
			}()
			port := ln.Addr().(*net.TCPAddr).AddrPort().Port()
			var mu sync.Mutex
			var reasons []string
			f := newFilter(t, newFakeUpstream(t), []string{"good.test:" + itoa(port)}, nil, []string{"good.test:127.0.0.1"}, func(c *Config) {
				c.CheckSNI, c.SNIPorts = true, []uint16{port}
				c.OnRefusal = func(r *Refusal) { mu.Lock(); reasons = append(reasons, r.Reason); mu.Unlock() }
			})
			defer f.Close()
			v := resolveVia(t, serve(t, f), "good.test")
			fc := installedConn(t, f, v, port)
			// The client answers every retry with the same name.
			fc.Write(clientHello(t, "good.test"))
			for {
				rec, err := readRecord(fc)
				if err != nil {
					break
				}
				if rec[0] == recHandshake && bytes.Contains(rec, helloRetryRandom) {
					fc.Write(clientHello(t, "good.test"))
				}
			}
			var n int
			select {
			case n = <-hellos:
			case <-time.After(30 * time.Second): // a deadlock guard
				t.Fatal("the server's connection did not end")
			}
			mu.Lock()
			defer mu.Unlock()
			if len(reasons) != 1 || !strings.Contains(reasons[0], tc.reason) {
				t.Errorf("refusals %q, want one naming %q", reasons, tc.reason)
			}
			if tc.name == "second retry" && n != 2 {
				t.Errorf("the server got %d ClientHellos, want 2", n)
			}
		})
	}
}
