package notify

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// benchChild connects n times to path and prints the mean time of one
// socket+connect+close in nanoseconds, and the median (p50: on a shared
// machine the mean moves with whatever else runs, the median far less).
// It runs as the child of BenchmarkConnect, under the filter or not.
func benchChild(path string, n int) {
	lat := make([]time.Duration, n)
	start := time.Now()
	for i := 0; i < n; i++ {
		t := time.Now()
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			fmt.Println("error", err)
			return
		}
		if err := unix.Connect(fd, &unix.SockaddrUnix{Name: path}); err != nil {
			fmt.Println("error", err)
			return
		}
		unix.Close(fd)
		lat[i] = time.Since(t)
	}
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru)
	fmt.Println("ns", time.Since(start).Nanoseconds()/int64(n))
	fmt.Println("cpu", (ru.Utime.Nano()+ru.Stime.Nano())/int64(n))
	slices.Sort(lat)
	fmt.Println("p50", lat[n/2].Nanoseconds())
}

func init() {
	if os.Getenv(childEnv) == "bench-plain" {
		// Without the filter: the baseline.
		args := strings.Fields(os.Getenv("NSBOX_NOTIFY_TEST_ARGS"))
		n, _ := strconv.Atoi(args[1])
		benchChild(args[0], n)
		os.Exit(0)
	}
}

// BenchmarkConnect measures a connect to an allowed path socket (one in a
// writable place) made through the gate, against a plain connect: the
// figure docs/benchmarks.md reports. ns/connect is the child's own mean.
func BenchmarkConnect(b *testing.B) {
	if err := Supported(); err != nil {
		b.Skip(err)
	}
	dir, err := os.MkdirTemp("/dev/shm", "nsbox-notify-bench-")
	if err != nil {
		b.Skip(err)
	}
	defer os.RemoveAll(dir)
	p := filepath.Join(dir, "s.sock")
	l, err := net.Listen("unix", p)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	os.Chmod(dir, 0o755)
	os.Chmod(p, 0o777) // the nobody rows' target may write it
	modes := []string{"plain", "gate"}
	if os.Geteuid() == 0 {
		// A root supervisor makes the call on a thread holding the
		// target's ids (Options.AsTarget), as a root session does: for
		// a target of host uid 0 (a single-id sandbox) and for one of
		// uid 65534 (as a root session's range ids). Its serving thread
		// keeps the ids between calls, as in a namespace sandbox
		// (Options.OwnPIDNamespace), or switches per call (-percall: a
		// Landlock sandbox, and every root session before).
		modes = append(modes, "gate-as-target", "gate-as-target-percall", "gate-as-target-nobody", "gate-as-target-nobody-percall")
	}
	for _, mode := range modes {
		b.Run(mode, func(b *testing.B) {
			n := max(b.N, 1)
			var ns string
			var before, after unix.Rusage
			unix.Getrusage(unix.RUSAGE_SELF, &before)
			if mode == "plain" {
				cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
				cmd.Env = append(os.Environ(), childEnv+"=bench-plain", "NSBOX_NOTIFY_TEST_ARGS="+p+" "+strconv.Itoa(n))
				cmd.SysProcAttr = benchAttr()
				out, err := cmd.Output()
				if err != nil {
					b.Fatal(err)
				}
				ns = strconv.FormatFloat(field(string(out), "ns"), 'f', -1, 64)
				b.ReportMetric(field(string(out), "cpu"), "child-cpu-ns/connect")
				b.ReportMetric(field(string(out), "p50"), "p50-ns/connect")
			} else {
				o, attr := Options{}, benchAttr()
				if strings.HasPrefix(mode, "gate-as-target") {
					o.AsTarget = true
					o.OwnPIDNamespace = !strings.HasSuffix(mode, "-percall")
				}
				if strings.HasPrefix(mode, "gate-as-target-nobody") {
					attr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}}
				}
				res, lines := runChildB(b, "bench", []string{p, strconv.Itoa(n)}, GateConfig{Writable: []string{dir}}, o, attr)
				ns = res["ns"]
				if res["ns"] == "" {
					b.Fatal(lines)
				}
				c, _ := strconv.ParseFloat(res["cpu"], 64)
				b.ReportMetric(c, "child-cpu-ns/connect")
				p50, _ := strconv.ParseFloat(res["p50"], 64)
				b.ReportMetric(p50, "p50-ns/connect")
			}
			unix.Getrusage(unix.RUSAGE_SELF, &after)
			// The test process's CPU: the listener's accepts in both
			// modes, and the gate's work in the second.
			sup := (after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano()) / int64(n)
			b.ReportMetric(float64(sup), "server-cpu-ns/connect")
			v, err := strconv.ParseFloat(ns, 64)
			if err != nil {
				b.Fatalf("child: %q", ns)
			}
			b.ReportMetric(v, "ns/connect")
		})
	}
}

// benchAttr puts the child in a user namespace that maps one id, the
// caller's, as a sandbox does: the gate's permission check then takes the
// path a sandbox's connects take.
func benchAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: os.Geteuid(), HostID: os.Geteuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: os.Getegid(), HostID: os.Getegid(), Size: 1}},
	}
}

// field is the number on the line of out that begins with key.
func field(out, key string) float64 {
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, key+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// runChildB is runChild for a benchmark.
func runChildB(b *testing.B, mode string, args []string, cfg GateConfig, o Options, attr *syscall.SysProcAttr) (map[string]string, []string) {
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode, "NSBOX_NOTIFY_TEST_ARGS="+strings.Join(args, " "))
	cmd.SysProcAttr = attr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer cmd.Wait()
	out := bufio.NewScanner(stdout)
	if !out.Scan() {
		b.Fatal("child said nothing")
	}
	var n int
	fmt.Sscanf(out.Text(), "fd %d", &n)
	pidfd, _ := unix.PidfdOpen(cmd.Process.Pid, 0)
	listener, err := unix.PidfdGetfd(pidfd, n, 0)
	unix.Close(pidfd)
	if err != nil {
		cmd.Process.Kill()
		b.Fatal(err)
	}
	cfg.RootPid = cmd.Process.Pid
	gate, err := NewUnixGate(cfg)
	if err != nil {
		b.Fatal(err)
	}
	o.Unix = gate
	srv, _ := NewServer(listener, o)
	go srv.Serve()
	defer srv.Close()
	stdin.Write([]byte("go\n"))
	res := map[string]string{}
	var lines []string
	for out.Scan() {
		lines = append(lines, out.Text())
		k, v, _ := strings.Cut(out.Text(), " ")
		res[k] = v
	}
	return res, lines
}

// BenchmarkGateSetup is what a session's start adds in the supervisor:
// the writable places' mount ids and the uid map, read once.
func BenchmarkGateSetup(b *testing.B) {
	wd, _ := os.Getwd()
	for i := 0; i < b.N; i++ {
		if _, err := NewUnixGate(GateConfig{RootPid: os.Getpid(), Writable: []string{"/tmp", "/run", "/dev/shm", wd}}); err != nil {
			b.Fatal(err)
		}
	}
}
