// Package bench holds the Go benchmarks of nsbox (docs/benchmarks.md):
//
//	go test -tags seccomp -run '^$' -bench . -benchtime 2s ./bench/
//
// The test binary is itself the embedding program: TestMain calls
// sandbox.Init first, so that Start can re-execute it as the sandbox worker.
// It also serves two helper roles, chosen by environment variable: the
// hostCall client run inside a sandbox (benchClientEnv) and the echo process
// of the cross-process socket baseline (benchEchoEnv).
package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/pkg/ipc"
	"github.com/nsbox/nsbox/pkg/sandbox"
	"golang.org/x/sys/unix"
)

const (
	benchClientEnv = "NSBOX_BENCH_CLIENT" // hostCall client mode inside a sandbox
	benchEchoEnv   = "NSBOX_BENCH_ECHO"   // echo process for the raw baseline
)

func TestMain(m *testing.M) {
	// The worker is this binary re-executed: before anything else.
	sandbox.Init()
	if mode := os.Getenv(benchClientEnv); mode != "" {
		os.Exit(clientMain(mode))
	}
	if os.Getenv(benchEchoEnv) != "" {
		os.Exit(echoMain(3))
	}
	os.Exit(m.Run())
}

// policy is what `nsbox run` uses by default: the read-only host root, no
// network, private /tmp /dev /proc /run.
func policy() sandbox.Policy {
	return sandbox.Policy{Cwd: "/", Hostname: "bench"}
}

func startSession(tb testing.TB, p sandbox.Policy, opts ...sandbox.Option) *sandbox.Session {
	tb.Helper()
	s, err := sandbox.Start(context.Background(), p, opts...)
	if err != nil {
		tb.Skipf("cannot start a sandbox here: %v", err)
	}
	return s
}

// ---------------------------------------------------------------- start

// BenchmarkSessionStartClose is one sandbox's whole life as an embedding
// program sees it: Start (clone, worker start, mount plan, handshake) and
// Close (PID-namespace teardown, limits removed).
func BenchmarkSessionStartClose(b *testing.B) {
	for _, c := range []struct {
		name string
		net  sandbox.Network
	}{{"net=none", sandbox.NetworkNone}, {"net=host", sandbox.NetworkHost}} {
		b.Run(c.name, func(b *testing.B) {
			p := policy()
			p.Network = c.net
			startSession(b, p).Close()
			var startD, closeD time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				s, err := sandbox.Start(context.Background(), p)
				if err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
				startD += t1.Sub(t0)
				closeD += time.Since(t1)
			}
			b.ReportMetric(float64(startD.Microseconds())/float64(b.N), "start-µs/op")
			b.ReportMetric(float64(closeD.Microseconds())/float64(b.N), "close-µs/op")
		})
	}
}

// TestStartCloseNoLeak starts and closes sessions in one process and checks
// that its fds, threads, goroutines and the host's mounts do not grow.
func TestStartCloseNoLeak(t *testing.T) {
	n := 100
	if testing.Short() {
		n = 20
	}
	startSession(t, policy()).Close()
	runtime.GC()
	fds0, mounts0, threads0, g0 := countFDs(), countMounts(), countThreads(), runtime.NumGoroutine()
	for i := 0; i < n; i++ {
		s, err := sandbox.Start(context.Background(), policy())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Exec(context.Background(), sandbox.Command{Argv: []string{"/bin/true"}}); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(50 * time.Millisecond)
	runtime.GC()
	fds1, mounts1, threads1, g1 := countFDs(), countMounts(), countThreads(), runtime.NumGoroutine()
	t.Logf("after %d sessions: fds %d→%d, host mounts %d→%d, threads %d→%d, goroutines %d→%d", n, fds0, fds1, mounts0, mounts1, threads0, threads1, g0, g1)
	if fds1 > fds0 {
		t.Errorf("fds grew: %d → %d", fds0, fds1)
	}
	if mounts1 > mounts0 {
		t.Errorf("host mounts grew: %d → %d", mounts0, mounts1)
	}
	if g1 > g0+2 {
		t.Errorf("goroutines grew: %d → %d", g0, g1)
	}
	// Each session's worker is started from a locked thread that exits with
	// it (Pdeathsig); threads must not pile up.
	if threads1 > threads0+4 {
		t.Errorf("threads grew: %d → %d", threads0, threads1)
	}
}

func countFDs() int {
	e, _ := os.ReadDir("/proc/self/fd")
	return len(e)
}

func countThreads() int {
	e, _ := os.ReadDir("/proc/self/task")
	return len(e)
}

func countMounts() int {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	return bytes.Count(b, []byte("\n"))
}

// ---------------------------------------------------------------- exec

var devnull = func() *os.File {
	f, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		panic(err)
	}
	return f
}()

// bareTrue fork+execs /bin/true on the host and waits: the floor.
func bareTrue(tb testing.TB) {
	pid, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{
		Files: []uintptr{devnull.Fd(), devnull.Fd(), devnull.Fd()},
		Env:   []string{"PATH=/usr/bin:/bin"},
	})
	if err != nil {
		tb.Fatal(err)
	}
	var ws syscall.WaitStatus
	for {
		if _, err = syscall.Wait4(pid, &ws, 0, nil); err != syscall.EINTR {
			break
		}
	}
	if err != nil || ws.ExitStatus() != 0 {
		tb.Fatalf("bare /bin/true: %v %v", err, ws)
	}
}

func sessionTrue(tb testing.TB, s *sandbox.Session, capture bool) {
	c := sandbox.Command{Argv: []string{"/bin/true"}}
	if !capture {
		c.Stdin, c.Stdout, c.Stderr = devnull, devnull, devnull
	}
	res, err := s.Exec(context.Background(), c)
	if err != nil || res.ExitCode != 0 {
		tb.Fatalf("Exec /bin/true: %v %+v", err, res)
	}
}

// BenchmarkExecTrue compares running /bin/true in a warm session with a
// bare fork+exec on the host. "interleaved" alternates both in one loop
// (drift hits both alike) and reports the ratio; target ≤ 1.25×.
func BenchmarkExecTrue(b *testing.B) {
	s := startSession(b, policy())
	defer s.Close()
	b.Run("bare-forkexec", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			bareTrue(b)
		}
	})
	b.Run("bare-os-exec-captured", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			var out, errb bytes.Buffer
			cmd := exec.Command("/bin/true")
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("session-devnull", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			sessionTrue(b, s, false)
		}
	})
	b.Run("session-captured", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			sessionTrue(b, s, true)
		}
	})
	b.Run("interleaved", func(b *testing.B) {
		bare := make([]time.Duration, 0, b.N)
		sess := make([]time.Duration, 0, b.N)
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			bareTrue(b)
			t1 := time.Now()
			sessionTrue(b, s, false)
			sess = append(sess, time.Since(t1))
			bare = append(bare, t1.Sub(t0))
		}
		mb, ms := median(bare), median(sess)
		b.ReportMetric(float64(mb.Nanoseconds())/1e3, "bare-median-µs")
		b.ReportMetric(float64(ms.Nanoseconds())/1e3, "session-median-µs")
		b.ReportMetric(float64(ms)/float64(mb), "ratio")
	})
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// ---------------------------------------------------------------- raw socket baseline

// msg100 is a ~100-byte message, the size of a small hostCall envelope.
var msg100 = []byte(`{"type":"hostCall","id":1,"payload":{"api":"bench","method":"echo","args":"0123456789abcdefghij"}}`)

func seqpacketPair(tb testing.TB) [2]int {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		tb.Fatal(err)
	}
	return fds
}

// echoLoop answers every datagram on fd with itself until EOF.
func echoLoop(fd int) {
	buf := make([]byte, 70000)
	for {
		n, err := unix.Read(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			return
		}
		if _, err := unix.Write(fd, buf[:n]); err != nil {
			return
		}
	}
}

func echoMain(fd int) int {
	echoLoop(fd)
	return 0
}

// BenchmarkSeqpacketRoundTrip is the floor of any request/reply over the
// channel: a ~100-byte datagram sent on a blocking SOCK_SEQPACKET socketpair
// and echoed back, with the echo side in another goroutine of this process
// or in another process.
func BenchmarkSeqpacketRoundTrip(b *testing.B) {
	roundTrips := func(b *testing.B, fd int) {
		buf := make([]byte, 70000)
		b.SetBytes(int64(len(msg100)))
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := unix.Write(fd, msg100); err != nil {
				b.Fatal(err)
			}
			if _, err := unix.Read(fd, buf); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("goroutines", func(b *testing.B) {
		fds := seqpacketPair(b)
		go echoLoop(fds[1])
		roundTrips(b, fds[0])
		unix.Shutdown(fds[0], unix.SHUT_RDWR)
		unix.Close(fds[0])
	})
	b.Run("locked-threads", func(b *testing.B) {
		fds := seqpacketPair(b)
		go func() {
			runtime.LockOSThread()
			echoLoop(fds[1])
		}()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		roundTrips(b, fds[0])
		unix.Shutdown(fds[0], unix.SHUT_RDWR)
		unix.Close(fds[0])
	})
	// The same two goroutines, but through Go's netpoller (non-blocking
	// fds, goroutines park instead of blocking their thread): what
	// pkg/ipc would do with os.File/syscall.RawConn.
	b.Run("netpoller-goroutines", func(b *testing.B) {
		fds := seqpacketPair(b)
		mk := func(fd int) (*os.File, syscall.RawConn) {
			unix.SetNonblock(fd, true)
			f := os.NewFile(uintptr(fd), "sp")
			rc, err := f.SyscallConn()
			if err != nil {
				b.Fatal(err)
			}
			return f, rc
		}
		fa, ra := mk(fds[0])
		fb, rb := mk(fds[1])
		rw := func(rc syscall.RawConn, write bool, p []byte) (int, error) {
			var n int
			var err error
			op := rc.Read
			if write {
				op = rc.Write
			}
			if e := op(func(fd uintptr) bool {
				if write {
					n, err = unix.Write(int(fd), p)
				} else {
					n, err = unix.Read(int(fd), p)
				}
				return err != unix.EAGAIN
			}); e != nil {
				return 0, e
			}
			return n, err
		}
		go func() {
			buf := make([]byte, 70000)
			for {
				n, err := rw(rb, false, buf)
				if err != nil || n == 0 {
					return
				}
				if _, err := rw(rb, true, buf[:n]); err != nil {
					return
				}
			}
		}()
		buf := make([]byte, 70000)
		b.SetBytes(int64(len(msg100)))
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := rw(ra, true, msg100); err != nil {
				b.Fatal(err)
			}
			if _, err := rw(ra, false, buf); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		fa.Close()
		fb.Close()
	})
	b.Run("processes", func(b *testing.B) {
		fds := seqpacketPair(b)
		child := os.NewFile(uintptr(fds[1]), "echo")
		cmd := exec.Command("/proc/self/exe")
		cmd.Env = append(os.Environ(), benchEchoEnv+"=1")
		cmd.ExtraFiles = []*os.File{child}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		child.Close()
		roundTrips(b, fds[0])
		unix.Shutdown(fds[0], unix.SHUT_RDWR)
		unix.Close(fds[0])
		cmd.Wait()
	})
}

// BenchmarkIPCPeerCall is pkg/ipc alone: two Peers over a socketpair in
// this process, one Call answered by an echo handler. It is hostCall minus
// the sandbox and the hostCall server's own work.
func BenchmarkIPCPeerCall(b *testing.B) {
	a, c, err := ipc.Socketpair()
	if err != nil {
		b.Fatal(err)
	}
	ca, err := ipc.NewConn(a)
	if err != nil {
		b.Fatal(err)
	}
	cc, err := ipc.NewConn(c)
	if err != nil {
		b.Fatal(err)
	}
	server := ipc.NewPeer(cc, ipc.Options{})
	server.Handle(ipc.TypeHostCall, func(ctx context.Context, req *ipc.Request) (any, error) {
		return req.Payload, nil
	})
	client := ipc.NewPeer(ca, ipc.Options{})
	go server.Serve()
	go client.Serve()
	defer client.Close()
	defer server.Close()
	payload := map[string]any{"api": "bench", "method": "echo", "args": "0123456789abcdefghij"}
	b.Run("sequential", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := client.Call(context.Background(), ipc.TypeHostCall, payload, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := client.Call(context.Background(), ipc.TypeHostCall, payload, nil); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// ---------------------------------------------------------------- hostCall

// hostCallSession starts a session that allows bench.echo, served by an
// echo handler on this (host) side.
func hostCallSession(tb testing.TB, opts ...sandbox.Option) *sandbox.Session {
	h := sandbox.NewHandlers()
	if err := h.Handle("bench", "echo", func(ctx context.Context, c sandbox.HostCall) (ipc.Value, error) {
		return c.Args, nil
	}); err != nil {
		tb.Fatal(err)
	}
	p := policy()
	p.HostAPIs = []string{"bench.echo"}
	return startSession(tb, p, append(opts, sandbox.WithHandlers(h))...)
}

type clientResult struct {
	calls   int
	elapsed time.Duration
	busy    int // "busy" error replies (in-flight bound hit), resent
}

// runClient runs this binary inside the sandbox (it is visible there at
// sandbox.SelfPath when host APIs are allowed) as the hostCall client.
func runClient(tb testing.TB, s *sandbox.Session, mode string, n, conc int) clientResult {
	res, err := s.Exec(context.Background(), sandbox.Command{
		Argv: []string{sandbox.SelfPath, "-test.run=^$"},
		Env:  []string{benchClientEnv + "=" + mode, "NSBOX_BENCH_N=" + strconv.Itoa(n), "NSBOX_BENCH_CONC=" + strconv.Itoa(conc)},
	})
	if err != nil || res.ExitCode != 0 {
		tb.Fatalf("client %s: %v exit %d: %s %s", mode, err, res.ExitCode, res.Stdout, res.Stderr)
	}
	var r clientResult
	var ns int64
	if _, err := fmt.Sscanf(strings.TrimSpace(string(res.Stdout)), "calls=%d ns=%d busy=%d", &r.calls, &ns, &r.busy); err != nil {
		tb.Fatalf("client output %q: %v", res.Stdout, err)
	}
	r.elapsed = time.Duration(ns)
	return r
}

// BenchmarkHostCall is a program inside the sandbox calling a host handler
// (bench.echo) through its inherited NSBOX_HOSTCALL_FD. The client speaks
// the wire protocol directly (raw: one sendmsg and one recvmsg per call, as
// a C or Python client would) or through pkg/ipc's Peer (as `nsbox call`).
// ns/op includes starting the client once per b.N loop; "µs/call" and
// "calls/s" are timed by the client around its calls only.
// Targets: ≤ 2× BenchmarkSeqpacketRoundTrip, ≥ 40,000 sequential calls/s,
// ≥ 80,000 calls/s concurrent.
func BenchmarkHostCall(b *testing.B) {
	s := hostCallSession(b)
	defer s.Close()
	for _, c := range []struct {
		name, mode string
		conc       int
	}{
		{"raw-sequential", "raw", 1},
		{"raw-window-8", "raw", 8},
		{"raw-window-32", "raw", 32},
		{"peer-sequential", "peer", 1},
		{"peer-goroutines-8", "peer", 8},
		{"peer-goroutines-32", "peer", 32},
	} {
		b.Run(c.name, func(b *testing.B) {
			n := b.N
			if n < 100 {
				n = 100
			}
			r := runClient(b, s, c.mode, n, c.conc)
			reportCalls(b, r)
		})
	}
	// A hostCall and a raw round trip of the same ~100 bytes between the
	// same two processes (the client in the sandbox, an echo process on
	// the host), alternated call by call so that load hits both alike:
	// the ratio of the medians is the "≤ 2× raw" target.
	b.Run("raw-vs-seqpacket-interleaved", func(b *testing.B) {
		n := b.N
		if n < 100 {
			n = 100
		}
		fds := seqpacketPair(b)
		mine := os.NewFile(uintptr(fds[0]), "client")
		echo := os.NewFile(uintptr(fds[1]), "echo")
		cmd := exec.Command("/proc/self/exe")
		cmd.Env = append(os.Environ(), benchEchoEnv+"=1")
		cmd.ExtraFiles = []*os.File{echo}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		echo.Close()
		res, err := s.Exec(context.Background(), sandbox.Command{
			Argv:  []string{sandbox.SelfPath, "-test.run=^$"},
			Env:   []string{benchClientEnv + "=interleaved", "NSBOX_BENCH_N=" + strconv.Itoa(n)},
			Stdin: mine,
		})
		mine.Close()
		cmd.Wait()
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("client: %v exit %d: %s %s", err, res.ExitCode, res.Stdout, res.Stderr)
		}
		var calls int
		var hcNs, spNs int64
		if _, err := fmt.Sscanf(strings.TrimSpace(string(res.Stdout)), "calls=%d hostcall_ns=%d seqpacket_ns=%d", &calls, &hcNs, &spNs); err != nil {
			b.Fatalf("client output %q: %v", res.Stdout, err)
		}
		b.ReportMetric(float64(hcNs)/1e3, "hostcall-median-µs")
		b.ReportMetric(float64(spNs)/1e3, "seqpacket-median-µs")
		b.ReportMetric(float64(hcNs)/float64(spNs), "ratio")
	})
	// The same calls with an audit log (one JSON line per call, secrets
	// redacted), written to io.Discard.
	b.Run("raw-sequential-audit", func(b *testing.B) {
		sa := hostCallSession(b, sandbox.WithAudit(io.Discard))
		defer sa.Close()
		n := b.N
		if n < 100 {
			n = 100
		}
		reportCalls(b, runClient(b, sa, "raw", n, 1))
	})
}

func reportCalls(b *testing.B, r clientResult) {
	b.ReportMetric(float64(r.elapsed.Nanoseconds())/float64(r.calls)/1e3, "µs/call")
	b.ReportMetric(float64(r.calls)/r.elapsed.Seconds(), "calls/s")
	if r.busy > 0 {
		b.ReportMetric(float64(r.busy), "busy-replies")
	}
}

// clientMain is the hostCall client inside the sandbox. It prints
// "calls=N ns=T" on stdout.
func clientMain(mode string) int {
	fd, err := strconv.Atoi(os.Getenv("NSBOX_HOSTCALL_FD"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "no NSBOX_HOSTCALL_FD")
		return 2
	}
	n, _ := strconv.Atoi(os.Getenv("NSBOX_BENCH_N"))
	conc, _ := strconv.Atoi(os.Getenv("NSBOX_BENCH_CONC"))
	if n <= 0 {
		n = 10000
	}
	if conc <= 0 {
		conc = 1
	}
	var d time.Duration
	busy := 0
	switch mode {
	case "interleaved":
		return interleavedClient(fd, n)
	case "raw":
		d, busy, err = rawClient(fd, n, conc)
	case "peer":
		d, err = peerClient(fd, n, conc)
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 1
	}
	fmt.Printf("calls=%d ns=%d busy=%d\n", n, d.Nanoseconds(), busy)
	return 0
}

// interleavedClient alternates one raw hostCall (on fd) with one raw
// seqpacket round trip of msg100 to an echo process on the host (on its
// stdin), n of each, and prints the median of each.
func interleavedClient(fd, n int) int {
	unix.SetNonblock(fd, false)
	buf := make([]byte, 70000)
	hc := make([]time.Duration, 0, n)
	sp := make([]time.Duration, 0, n)
	okMark := []byte(`"ok":true`)
	for i := 1; i <= n; i++ {
		req := rawRequest(i)
		t0 := time.Now()
		if _, err := unix.Write(fd, req); err != nil {
			fmt.Fprintln(os.Stderr, "client:", err)
			return 1
		}
		m, err := unix.Read(fd, buf)
		t1 := time.Now()
		if err != nil || !bytes.Contains(buf[:m], okMark) {
			fmt.Fprintf(os.Stderr, "client: call %d: %v %s\n", i, err, buf[:max(m, 0)])
			return 1
		}
		if _, err := unix.Write(0, msg100); err != nil {
			fmt.Fprintln(os.Stderr, "client: echo:", err)
			return 1
		}
		if _, err := unix.Read(0, buf); err != nil {
			fmt.Fprintln(os.Stderr, "client: echo:", err)
			return 1
		}
		t2 := time.Now()
		hc = append(hc, t1.Sub(t0))
		sp = append(sp, t2.Sub(t1))
	}
	fmt.Printf("calls=%d hostcall_ns=%d seqpacket_ns=%d\n", n, median(hc).Nanoseconds(), median(sp).Nanoseconds())
	return 0
}

func rawRequest(id int) []byte {
	return []byte(`{"type":"hostCall","id":` + strconv.Itoa(id) + `,"payload":{"api":"bench","method":"echo","args":"0123456789abcdefghij"}}`)
}

// rawClient keeps `window` calls in flight (1: strictly sequential) on one
// blocking fd, with plain write/read syscalls. A "busy" error reply (the
// host's in-flight bound) is counted and the call is sent again.
func rawClient(fd, n, window int) (time.Duration, int, error) {
	unix.SetNonblock(fd, false)
	buf := make([]byte, 70000)
	okMark := []byte(`"ok":true`)
	busyMark := []byte(`"code":"busy"`)
	sent, got, busy := 0, 0, 0
	send := func() error {
		sent++
		_, err := unix.Write(fd, rawRequest(sent))
		return err
	}
	t0 := time.Now()
	for sent < window && sent < n {
		if err := send(); err != nil {
			return 0, busy, err
		}
	}
	for got < n {
		m, err := unix.Read(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, busy, err
		}
		if m == 0 {
			return 0, busy, fmt.Errorf("host hung up after %d calls", got)
		}
		if bytes.Contains(buf[:m], busyMark) {
			busy++
			if _, err := unix.Write(fd, rawRequest(sent+1000000+busy)); err != nil {
				return 0, busy, err
			}
			continue
		}
		if !bytes.Contains(buf[:m], okMark) {
			return 0, busy, fmt.Errorf("call failed: %s", buf[:m])
		}
		got++
		if sent < n {
			if err := send(); err != nil {
				return 0, busy, err
			}
		}
	}
	return time.Since(t0), busy, nil
}

// peerClient makes the calls through pkg/ipc (what `nsbox call` uses), from
// conc goroutines.
func peerClient(fd, n, conc int) (time.Duration, error) {
	conn, err := ipc.NewConn(os.NewFile(uintptr(fd), "hostcall"))
	if err != nil {
		return 0, err
	}
	peer := ipc.NewPeer(conn, ipc.Options{})
	go peer.Serve()
	defer peer.Close()
	args := map[string]any{"api": "bench", "method": "echo", "args": "0123456789abcdefghij"}
	var wg sync.WaitGroup
	errs := make(chan error, conc)
	per := n / conc
	t0 := time.Now()
	for g := 0; g < conc; g++ {
		k := per
		if g == 0 {
			k += n % conc
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < k; i++ {
				rep, err := peer.Call(context.Background(), ipc.TypeHostCall, args, nil)
				if err != nil {
					errs <- err
					return
				}
				if !bytes.Contains(rep.Payload, []byte(`"ok":true`)) {
					errs <- fmt.Errorf("call failed: %s", rep.Payload)
					return
				}
			}
		}()
	}
	wg.Wait()
	d := time.Since(t0)
	select {
	case err := <-errs:
		return 0, err
	default:
	}
	return d, nil
}

// BenchmarkPoolExec compares Pool.Exec of /bin/true (a fresh sandbox per
// call, taken from a pool of ready ones) with a bare fork+exec+wait on the
// host, interleaved in one loop. Target: ratio ≤ 1.5×. Between two calls
// the loop waits for the pool to be full again, so that what is measured
// is a call on a ready pool, not the refill (which runs in the background
// while a caller does its own work).
func BenchmarkPoolExec(b *testing.B) {
	p, err := sandbox.NewPool(policy(), 2)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	full := func() {
		for p.Stats().Ready < 2 {
			if err := p.Stats().LastError; err != nil {
				b.Fatal(err)
			}
			time.Sleep(time.Millisecond)
		}
	}
	bare := make([]time.Duration, 0, b.N)
	pool := make([]time.Duration, 0, b.N)
	c := sandbox.Command{Argv: []string{"/bin/true"}, Stdin: devnull, Stdout: devnull, Stderr: devnull}
	for i := 0; i < b.N; i++ {
		full()
		t0 := time.Now()
		bareTrue(b)
		t1 := time.Now()
		res, err := p.Exec(context.Background(), c)
		pool = append(pool, time.Since(t1))
		bare = append(bare, t1.Sub(t0))
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("Pool.Exec: %v %+v", err, res)
		}
	}
	mb, mp := median(bare), median(pool)
	b.ReportMetric(float64(mb.Nanoseconds())/1e3, "bare-median-µs")
	b.ReportMetric(float64(mp.Nanoseconds())/1e3, "pool-median-µs")
	b.ReportMetric(float64(mp)/float64(mb), "ratio")
}

// BenchmarkPoolIdlePSS reports the proportional set size of one idle pooled
// session (its worker, PID 1 of the sandbox), from the kernel's
// /proc/PID/smaps_rollup, for a pool of 8. Target: ≤ 1.5 MiB each. PSS
// shares the binary's pages among the workers that map them, so it is the
// figure that adds up to what N idle sessions cost the host.
func BenchmarkPoolIdlePSS(b *testing.B) {
	const size = 8
	for i := 0; i < b.N; i++ {
		p, err := sandbox.NewPool(policy(), size)
		if err != nil {
			b.Fatal(err)
		}
		for p.Stats().Ready < size {
			if err := p.Stats().LastError; err != nil {
				b.Fatal(err)
			}
			time.Sleep(time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond) // let the idle workers settle
		var total, n int64
		ents, _ := os.ReadDir("/proc")
		self := strconv.Itoa(os.Getpid())
		for _, e := range ents {
			st, err := os.ReadFile("/proc/" + e.Name() + "/status")
			if err != nil || !strings.Contains(string(st), "\nPPid:\t"+self+"\n") {
				continue
			}
			sm, err := os.ReadFile("/proc/" + e.Name() + "/smaps_rollup")
			if err != nil {
				continue
			}
			for _, l := range strings.Split(string(sm), "\n") {
				if f := strings.Fields(l); len(f) >= 2 && f[0] == "Pss:" {
					kb, _ := strconv.ParseInt(f[1], 10, 64)
					total += kb
					n++
				}
			}
		}
		p.Close()
		if n != size {
			b.Fatalf("found %d idle workers, want %d", n, size)
		}
		b.ReportMetric(float64(total)/float64(n)/1024, "MiB-PSS/session")
	}
}
