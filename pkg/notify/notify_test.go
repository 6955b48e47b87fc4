package notify

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The tests run a child (this test binary, re-executed) under the
// notification filter, as the worker does, and serve it from the test
// process, as the supervisor does: the listener is taken with
// pidfd_getfd, never sent over a socket (the child's sendmsg would wait
// for the very supervisor that does not have the listener yet).

const childEnv = "NSBOX_NOTIFY_TEST_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(child(mode))
	}
	// The main thread runs nothing but this goroutine: a Server's
	// thread is never the main one, which keeps no target's ids
	// (newServingThread), so the tests see every serving thread alike.
	runtime.LockOSThread()
	os.Exit(m.Run())
}

// child installs the filter, prints the listener's number, waits for "go"
// and runs the scenario named by mode, printing one result line per step.
func child(mode string) int {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fmt.Println("error", err)
		return 1
	}
	var fd int
	var err error
	if os.Getenv(metaEnv) != "" {
		fd, err = installMetaFilter() // meta_test.go
	} else {
		fd, err = Install(ProgramOptions{Filtered: os.Getenv("NSBOX_NOTIFY_TEST_FILTERED") != ""})
	}
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Printf("fd %d\n", fd)
	in := bufio.NewReader(os.Stdin)
	if line, _ := in.ReadString('\n'); line != "go\n" {
		return 1
	}
	unix.Close(fd) // the supervisor holds it now
	args := strings.Fields(os.Getenv("NSBOX_NOTIFY_TEST_ARGS"))
	switch mode {
	case "later":
		// A connect once told to ("now"): the test changes the host
		// between the gate's start and the connect.
		if line, _ := in.ReadString('\n'); line != "now\n" {
			return 1
		}
		fmt.Println("connect", connectResult(args[0]))
	case "connect":
		for _, p := range args {
			fmt.Println(p, connectResult(p))
		}
	case "nested":
		return nestedChild()
	case "shutdown":
		// shutdown(2) of an unconnected TCP socket (ENOTCONN), then of
		// a unix socket connected to args[0]: both made by the
		// supervisor.
		for _, p := range []string{"", args[0]} {
			family := unix.AF_UNIX
			if p == "" {
				family = unix.AF_INET
			}
			fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				fmt.Println("error", err)
				return 1
			}
			what := "unconnected"
			if p != "" {
				what = "connected"
				if err := unix.Connect(fd, &unix.SockaddrUnix{Name: p}); err != nil {
					fmt.Println(what, "connect", errName(err))
					continue
				}
			}
			r := "ok"
			if err := unix.Shutdown(fd, unix.SHUT_WR); err != nil {
				r = errName(err)
			}
			fmt.Println(what, r)
			unix.Close(fd)
		}
	case "groups":
		// One thread connects, drops its groups, connects, takes them
		// back, connects (the supervisor keeps a thread's groups between
		// its calls: creds).
		runtime.LockOSThread()
		fmt.Println("with", connectResult(args[0]))
		if err := syscall.Setgroups(nil); err != nil {
			fmt.Println("error", err)
			return 1
		}
		fmt.Println("without", connectResult(args[0]))
		if err := syscall.Setgroups([]int{4242}); err != nil {
			fmt.Println("error", err)
			return 1
		}
		fmt.Println("again", connectResult(args[0]))
	case "sendto":
		for _, p := range args {
			fmt.Println(p, sendtoResult(p))
		}
	case "race":
		// args: link target-ok target-host; one goroutine flips the
		// link, this one connects through it.
		link, ok, host := args[0], args[1], args[2]
		var stop atomic.Bool
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			tmp := link + ".new"
			for i := 0; !stop.Load(); i++ {
				target := ok
				if i%2 == 1 {
					target = host
				}
				os.Remove(tmp)
				os.Symlink(target, tmp)
				os.Rename(tmp, link)
			}
		}()
		okN := 0
		for i := 0; i < 2000; i++ {
			if connectResult(link) == "ok" {
				okN++
			}
		}
		stop.Store(true)
		wg.Wait()
		fmt.Println("race-ok", okN)
	case "inet":
		// args: refused-addr redirected-addr; prints what each connect
		// gave and what the redirected socket reads.
		for _, a := range args {
			host, port, _ := net.SplitHostPort(a)
			p, _ := strconv.Atoi(port)
			ip := net.ParseIP(host).To4()
			fd, _ := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			sa := &unix.SockaddrInet4{Port: p}
			copy(sa.Addr[:], ip)
			if err := unix.Connect(fd, sa); err != nil {
				fmt.Println(a, errName(err))
				continue
			}
			b := make([]byte, 16)
			n, _ := unix.Read(fd, b)
			fmt.Println(a, "read", string(b[:n]))
		}
	case "blocked":
		// args: marker. A first connect the supervisor holds, then a
		// second one made once the first is held (the marker exists).
		first := make(chan string, 1)
		go func() { first <- inetResult("127.0.0.2:9") }()
		for {
			if _, err := os.Stat(args[0]); err == nil {
				break
			}
			time.Sleep(time.Millisecond)
		}
		fmt.Println("second", inetResult("127.0.0.3:9"))
		fmt.Println("first", <-first)
	case "sendmmsg":
		fmt.Println("sendmmsg", sendmmsgResult(args[0]))
	case "chroot":
		// args: outer jail inner: connect to outer, chroot to jail,
		// then connect to outer and to inner (a path in the jail).
		fmt.Println("before", connectResult(args[0]))
		if err := unix.Chroot(args[1]); err != nil {
			fmt.Println("error", err)
			return 1
		}
		unix.Chdir("/")
		fmt.Println("after", connectResult(args[0]))
		fmt.Println("inner", connectResult(args[2]))
	case "relink":
		// args: link new-target paths...: point link elsewhere, then
		// connect to each path.
		os.Remove(args[0])
		if err := os.Symlink(args[1], args[0]); err != nil {
			fmt.Println("error", err)
			return 1
		}
		for _, p := range args[2:] {
			fmt.Println(p, connectResult(p))
		}
	case "bench":
		n, _ := strconv.Atoi(args[1])
		benchChild(args[0], n)
	case "rights":
		// sendmsg with SCM_RIGHTS over a socketpair: translated fd by fd.
		sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		r, w, _ := os.Pipe()
		w.Write([]byte("through"))
		w.Close()
		err = unix.Sendmsg(sp[0], []byte("hi"), unix.UnixRights(int(r.Fd())), nil, 0)
		buf, oob := make([]byte, 16), make([]byte, 64)
		n, oobn, _, _, rerr := unix.Recvmsg(sp[1], buf, oob, 0)
		res := fmt.Sprintf("send=%v recv=%v data=%q", err, rerr, buf[:n])
		if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil && len(msgs) == 1 {
			if fds, err := unix.ParseUnixRights(&msgs[0]); err == nil && len(fds) == 1 {
				b := make([]byte, 16)
				k, _ := unix.Read(fds[0], b)
				res += fmt.Sprintf(" fd=%q", b[:k])
			}
		}
		fmt.Println("rights", res)
	default:
		if f := childModes[mode]; f != nil {
			return f(args, in)
		}
		fmt.Println("error unknown mode", mode)
		return 1
	}
	return 0
}

// childModes are scenarios other test files add (each run by child, under
// the filter, after "go").
var childModes = map[string]func(args []string, in *bufio.Reader) int{}

func inetResult(a string) string {
	host, port, _ := net.SplitHostPort(a)
	p, _ := strconv.Atoi(port)
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err.Error()
	}
	defer unix.Close(fd)
	sa := &unix.SockaddrInet4{Port: p}
	copy(sa.Addr[:], net.ParseIP(host).To4())
	if err := unix.Connect(fd, sa); err != nil {
		return errName(err)
	}
	return "ok"
}

func connectResult(p string) string {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err.Error()
	}
	defer unix.Close(fd)
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: p}); err != nil {
		return errName(err)
	}
	return "ok"
}

func sendtoResult(p string) string {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err.Error()
	}
	defer unix.Close(fd)
	if err := unix.Sendto(fd, []byte("ping"), 0, &unix.SockaddrUnix{Name: p}); err != nil {
		return errName(err)
	}
	return "ok"
}

// sendmmsgResult sends two datagrams of 3 and 5 bytes to p with one
// sendmmsg and reports the count and each msg_len the kernel (here: the
// supervisor) wrote back.
func sendmmsgResult(p string) string {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err.Error()
	}
	defer unix.Close(fd)
	var sa unix.RawSockaddrUnix
	sa.Family = unix.AF_UNIX
	for i := 0; i < len(p); i++ {
		sa.Path[i] = int8(p[i])
	}
	type mmsghdr struct {
		hdr unix.Msghdr
		n   uint32
		_   [4]byte
	}
	bufs := [][]byte{[]byte("one"), []byte("three")}
	iovs := make([]unix.Iovec, 2)
	msgs := make([]mmsghdr, 2)
	for i, b := range bufs {
		iovs[i].Base = &b[0]
		iovs[i].SetLen(len(b))
		msgs[i].hdr.Name = (*byte)(unsafe.Pointer(&sa))
		msgs[i].hdr.Namelen = uint32(unsafe.Sizeof(sa))
		msgs[i].hdr.Iov = &iovs[i]
		msgs[i].hdr.SetIovlen(1)
	}
	r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&msgs[0])), 2, 0, 0, 0)
	if e != 0 {
		return errName(e)
	}
	return fmt.Sprintf("%d %d %d", r, msgs[0].n, msgs[1].n)
}

func errName(err error) string {
	if e, ok := err.(unix.Errno); ok {
		return unix.ErrnoName(e)
	}
	return err.Error()
}

// runChild starts the child in mode, serves it with a Server whose unix
// gate allows gateWritable, and returns its result lines.
func runChild(t *testing.T, mode string, args []string, cfg GateConfig) (map[string]string, []string) {
	t.Helper()
	return runChildWith(t, mode, args, cfg, nil)
}

func runChildWith(t *testing.T, mode string, args []string, cfg GateConfig, inet Handler) (map[string]string, []string) {
	t.Helper()
	return runChildAttr(t, mode, args, cfg, Options{Inet: inet}, nil)
}

// runChildAttr is runChildWith with the Server's options o (its Unix
// handler is the gate) and the child started with attr (a user namespace
// of its own, another user), from a copy of the test binary that any user
// may run.
func runChildAttr(t *testing.T, mode string, args []string, cfg GateConfig, o Options, attr *syscall.SysProcAttr) (map[string]string, []string) {
	t.Helper()
	if err := Supported(); err != nil {
		t.Skip(err)
	}
	cmd := childCmd(t, mode, args, attr)
	stdin, out := startGateChild(t, cmd, cfg, o)
	stdin.Write([]byte("go\n"))
	res := map[string]string{}
	var lines []string
	deadline := time.AfterFunc(2*time.Minute, func() { cmd.Process.Kill() }) // deadlock guard only
	defer deadline.Stop()
	for out.Scan() {
		lines = append(lines, out.Text())
		k, v, _ := strings.Cut(out.Text(), " ")
		res[k] = v
	}
	return res, lines
}

// childCmd is the child running scenario mode with args, started with
// attr (a user namespace of its own, another user): from a copy of the
// test binary that any user may run when attr is set.
func childCmd(t testing.TB, mode string, args []string, attr *syscall.SysProcAttr) *exec.Cmd {
	t.Helper()
	bin := os.Args[0]
	if attr != nil {
		dir, err := os.MkdirTemp("", "nsbox-notify-bin-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		os.Chmod(dir, 0o755)
		b, err := os.ReadFile(os.Args[0])
		if err != nil {
			t.Fatal(err)
		}
		bin = filepath.Join(dir, "notify.test")
		if err := os.WriteFile(bin, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.SysProcAttr = attr
	cmd.Env = append(os.Environ(), childEnv+"="+mode, "NSBOX_NOTIFY_TEST_ARGS="+strings.Join(args, " "))
	return cmd
}

// startGateChild starts cmd, a child that installs the notification filter
// and prints "fd N" (its listener), takes the listener and serves it with
// a gate of cfg (RootPid set to the child) and the options o until the
// test ends. It returns
// the child's stdin and the rest of its output; the child is killed and
// reaped at the end of the test.
func startGateChild(t testing.TB, cmd *exec.Cmd, cfg GateConfig, o Options) (io.Writer, *bufio.Scanner) {
	t.Helper()
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	out := bufio.NewScanner(stdout)
	if !out.Scan() {
		t.Fatal("child said nothing")
	}
	var n int
	if _, err := fmt.Sscanf(out.Text(), "fd %d", &n); err != nil {
		t.Fatalf("child: %s", out.Text())
	}
	pidfd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	listener, err := unix.PidfdGetfd(pidfd, n, 0)
	unix.Close(pidfd)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RootPid = cmd.Process.Pid
	gate, err := NewUnixGate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gate.Close)
	if o.Unix == noGate {
		o.Unix = nil // every unix call performed as asked
		// The child is the sandbox's first process, as the worker is.
		o.SandboxPid = cmd.Process.Pid
	} else {
		o.Unix = gate
	}
	srv, err := NewServer(listener, o)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	t.Cleanup(srv.Close)
	return stdin, out
}

// noGate, as Options.Unix of startGateChild, asks for a Server without a
// unix handler (every unix call performed as asked, by the kernel's own
// checks alone).
var noGate Handler = noGateHandler{}

type noGateHandler struct{}

func (noGateHandler) Decide(context.Context, *SockCall) Verdict { return Allow() }

// waitAccepted waits until n counts a connection: a guard for the
// accept loop of hostServer, not a speed assertion (a minute at most).
func waitAccepted(n *atomic.Int64) {
	for deadline := time.Now().Add(time.Minute); n.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
}

// hostServer listens on a path socket in the test process and counts the
// connections it accepts.
func hostServer(t *testing.T, p string) *atomic.Int64 {
	t.Helper()
	l, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { l.Close() })
	return &n
}

// places returns a directory on a writable place's mount (/dev/shm) and
// one on another mount, or skips.
func places(t *testing.T) (rw, host string) {
	t.Helper()
	host = t.TempDir()
	os.Chmod(host, 0o755)
	rw, err := os.MkdirTemp("/dev/shm", "nsbox-notify-")
	if err != nil {
		t.Skipf("no /dev/shm: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(rw) })
	var a, b unix.Statx_t
	unix.Statx(unix.AT_FDCWD, rw, 0, unix.STATX_MNT_ID, &a)
	unix.Statx(unix.AT_FDCWD, host, 0, unix.STATX_MNT_ID, &b)
	if a.Mnt_id == b.Mnt_id {
		t.Skip("/dev/shm and the test's temporary directory are on one mount")
	}
	return rw, host
}
func TestSendmsgRights(t *testing.T) {
	res, lines := runChild(t, "rights", nil, GateConfig{})
	if got := res["rights"]; got != `send=<nil> recv=<nil> data="hi" fd="through"` {
		t.Fatalf("sendmsg with SCM_RIGHTS: %v", lines)
	}
}

// TestProgram runs the filter in a small classic-BPF interpreter over the
// calls that matter: which notify, which are allowed, which foreign-ABI
// socket calls are refused.
func TestProgram(t *testing.T) {
	p := Program(ProgramOptions{})
	run := func(arch, nr uint32, args [6]uint64) uint32 { return runProgram(t, p, arch, nr, args) }
	notif, allow := uint32(unix.SECCOMP_RET_USER_NOTIF), uint32(unix.SECCOMP_RET_ALLOW)
	deny := uint32(unix.SECCOMP_RET_ERRNO | uint32(unix.EACCES))
	type progCase struct {
		name string
		arch uint32
		nr   uint32
		args [6]uint64
		want uint32
	}
	cases := []progCase{
		{"connect", auditArch, unix.SYS_CONNECT, [6]uint64{}, notif},
		{"sendmsg", auditArch, unix.SYS_SENDMSG, [6]uint64{}, notif},
		{"sendmmsg", auditArch, unix.SYS_SENDMMSG, [6]uint64{}, notif},
		{"shutdown", auditArch, unix.SYS_SHUTDOWN, [6]uint64{}, notif},
		{"sendto without an address", auditArch, unix.SYS_SENDTO, [6]uint64{3, 0x1000, 4, 0, 0, 0}, allow},
		{"sendto with an address", auditArch, unix.SYS_SENDTO, [6]uint64{3, 0x1000, 4, 0, 0x7ffd0000, 110}, notif},
		{"sendto with an address above 4 GiB", auditArch, unix.SYS_SENDTO, [6]uint64{3, 0x1000, 4, 0, 0x7f0000000000, 110}, notif},
		{"sendto MSG_FASTOPEN without an address", auditArch, unix.SYS_SENDTO, [6]uint64{3, 0x1000, 4, unix.MSG_FASTOPEN, 0, 0}, notif},
		{"sendto MSG_NOSIGNAL without an address", auditArch, unix.SYS_SENDTO, [6]uint64{3, 0x1000, 4, unix.MSG_NOSIGNAL, 0, 0}, allow},
		{"write", auditArch, unix.SYS_WRITE, [6]uint64{}, allow},
		{"openat", auditArch, unix.SYS_OPENAT, [6]uint64{}, allow},
		{"io_uring_setup", auditArch, unix.SYS_IO_URING_SETUP, [6]uint64{}, uint32(unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS))},
		{"socket AF_INET", auditArch, unix.SYS_SOCKET, [6]uint64{unix.AF_INET, unix.SOCK_STREAM}, allow},
		{"socket AF_UNIX", auditArch, unix.SYS_SOCKET, [6]uint64{unix.AF_UNIX, unix.SOCK_STREAM}, allow},
		{"socket AF_VSOCK", auditArch, unix.SYS_SOCKET, [6]uint64{unix.AF_VSOCK, unix.SOCK_STREAM}, uint32(unix.SECCOMP_RET_ERRNO | uint32(unix.EAFNOSUPPORT))},
	}
	for _, nr := range socketCalls[1:] {
		cases = append(cases, progCase{fmt.Sprintf("socket %#x AF_VSOCK", nr), auditArch, nr, [6]uint64{unix.AF_VSOCK}, uint32(unix.SECCOMP_RET_ERRNO | uint32(unix.EAFNOSUPPORT))})
	}
	for _, fc := range foreignSocketCalls {
		for _, nr := range fc.nrs {
			cases = append(cases, progCase{fmt.Sprintf("foreign %#x %d", fc.arch, nr), fc.arch, nr, [6]uint64{}, deny})
		}
		cases = append(cases, progCase{fmt.Sprintf("foreign %#x write", fc.arch), fc.arch, 4, [6]uint64{}, allow})
		for _, nr := range ioUringSetupOf(fc.arch) {
			cases = append(cases, progCase{fmt.Sprintf("foreign %#x io_uring_setup", fc.arch), fc.arch, nr, [6]uint64{}, uint32(unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS))})
		}
	}
	for _, nr := range nativeForeignCalls {
		cases = append(cases, progCase{fmt.Sprintf("x32 %d", nr), auditArch, nr, [6]uint64{}, deny})
	}
	for _, nr := range ioUringSetupOf(auditArch) {
		cases = append(cases, progCase{fmt.Sprintf("io_uring_setup %#x", nr), auditArch, nr, [6]uint64{}, uint32(unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS))})
	}
	for _, c := range cases {
		if got := run(c.arch, c.nr, c.args); got != c.want {
			t.Errorf("%s: %#x, want %#x", c.name, got, c.want)
		}
	}
}

// runProgram runs the classic BPF program p (the instructions Program
// uses) over one call's seccomp_data in a small interpreter.
func runProgram(t *testing.T, p []unix.SockFilter, arch, nr uint32, args [6]uint64) uint32 {
	t.Helper()
	var a uint32
	for pc := 0; pc < len(p); pc++ {
		ins := p[pc]
		switch ins.Code {
		case unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
			switch {
			case ins.K == offNr:
				a = nr
			case ins.K == offArch:
				a = arch
			case ins.K >= offArgs:
				i := (ins.K - offArgs) / 8
				if (ins.K-offArgs)%8 == 0 {
					a = uint32(args[i])
				} else {
					a = uint32(args[i] >> 32)
				}
			}
		case unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K:
			if a == ins.K {
				pc += int(ins.Jt)
			} else {
				pc += int(ins.Jf)
			}
		case unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K:
			if a >= ins.K {
				pc += int(ins.Jt)
			} else {
				pc += int(ins.Jf)
			}
		case unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K:
			if a&ins.K != 0 {
				pc += int(ins.Jt)
			} else {
				pc += int(ins.Jf)
			}
		case unix.BPF_RET | unix.BPF_K:
			return ins.K
		default:
			t.Fatalf("unexpected instruction %#x", ins.Code)
		}
	}
	t.Fatal("the program fell off its end")
	return 0
}

// TestProgramNotifiesEverySetgroups: setgroups notifies in each ABI the
// kernel runs (native, x32, i386 or 32-bit ARM in both the 16- and 32-bit
// forms): a form that did not would change a thread's groups unseen, and
// the groups the Server keeps would be stale (creds). Its neighbours
// (setgid, getgroups) stay allowed.
func TestProgramNotifiesEverySetgroups(t *testing.T) {
	p := Program(ProgramOptions{})
	notif, allow := uint32(unix.SECCOMP_RET_USER_NOTIF), uint32(unix.SECCOMP_RET_ALLOW)
	type tc struct {
		name     string
		arch, nr uint32
		want     uint32
	}
	var cases []tc
	switch runtime.GOARCH {
	case "amd64":
		cases = []tc{
			{"setgroups", unix.AUDIT_ARCH_X86_64, 116, notif},
			{"x32 setgroups", unix.AUDIT_ARCH_X86_64, 0x40000000 | 116, notif},
			{"i386 setgroups16", unix.AUDIT_ARCH_I386, 81, notif},
			{"i386 setgroups32", unix.AUDIT_ARCH_I386, 206, notif},
			{"getgroups", unix.AUDIT_ARCH_X86_64, 115, allow},
			{"setgid", unix.AUDIT_ARCH_X86_64, 106, allow},
			{"i386 getgroups32", unix.AUDIT_ARCH_I386, 205, allow},
		}
	case "arm64":
		cases = []tc{
			{"setgroups", unix.AUDIT_ARCH_AARCH64, 159, notif},
			{"arm setgroups16", unix.AUDIT_ARCH_ARM, 81, notif},
			{"arm setgroups32", unix.AUDIT_ARCH_ARM, 206, notif},
			{"getgroups", unix.AUDIT_ARCH_AARCH64, 158, allow},
		}
	default:
		t.Skip("the gate's filter is built for amd64 and arm64 only")
	}
	for _, c := range cases {
		if got := runProgram(t, p, c.arch, c.nr, [6]uint64{}); got != c.want {
			t.Errorf("%s: %#x, want %#x", c.name, got, c.want)
		}
		if c.want == notif && !isSetgroups(c.arch, int32(c.nr)) {
			t.Errorf("%s notifies but the Server would not take it for setgroups", c.name)
		}
	}
}

// redirectListener listens on the host's 127.0.0.1 and answers every
// connection with "redirected": where the tests' handlers install the
// sockets they connect in place of the target's.
func redirectListener(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("redirected"))
			c.Close()
		}
	}()
	return l
}

// TestInetHandler is the hook the filtered network uses: a connect to one
// address is refused by the handler, a connect to another is answered by
// installing a socket the supervisor connected elsewhere (ADDFD, SETFD).
func TestInetHandler(t *testing.T) {
	l := redirectListener(t)
	var seen atomic.Int64
	h := HandlerFunc(func(_ context.Context, c *SockCall) Verdict {
		seen.Add(1)
		if c.Syscall != Connect || c.Domain != unix.AF_INET || len(c.Addr) < 8 {
			return Allow()
		}
		switch c.Addr[7] { // the last byte of the IPv4 address
		case 2:
			return Deny(unix.ECONNREFUSED)
		case 3:
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return Deny(unix.EIO)
			}
			sa := &unix.SockaddrInet4{Port: l.Addr().(*net.TCPAddr).Port, Addr: [4]byte{127, 0, 0, 1}}
			if err := unix.Connect(fd, sa); err != nil {
				unix.Close(fd)
				return Deny(unix.EIO)
			}
			return InstallFD(fd, 0)
		}
		return Allow()
	})
	res, lines := runChildWith(t, "inet", []string{"127.0.0.2:9", "127.0.0.3:9"}, GateConfig{}, h)
	if res["127.0.0.2:9"] != "ECONNREFUSED" || res["127.0.0.3:9"] != "read redirected" {
		t.Fatalf("inet handler: %v", lines)
	}
	if seen.Load() < 2 {
		t.Fatalf("handler saw %d calls", seen.Load())
	}
}

// TestSlowCallDoesNotHoldTheOthers: while the handler holds one call (a
// connect that waits, as a dial or a full backlog does), the Server still
// reads and answers the next one: the turn is handed on for the slow
// call. Without it the first call's wait (ended only by the second)
// would run into its 60 s guard.
func TestSlowCallDoesNotHoldTheOthers(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "held")
	release := make(chan struct{})
	var once sync.Once
	h := HandlerFunc(func(ctx context.Context, c *SockCall) Verdict {
		switch {
		case len(c.Addr) >= 8 && c.Addr[7] == 2:
			os.WriteFile(marker, nil, 0o600)
			select {
			case <-release:
				return Deny(unix.ECONNREFUSED)
			case <-time.After(60 * time.Second): // deadlock guard only
				return Deny(unix.ETIMEDOUT)
			}
		case len(c.Addr) >= 8 && c.Addr[7] == 3:
			once.Do(func() { close(release) })
			return Deny(unix.EHOSTUNREACH)
		}
		return Deny(unix.EACCES)
	})
	res, lines := runChildWith(t, "blocked", []string{marker}, GateConfig{}, h)
	if res["second"] != "EHOSTUNREACH" || res["first"] != "ECONNREFUSED" {
		t.Fatalf("%q", lines)
	}
}

// TestPidfdCacheSweepDropsTheDead: when the pidfd cache is full, the
// pidfds of processes that ended are dropped (their ids may name another
// process next) and those of live ones are kept.
func TestPidfdCacheSweepDropsTheDead(t *testing.T) {
	start := func() (*exec.Cmd, int) {
		cmd := exec.Command("sleep", "60")
		if err := cmd.Start(); err != nil {
			t.Skip(err)
		}
		fd, _, err := openPidfd(cmd.Process.Pid)
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Skip(err)
		}
		return cmd, fd
	}
	live, liveFd := start()
	defer func() { live.Process.Kill(); live.Wait() }()
	dead, deadFd := start()
	dead.Process.Kill()
	dead.Wait() // reaped: its id is free for another process
	entry := func(fd int) *proc {
		dir, err := unix.Open("/", unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		return &proc{pidfd: fd, dir: dir, status: -1, refs: 1}
	}
	liveP := entry(liveFd)
	s := &Server{procs: map[int]*proc{live.Process.Pid: liveP, dead.Process.Pid: entry(deadFd)}}
	s.sweepPidfdsLocked()
	if _, ok := s.procs[dead.Process.Pid]; ok {
		t.Fatal("the pidfd of a process that ended is still cached")
	}
	if p, ok := s.procs[live.Process.Pid]; !ok || p != liveP {
		t.Fatal("the pidfd of a live process was dropped")
	}
	if _, err := unix.FcntlInt(uintptr(deadFd), unix.F_GETFD, 0); err != unix.EBADF {
		t.Fatal("the dropped entry's pidfd is still open")
	}
	liveP.close()
}

// TestProcEntryOutlivesForget: an entry dropped from the cache (its
// thread ended) keeps its descriptors open while a call still holds it,
// and closes them with the last reference: a descriptor closed under a
// call could be reused by another open and name another file.
func TestProcEntryOutlivesForget(t *testing.T) {
	open := func() int {
		fd, err := unix.Open("/", unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		return fd
	}
	isOpen := func(fd int) bool {
		_, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		return err == nil
	}
	p := &proc{pidfd: open(), dir: open(), status: -1, root: open(), refs: 1}
	s := &Server{procs: map[int]*proc{42: p}}
	if got := s.cachedProc(42); got != p || p.refs != 2 {
		t.Fatalf("cachedProc: %p refs %d", got, p.refs)
	}
	s.forget(42, p)
	if _, ok := s.procs[42]; ok {
		t.Fatal("forget left the entry cached")
	}
	if !isOpen(p.pidfd) || !isOpen(p.dir) || !isOpen(p.root) {
		t.Fatal("a descriptor was closed while a call held the entry")
	}
	s.put(p)
	if isOpen(p.pidfd) || isOpen(p.dir) || isOpen(p.root) {
		t.Fatal("the last reference left descriptors open")
	}
	s.forget(42, p) // a second forget of an entry no longer cached does nothing
}

// TestShutdownPerformed: shutdown(2) is handed to the supervisor, which
// makes it on its copy of the socket and answers with its result.
func TestShutdownPerformed(t *testing.T) {
	rw, _ := places(t)
	p := filepath.Join(rw, "s.sock")
	hostServer(t, p)
	res, lines := runChild(t, "shutdown", []string{p}, GateConfig{Writable: []string{rw}})
	if res["unconnected"] != "ENOTCONN" || res["connected"] != "ok" {
		t.Fatalf("%q", lines)
	}
}

// TestProgramFiltered: with a filtered network, listen(2) notifies and the
// setsockopt options that steer a socket's traffic fail with EPERM, also
// in the foreign ABIs (EACCES); other options, and everything without
// the option, are as before.
func TestProgramFiltered(t *testing.T) {
	f, plain := Program(ProgramOptions{Filtered: true}), Program(ProgramOptions{})
	notif, allow := uint32(unix.SECCOMP_RET_USER_NOTIF), uint32(unix.SECCOMP_RET_ALLOW)
	eperm := uint32(unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM))
	deny := uint32(unix.SECCOMP_RET_ERRNO | uint32(unix.EACCES))
	for _, c := range []struct {
		name        string
		nr          uint32
		args        [6]uint64
		want, plain uint32
	}{
		{"listen", unix.SYS_LISTEN, [6]uint64{3, 8}, notif, allow},
		{"SO_BINDTODEVICE", unix.SYS_SETSOCKOPT, [6]uint64{3, unix.SOL_SOCKET, unix.SO_BINDTODEVICE}, eperm, allow},
		{"SO_BINDTOIFINDEX", unix.SYS_SETSOCKOPT, [6]uint64{3, unix.SOL_SOCKET, unix.SO_BINDTOIFINDEX}, eperm, allow},
		{"IPV6_RTHDR", unix.SYS_SETSOCKOPT, [6]uint64{3, unix.IPPROTO_IPV6, unix.IPV6_RTHDR}, eperm, allow},
		{"IPV6_2292RTHDR", unix.SYS_SETSOCKOPT, [6]uint64{3, unix.IPPROTO_IPV6, unix.IPV6_2292RTHDR}, eperm, allow},
		{"IPV6_2292PKTOPTIONS", unix.SYS_SETSOCKOPT, [6]uint64{3, unix.IPPROTO_IPV6, unix.IPV6_2292PKTOPTIONS}, eperm, allow},
		{"IPV6_HOPOPTS", unix.SYS_SETSOCKOPT, [6]uint64{3, unix.IPPROTO_IPV6, unix.IPV6_HOPOPTS}, eperm, allow},
		{"IPV6_RTHDRDSTOPTS", unix.SYS_SETSOCKOPT, [6]uint64{3, unix.IPPROTO_IPV6, unix.IPV6_RTHDRDSTOPTS}, eperm, allow},
		{"IPV6_DSTOPTS", unix.SYS_SETSOCKOPT, [6]uint64{3, unix.IPPROTO_IPV6, unix.IPV6_DSTOPTS}, eperm, allow},
		{"IPV6_2292HOPOPTS", unix.SYS_SETSOCKOPT, [6]uint64{3, unix.IPPROTO_IPV6, unix.IPV6_2292HOPOPTS}, eperm, allow},
		{"IPV6_2292DSTOPTS", unix.SYS_SETSOCKOPT, [6]uint64{3, unix.IPPROTO_IPV6, unix.IPV6_2292DSTOPTS}, eperm, allow},
		{"IPV6_2292PKTINFO", unix.SYS_SETSOCKOPT, [6]uint64{3, unix.IPPROTO_IPV6, unix.IPV6_2292PKTINFO}, allow, allow},
		{"IPV6_UNICAST_HOPS", unix.SYS_SETSOCKOPT, [6]uint64{3, unix.IPPROTO_IPV6, unix.IPV6_UNICAST_HOPS}, allow, allow},
		{"IP_OPTIONS", unix.SYS_SETSOCKOPT, [6]uint64{3, unix.IPPROTO_IP, unix.IP_OPTIONS}, eperm, allow},
		{"IPV6_ADD_MEMBERSHIP", unix.SYS_SETSOCKOPT, [6]uint64{3, unix.IPPROTO_IPV6, unix.IPV6_ADD_MEMBERSHIP}, eperm, allow},
		{"IPV6_DROP_MEMBERSHIP", unix.SYS_SETSOCKOPT, [6]uint64{3, unix.IPPROTO_IPV6, unix.IPV6_DROP_MEMBERSHIP}, eperm, allow},
		{"IPV6_JOIN_ANYCAST", unix.SYS_SETSOCKOPT, [6]uint64{3, unix.IPPROTO_IPV6, unix.IPV6_JOIN_ANYCAST}, eperm, allow},
		{"IPV6_LEAVE_ANYCAST", unix.SYS_SETSOCKOPT, [6]uint64{3, unix.IPPROTO_IPV6, unix.IPV6_LEAVE_ANYCAST}, eperm, allow},
		{"IPV6 MCAST_JOIN_GROUP", unix.SYS_SETSOCKOPT, [6]uint64{3, unix.IPPROTO_IPV6, unix.MCAST_JOIN_GROUP}, eperm, allow},
		{"IPV6 MCAST_MSFILTER", unix.SYS_SETSOCKOPT, [6]uint64{3, unix.IPPROTO_IPV6, unix.MCAST_MSFILTER}, eperm, allow},
		{"IPV6 49, above the MCAST_* names", unix.SYS_SETSOCKOPT, [6]uint64{3, unix.IPPROTO_IPV6, unix.MCAST_MSFILTER + 1}, allow, allow},
		{"IPV6_UNICAST_IF", unix.SYS_SETSOCKOPT, [6]uint64{3, unix.IPPROTO_IPV6, unix.IPV6_UNICAST_IF}, eperm, allow},
		{"IP_UNICAST_IF", unix.SYS_SETSOCKOPT, [6]uint64{3, unix.IPPROTO_IP, unix.IP_UNICAST_IF}, eperm, allow},
		{"IPV6_RECVERR", unix.SYS_SETSOCKOPT, [6]uint64{3, unix.IPPROTO_IPV6, unix.IPV6_RECVERR}, allow, allow},
		{"IP_ADD_MEMBERSHIP", unix.SYS_SETSOCKOPT, [6]uint64{3, unix.IPPROTO_IP, unix.IP_ADD_MEMBERSHIP}, eperm, allow},
		{"IP_ADD_SOURCE_MEMBERSHIP", unix.SYS_SETSOCKOPT, [6]uint64{3, unix.IPPROTO_IP, unix.IP_ADD_SOURCE_MEMBERSHIP}, eperm, allow},
		{"IP_MSFILTER", unix.SYS_SETSOCKOPT, [6]uint64{3, unix.IPPROTO_IP, unix.IP_MSFILTER}, eperm, allow},
		{"IP MCAST_JOIN_GROUP", unix.SYS_SETSOCKOPT, [6]uint64{3, unix.IPPROTO_IP, unix.MCAST_JOIN_GROUP}, eperm, allow},
		{"IP MCAST_JOIN_SOURCE_GROUP", unix.SYS_SETSOCKOPT, [6]uint64{3, unix.IPPROTO_IP, unix.MCAST_JOIN_SOURCE_GROUP}, eperm, allow},
		{"IP MCAST_MSFILTER", unix.SYS_SETSOCKOPT, [6]uint64{3, unix.IPPROTO_IP, unix.MCAST_MSFILTER}, eperm, allow},
		{"IP_TOS", unix.SYS_SETSOCKOPT, [6]uint64{3, unix.IPPROTO_IP, unix.IP_TOS}, allow, allow},
		{"IP_MTU_DISCOVER", unix.SYS_SETSOCKOPT, [6]uint64{3, unix.IPPROTO_IP, unix.IP_MTU_DISCOVER}, allow, allow},
		{"IP 34, below the group names", unix.SYS_SETSOCKOPT, [6]uint64{3, unix.IPPROTO_IP, unix.IP_ADD_MEMBERSHIP - 1}, allow, allow},
		{"IP 49 (IP_MULTICAST_ALL)", unix.SYS_SETSOCKOPT, [6]uint64{3, unix.IPPROTO_IP, unix.MCAST_MSFILTER + 1}, allow, allow},
		{"SO_KEEPALIVE", unix.SYS_SETSOCKOPT, [6]uint64{3, unix.SOL_SOCKET, unix.SO_KEEPALIVE}, allow, allow},
		{"TCP_NODELAY", unix.SYS_SETSOCKOPT, [6]uint64{3, unix.IPPROTO_TCP, unix.TCP_NODELAY}, allow, allow},
		{"IPV6_V6ONLY", unix.SYS_SETSOCKOPT, [6]uint64{3, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY}, allow, allow},
		{"connect", unix.SYS_CONNECT, [6]uint64{}, notif, notif},
		// Device ioctls (review 38): the reads notify, the sets and
		// the socket's own two run, as does every other request.
		{"SIOCGIFCONF", unix.SYS_IOCTL, [6]uint64{3, unix.SIOCGIFCONF}, notif, allow},
		{"SIOCGIFCONF, high word set", unix.SYS_IOCTL, [6]uint64{3, 1<<32 | unix.SIOCGIFCONF}, notif, allow},
		{"SIOCGIFNAME", unix.SYS_IOCTL, [6]uint64{3, unix.SIOCGIFNAME}, notif, allow},
		{"SIOCGIFHWADDR", unix.SYS_IOCTL, [6]uint64{3, unix.SIOCGIFHWADDR}, notif, allow},
		{"SIOCGARP", unix.SYS_IOCTL, [6]uint64{3, unix.SIOCGARP}, notif, allow},
		{"SIOCETHTOOL", unix.SYS_IOCTL, [6]uint64{3, unix.SIOCETHTOOL}, notif, allow},
		{"SIOCDEVPRIVATE+15", unix.SYS_IOCTL, [6]uint64{3, unix.SIOCDEVPRIVATE + 15}, notif, allow},
		{"SIOCGIWESSID", unix.SYS_IOCTL, [6]uint64{3, 0x8b1b}, notif, allow},
		{"SIOCSIFFLAGS", unix.SYS_IOCTL, [6]uint64{3, unix.SIOCSIFFLAGS}, allow, allow},
		{"SIOCSARP", unix.SYS_IOCTL, [6]uint64{3, unix.SIOCSARP}, allow, allow},
		{"SIOCSHWTSTAMP", unix.SYS_IOCTL, [6]uint64{3, unix.SIOCSHWTSTAMP}, allow, allow},
		{"SIOCOUTQNSD", unix.SYS_IOCTL, [6]uint64{3, unix.SIOCOUTQNSD}, allow, allow},
		{"SIOCGSKNS", unix.SYS_IOCTL, [6]uint64{3, unix.SIOCGSKNS}, allow, allow},
		{"SIOCGSTAMP", unix.SYS_IOCTL, [6]uint64{3, unix.SIOCGSTAMP}, allow, allow},
		{"SIOCGSTAMP_NEW", unix.SYS_IOCTL, [6]uint64{3, 0x80108906}, allow, allow},
		{"FIONREAD (SIOCINQ)", unix.SYS_IOCTL, [6]uint64{3, unix.SIOCINQ}, allow, allow},
		{"TCGETS", unix.SYS_IOCTL, [6]uint64{0, unix.TCGETS}, allow, allow},
		{"0x8a00, between the ranges", unix.SYS_IOCTL, [6]uint64{3, 0x8a00}, allow, allow},
		{"0x8c00, past the wireless range", unix.SYS_IOCTL, [6]uint64{3, 0x8c00}, allow, allow},
	} {
		if got := runProgram(t, f, auditArch, c.nr, c.args); got != c.want {
			t.Errorf("filtered %s: %#x, want %#x", c.name, got, c.want)
		}
		if got := runProgram(t, plain, auditArch, c.nr, c.args); got != c.plain {
			t.Errorf("%s: %#x, want %#x", c.name, got, c.plain)
		}
	}
	for _, fc := range filteredForeignCalls {
		for _, nr := range fc.nrs {
			if got := runProgram(t, f, fc.arch, nr, [6]uint64{}); got != deny {
				t.Errorf("filtered foreign %#x %d: %#x, want %#x", fc.arch, nr, got, deny)
			}
		}
	}
	for _, fc := range ioctlCalls {
		for _, nr := range fc.nrs {
			for _, c := range []struct {
				req  uint64
				want uint32
			}{{unix.SIOCGIFCONF, deny}, {unix.SIOCGARP, deny}, {0x8b1b, deny}, {unix.SIOCSIFFLAGS, allow}, {unix.SIOCINQ, allow}} {
				if got := runProgram(t, f, fc.arch, nr, [6]uint64{3, c.req}); got != c.want {
					t.Errorf("filtered foreign %#x ioctl %d %#x: %#x, want %#x", fc.arch, nr, c.req, got, c.want)
				}
				if got := runProgram(t, plain, fc.arch, nr, [6]uint64{3, c.req}); got != allow {
					t.Errorf("foreign %#x ioctl %d %#x: %#x, want %#x", fc.arch, nr, c.req, got, allow)
				}
			}
		}
	}
}

// TestProgramOwnNetwork: in a network namespace of the sandbox's own the
// device ioctls notify without a filtered network too (review 39: the
// hostCall socket at fd 3 is the host's); the filtered network's other
// refusals stay off.
func TestProgramOwnNetwork(t *testing.T) {
	own := Program(ProgramOptions{OwnNetwork: true})
	notif, allow := uint32(unix.SECCOMP_RET_USER_NOTIF), uint32(unix.SECCOMP_RET_ALLOW)
	for _, c := range []struct {
		name string
		nr   uint32
		args [6]uint64
		want uint32
	}{
		{"SIOCGIFCONF", unix.SYS_IOCTL, [6]uint64{3, unix.SIOCGIFCONF}, notif},
		{"SIOCGARP", unix.SYS_IOCTL, [6]uint64{3, unix.SIOCGARP}, notif},
		{"SIOCSIFFLAGS", unix.SYS_IOCTL, [6]uint64{3, unix.SIOCSIFFLAGS}, allow},
		{"TCGETS", unix.SYS_IOCTL, [6]uint64{0, unix.TCGETS}, allow},
		{"listen", unix.SYS_LISTEN, [6]uint64{3, 8}, allow},
		{"SO_BINDTODEVICE", unix.SYS_SETSOCKOPT, [6]uint64{3, unix.SOL_SOCKET, unix.SO_BINDTODEVICE}, allow},
	} {
		if got := runProgram(t, own, auditArch, c.nr, c.args); got != c.want {
			t.Errorf("%s: %#x, want %#x", c.name, got, c.want)
		}
	}
}
