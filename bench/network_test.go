package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

// The filtered network (pkg/netfilter) against --net host, in one run:
//
//	go test -tags seccomp -run '^$' -bench 'Net' -benchtime 5x ./bench/
//
// Every byte goes over the host's loopback to a server of this process.

// netPolicies are the networks compared, each with the address the
// sandbox dials to reach the host's 127.0.0.1:port.
func netPolicies(port int) []struct {
	name string
	p    sandbox.Policy
	host string
} {
	host := policy()
	host.Network = sandbox.NetworkHost
	filtered := policy()
	filtered.Network = sandbox.NetworkFiltered
	filtered.NetFilter = &sandbox.NetFilter{Allow: []string{"bench.test:" + strconv.Itoa(port)}, Hosts: []string{"bench.test:127.0.0.1"}}
	// The unix socket gate traps connect for every sandbox; without it
	// a connect on --net host never leaves the kernel.
	bare := host
	bare.UnixSockets.Unrestricted = true
	return []struct {
		name string
		p    sandbox.Policy
		host string
	}{{"net=host,no-trap", bare, "127.0.0.1"}, {"net=host", host, "127.0.0.1"}, {"net=filtered", filtered, "bench.test"}}
}

// zeroServer serves size bytes of zeros per connection, HTTP/1.0 style.
func zeroServer(tb testing.TB, size int64) int {
	tb.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	buf := make([]byte, 1<<20)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := make([]byte, 4096)
				c.Read(r) // the request
				fmt.Fprintf(c, "HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n", size)
				io.CopyBuffer(c, io.LimitReader(zeros{}, size), buf)
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// netRounds runs round(i, variant) for every variant in turn, rounds times
// (a b c a b c ...), so that the load of a shared machine falls on every
// variant alike, and returns each variant's durations.
func netRounds(b *testing.B, rounds int, variants []string, round func(v int) time.Duration) map[string][]time.Duration {
	out := map[string][]time.Duration{}
	for i := 0; i < rounds; i++ {
		for v, name := range variants {
			out[name] = append(out[name], round(v))
		}
	}
	return out
}

// BenchmarkNetBulk downloads 256 MiB with curl, the variants interleaved:
// the filter's data path is the kernel's once the connection is installed.
// Reported: MB/s of the median download per variant.
func BenchmarkNetBulk(b *testing.B) {
	if _, err := exec.LookPath("curl"); err != nil {
		b.Skip("curl is not installed")
	}
	const size = 256 << 20
	port := zeroServer(b, size)
	ps := netPolicies(port)
	var names []string
	var sessions []*sandbox.Session
	for _, c := range ps {
		s := startSession(b, c.p)
		defer s.Close()
		names, sessions = append(names, c.name), append(sessions, s)
	}
	b.ResetTimer()
	got := netRounds(b, max(b.N, 5), names, func(v int) time.Duration {
		url := fmt.Sprintf("http://%s:%d/", ps[v].host, port)
		t0 := time.Now()
		res, err := sessions[v].Exec(context.Background(), sandbox.Command{Argv: []string{"curl", "-sS", "-o", "/dev/null", url}})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("%v %d %s", err, res.ExitCode, res.Stderr)
		}
		return time.Since(t0)
	})
	for _, n := range names {
		b.ReportMetric(float64(size)/median(got[n]).Seconds()/1e6, n+"-MB/s")
	}
}

// connectPy times n connects (socket, connect, close) to an address
// resolved once, and prints the median of 20 batches in nanoseconds per
// connect.
const connectPy = `
import socket, sys, time
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
addr = (socket.gethostbyname(host), port)
for _ in range(50):
    s = socket.socket(); s.connect(addr); s.close()
t = time.perf_counter_ns()
for _ in range(n):
    s = socket.socket(); s.connect(addr); s.close()
print((time.perf_counter_ns() - t) // n)
`

// BenchmarkNetConnect is the latency of one connect to an allowed name
// (the trap, the supervisor's dial from the host, the ADDFD) against a
// plain one, interleaved. Reported: µs per connect (median of the rounds).
func BenchmarkNetConnect(b *testing.B) {
	if _, err := exec.LookPath("python3"); err != nil {
		b.Skip("python3 is not installed")
	}
	port := closeServer(b)
	const n = 500
	ps := netPolicies(port)
	var names []string
	var sessions []*sandbox.Session
	for _, c := range ps {
		s := startSession(b, c.p)
		defer s.Close()
		names, sessions = append(names, c.name), append(sessions, s)
	}
	b.ResetTimer()
	got := netRounds(b, max(b.N, 10), names, func(v int) time.Duration {
		res, err := sessions[v].Exec(context.Background(), sandbox.Command{Argv: []string{"python3", "-c", connectPy, ps[v].host, strconv.Itoa(port), strconv.Itoa(n)}})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("%v %s", err, res.Stderr)
		}
		ns, err := strconv.ParseInt(strings.TrimSpace(string(res.Stdout)), 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		return time.Duration(ns)
	})
	for _, n := range names {
		b.ReportMetric(float64(median(got[n]).Nanoseconds())/1000, n+"-connect-µs")
	}
}

// BenchmarkNetColdStart is Start+Close of a filtered session (the filter,
// the resolver bound and served, resolv.conf, the notification filter)
// against net=none, interleaved. Reported: median µs of Start and of Close.
func BenchmarkNetColdStart(b *testing.B) {
	none := policy()
	filtered := policy()
	filtered.Network = sandbox.NetworkFiltered
	filtered.NetFilter = &sandbox.NetFilter{Allow: []string{"registry.npmjs.org"}}
	ps := []sandbox.Policy{none, filtered}
	names := []string{"net=none", "net=filtered"}
	for _, p := range ps {
		startSession(b, p).Close()
	}
	closes := map[string][]time.Duration{}
	b.ResetTimer()
	starts := netRounds(b, max(b.N, 20), names, func(v int) time.Duration {
		t0 := time.Now()
		s, err := sandbox.Start(context.Background(), ps[v])
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		s.Close()
		closes[names[v]] = append(closes[names[v]], time.Since(t1))
		return t1.Sub(t0)
	})
	for _, n := range names {
		b.ReportMetric(float64(median(starts[n]).Microseconds()), n+"-start-µs")
		b.ReportMetric(float64(median(closes[n]).Microseconds()), n+"-close-µs")
	}
}
