package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

// BenchmarkNetCompare puts the filtered network beside --net host and the
// two user-mode networks root-less containers use, slirp4netns and pasta
// (passt), in one run (make bench runs it):
//
//	go test -tags seccomp -run '^$' -bench NetCompare -benchtime 1x ./bench/
//
// The workload is BenchmarkNetBulk's and BenchmarkNetConnect's: curl
// downloads 256 MiB from a server on the host's 127.0.0.1, and python
// times 500 connect+close to another one. The variants run interleaved
// (a b c … a b c …), so the load of a shared machine falls on all alike:
//
//   - host process: the command run directly on the host, no sandbox;
//   - net=host,no-trap: an nsbox session with --net host and no seccomp
//     trap on connect: the kernel's own path, the base of the ratios;
//   - net=host: `nsbox run --net host` as shipped (the unix socket gate
//     traps connect);
//   - net=filtered: `--allow-host bench.test:PORT --add-host
//     bench.test:127.0.0.1`;
//   - slirp4netns, pasta: the command in a network namespace this
//     benchmark creates, connected by the tool through a TAP device; both
//     dial 10.0.2.2, which each maps to the host's 127.0.0.1.
//
// slirp4netns and pasta open /dev/net/tun, mode 0600 here, so those two
// rows need root; each is skipped with its reason when it cannot run.
// Every byte stays on the host's loopback or in the namespace created here.
func BenchmarkNetCompare(b *testing.B) {
	for _, tool := range []string{"curl", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			b.Skipf("%s is not installed", tool)
		}
	}
	const size = 256 << 20
	bulkPort := zeroServer(b, size)
	connPort := closeServer(b)

	// Everything started here is stopped (and reaped, so that its CPU
	// time counts as this run's) before the load share is computed.
	var cleanups []func()
	stop := func() {
		for _, c := range cleanups {
			c()
		}
		cleanups = nil
	}
	defer stop()
	vs := []netVariant{{name: "host process", host: "127.0.0.1", run: hostRun}}
	// The nsbox sessions: the filter allows both servers' ports.
	for _, c := range netPolicies(bulkPort) {
		if c.p.NetFilter != nil {
			c.p.NetFilter.Allow = append(c.p.NetFilter.Allow, "bench.test:"+strconv.Itoa(connPort))
		}
		s := startSession(b, c.p)
		cleanups = append(cleanups, func() { s.Close() })
		vs = append(vs, netVariant{name: c.name, host: c.host, run: sessionRun(s)})
	}
	var skipped []string
	for _, tool := range []string{"slirp4netns", "pasta"} {
		v, cleanup, err := userNetVariant(tool, connPort)
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("SKIP %s: %v", tool, err))
			continue
		}
		cleanups = append(cleanups, cleanup)
		vs = append(vs, v)
	}
	load0, cpu0 := loadAvg(), readCPU()
	names := make([]string, len(vs))
	for i, v := range vs {
		names[i] = v.name
	}

	b.ResetTimer()
	bulk := netRounds(b, max(b.N, 15), names, func(v int) time.Duration {
		url := fmt.Sprintf("http://%s:%d/", vs[v].host, bulkPort)
		t0 := time.Now()
		if _, err := vs[v].run([]string{"curl", "-sS", "-o", "/dev/null", url}); err != nil {
			b.Fatalf("%s: bulk: %v", vs[v].name, err)
		}
		return time.Since(t0)
	})
	const n = 500
	conn := netRounds(b, max(b.N, 15), names, func(v int) time.Duration {
		out, err := vs[v].run([]string{"python3", "-c", connectPy, vs[v].host, strconv.Itoa(connPort), strconv.Itoa(n)})
		if err != nil {
			b.Fatalf("%s: connect: %v", vs[v].name, err)
		}
		ns, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
		if err != nil {
			b.Fatalf("%s: connect: %q: %v", vs[v].name, out, err)
		}
		return time.Duration(ns)
	})
	b.StopTimer()
	stop()
	cpu1 := readCPU()

	const base = "net=host,no-trap"
	mbs := func(name string) float64 { return float64(size) / median(bulk[name]).Seconds() / 1e6 }
	us := func(name string) float64 { return float64(median(conn[name]).Nanoseconds()) / 1000 }
	// The ratio and the µs added are the medians of each round's against
	// the base's in the same round (run next to it), which a drift of the
	// machine's speed between rounds does not move.
	ratio := func(name string) float64 {
		r := make([]float64, len(bulk[name]))
		for i, d := range bulk[name] {
			r[i] = bulk[base][i].Seconds() / d.Seconds()
		}
		return medianFloat(r)
	}
	added := func(name string) float64 {
		r := make([]float64, len(conn[name]))
		for i, d := range conn[name] {
			r[i] = float64((d - conn[base][i]).Nanoseconds()) / 1000
		}
		return medianFloat(r)
	}
	fmt.Printf("\n### network: bulk throughput and connect latency, one interleaved run\n\n")
	fmt.Printf("bulk: curl downloads %d MiB from the host's loopback, %d rounds; connect: python, socket+connect+close, %d rounds of %d; "+
		"MB/s and µs are medians of the rounds, the ratio and the µs added medians of each round against %s's in the same round\n\n",
		size>>20, len(bulk[base]), len(conn[base]), n, base)
	fmt.Println("| network | bulk MB/s | × " + base + " | connect µs | µs added |")
	fmt.Println("|---|---:|---:|---:|---:|")
	for _, v := range vs {
		fmt.Printf("| %s | %.0f | %.2f× | %.1f | %+.1f |\n", v.name, mbs(v.name), ratio(v.name), us(v.name), added(v.name))
		b.ReportMetric(mbs(v.name), strings.ReplaceAll(v.name, " ", "-")+"-MB/s")
		b.ReportMetric(us(v.name), strings.ReplaceAll(v.name, " ", "-")+"-connect-µs")
	}
	fmt.Println()
	for _, v := range vs {
		if v.note != "" {
			fmt.Printf("- %s: %s\n", v.name, v.note)
		}
	}
	for _, s := range skipped {
		fmt.Println(s)
	}
	other, busy := otherLoad(cpu0, cpu1)
	fmt.Printf("- load average before: %s, after: %s; CPUs busy %.0f %% of the time, %.0f %% with other work than this benchmark and its children\n",
		load0, loadAvg(), 100*busy, 100*other)
}

func medianFloat(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	s := append([]float64(nil), x...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// cpuSample is the host's CPU counters and this process's CPU time with
// its reaped children's (the sessions, the tools, every command run).
type cpuSample struct {
	busy, total uint64 // jiffies of all CPUs (/proc/stat)
	own         time.Duration
}

func readCPU() cpuSample {
	var self, children syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	s := cpuSample{own: time.Duration(self.Utime.Nano() + self.Stime.Nano() + children.Utime.Nano() + children.Stime.Nano())}
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return s
	}
	line, _, _ := strings.Cut(string(b), "\n")
	for i, v := range strings.Fields(line)[1:] {
		n, _ := strconv.ParseUint(v, 10, 64)
		s.total += n
		if i != 3 && i != 4 { // idle, iowait
			s.busy += n
		}
	}
	return s
}

// otherLoad is the share of all CPUs busy with something else than this
// process and its children between a and b, and the share busy at all
// (USER_HZ is 100).
func otherLoad(a, b cpuSample) (other, busy float64) {
	if b.total <= a.total {
		return 0, 0
	}
	all := time.Duration(b.busy-a.busy) * time.Second / 100
	total := time.Duration(b.total-a.total) * time.Second / 100
	return float64(max(all-(b.own-a.own), 0)) / float64(total), float64(all) / float64(total)
}

// netVariant is one network under test: run executes argv on it and
// returns its stdout; host is the address that reaches the host's
// 127.0.0.1 from there.
type netVariant struct {
	name, host, note string
	run              func(argv []string) ([]byte, error)
}

func hostRun(argv []string) ([]byte, error) {
	return commandOutput(exec.Command(argv[0], argv[1:]...))
}

func sessionRun(s *sandbox.Session) func([]string) ([]byte, error) {
	return func(argv []string) ([]byte, error) {
		res, err := s.Exec(context.Background(), sandbox.Command{Argv: argv})
		if err != nil {
			return nil, err
		}
		if res.ExitCode != 0 {
			return nil, fmt.Errorf("exit status %d: %s", res.ExitCode, bytes.TrimSpace(res.Stderr))
		}
		return res.Stdout, nil
	}
}

func commandOutput(c *exec.Cmd) ([]byte, error) {
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		return nil, fmt.Errorf("%v: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	return out, nil
}

// closeServer accepts connections on the host's loopback and closes them.
func closeServer(tb testing.TB) int {
	tb.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// userNetGateway is the address both slirp4netns (its default) and pasta
// (told so below) give the namespace's gateway, which each maps to the
// host's loopback.
const userNetGateway = "10.0.2.2"

// userNetVariant creates a network namespace, connects it with tool
// (slirp4netns or pasta) and waits until a connect from inside reaches the
// server on the host's 127.0.0.1:probePort. It returns an error saying why
// when the tool cannot run here, and a cleanup that stops the tool and
// the namespace.
func userNetVariant(tool string, probePort int) (netVariant, func(), error) {
	v := netVariant{name: tool, host: userNetGateway}
	for _, t := range []string{tool, "unshare", "nsenter", "setpriv"} {
		if _, err := exec.LookPath(t); err != nil {
			return v, nil, fmt.Errorf("%s is not installed (hack/install-deps.sh)", t)
		}
	}
	// Both open /dev/net/tun in the namespace; here it is mode 0600.
	tun, err := os.OpenFile("/dev/net/tun", os.O_RDWR, 0)
	if err != nil {
		return v, nil, fmt.Errorf("needs the TAP device: %v (run as root)", err)
	}
	tun.Close()

	// The namespace is held by a process that drops every capability
	// first: pasta, though root, keeps only a few capabilities, and the
	// kernel lets it open /proc/PID/ns/net only of a process whose
	// capabilities are a subset of its own. It exits when its stdin
	// closes, so it cannot outlive this benchmark.
	holder := exec.Command("unshare", "--net", "--", "setpriv", "--bounding-set=-all", "--inh-caps=-all", "--",
		"sh", "-c", "echo ready; exec cat >/dev/null")
	stdin, err := holder.StdinPipe()
	if err != nil {
		return v, nil, err
	}
	stdout, err := holder.StdoutPipe()
	if err != nil {
		return v, nil, err
	}
	var holderErr bytes.Buffer
	holder.Stderr = &holderErr
	if err := holder.Start(); err != nil {
		return v, nil, err
	}
	stopHolder := func() { stdin.Close(); holder.Wait() }
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); line != "ready\n" {
		stopHolder()
		return v, nil, fmt.Errorf("cannot create a network namespace: %s", bytes.TrimSpace(holderErr.Bytes()))
	}
	pid := strconv.Itoa(holder.Process.Pid)
	netns := "/proc/" + pid + "/ns/net"

	var t *exec.Cmd
	switch tool {
	case "slirp4netns":
		// 10.0.2.2 is the host's loopback unless --disable-host-loopback.
		t = exec.Command("slirp4netns", "--configure", "--mtu=65520", pid, "tap0")
		v.note = "slirp4netns --configure --mtu=65520, as root, namespace made by unshare --net; 10.0.2.2 is the host's 127.0.0.1"
	case "pasta":
		// The gateway address is mapped to the host's loopback (no
		// --no-map-gw); no port forwarding, so that pasta does not scan
		// the bound ports. --runas 0:0: pasta's default drop to nobody
		// would leave it unable to open a root process's namespace.
		t = exec.Command("pasta", "--foreground", "--quiet", "--runas", "0:0", "--config-net",
			"--address", "10.0.2.100", "--netmask", "24", "--gateway", userNetGateway,
			"--tcp-ports", "none", "--udp-ports", "none", "--tcp-ns", "none", "--udp-ns", "none", "--netns", netns)
		v.note = "pasta --config-net (MTU 65520), as root, namespace made by unshare --net; the gateway 10.0.2.2 is the host's 127.0.0.1"
	default:
		stopHolder()
		return v, nil, fmt.Errorf("unknown tool")
	}
	var toolErr bytes.Buffer
	t.Stdout, t.Stderr = &toolErr, &toolErr
	if err := t.Start(); err != nil {
		stopHolder()
		return v, nil, err
	}
	exited := make(chan struct{})
	go func() { t.Wait(); close(exited) }()
	cleanup := func() {
		t.Process.Kill()
		<-exited
		stopHolder()
	}
	v.run = func(argv []string) ([]byte, error) {
		return commandOutput(exec.Command("nsenter", append([]string{"--net=" + netns, "--"}, argv...)...))
	}

	// Ready when a connect from inside reaches the host's server.
	probe := []string{"python3", "-c", "import socket, sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), 1).close()", userNetGateway, strconv.Itoa(probePort)}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := v.run(probe)
		if err == nil {
			return v, cleanup, nil
		}
		select {
		case <-exited:
			cleanup()
			return v, nil, fmt.Errorf("%s exited: %s", tool, lastLine(toolErr.String()))
		default:
		}
		if time.Now().After(deadline) {
			cleanup()
			return v, nil, fmt.Errorf("no connection through %s to the host's loopback after 10 s: %v; %s", tool, err, lastLine(toolErr.String()))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// lastLine is the last non-empty line of a tool's output, without the
// noise of pasta's failing syslog writes.
func lastLine(s string) string {
	var last string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "Failed to send") {
			last = l
		}
	}
	return last
}
