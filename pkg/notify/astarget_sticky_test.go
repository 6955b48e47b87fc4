package notify

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Serving threads that keep a target's ids between calls
// (Options.OwnPIDNamespace, servingThread).

func init() {
	childModes["steps"] = stepsChild
}

// stepsChild runs its args as steps, on one locked thread. Before each
// call step it waits for a line on stdin, and prints the call's result:
//
//	as:U:G       this thread takes uid U and gid G (saved ids 0: a root child)
//	nodump       prctl(PR_SET_DUMPABLE, 0)
//	cd:DIR       chdir
//	connect:P    connect to path socket P
//	inet:A       connect to 127.0.0.1-style A (ip:port)
//	sendmmsg:P   two datagrams to P with one sendmmsg
//	rights       a pipe's fd over a socketpair (SCM_RIGHTS)
//	listen:P     bind to P, then listen (kept open)
func stepsChild(args []string, in *bufio.Reader) int {
	runtime.LockOSThread() // the ids below are this thread's
	for _, step := range args {
		kind, arg, _ := strings.Cut(step, ":")
		switch kind {
		case "as":
			u, g, _ := strings.Cut(arg, ":")
			uid, _ := strconv.Atoi(u)
			gid, _ := strconv.Atoi(g)
			for _, c := range [][4]uintptr{
				{unix.SYS_SETRESUID, 0, 0, 0}, {unix.SYS_SETRESGID, 0, 0, 0},
				{unix.SYS_SETRESGID, uintptr(gid), uintptr(gid), 0}, {unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), 0},
			} {
				if _, _, e := unix.RawSyscall(c[0], c[1], c[2], c[3]); e != 0 {
					fmt.Println("error", step, e)
					return 1
				}
			}
			continue
		case "nodump":
			if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
				fmt.Println("error", err)
				return 1
			}
			continue
		case "listen":
			// Bound here, listened to through the supervisor (under
			// NSBOX_NOTIFY_TEST_FILTERED), and kept open for the test
			// to connect to.
			fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err == nil {
				err = unix.Bind(fd, &unix.SockaddrUnix{Name: arg})
			}
			if err != nil {
				fmt.Println("error", err)
				return 1
			}
			if line, _ := in.ReadString('\n'); line != "next\n" {
				return 1
			}
			r := "ok"
			if err := unix.Listen(fd, 8); err != nil {
				r = errName(err)
			}
			fmt.Println(step, r)
			continue
		case "cd":
			if err := unix.Chdir(arg); err != nil {
				fmt.Println("error", err)
				return 1
			}
			continue
		}
		if line, _ := in.ReadString('\n'); line != "next\n" {
			return 1
		}
		var r string
		switch kind {
		case "connect":
			r = connectResult(arg)
		case "inet":
			r = inetResult(arg)
		case "sendmmsg":
			r = sendmmsgResult(arg)
		case "rights":
			r = rightsResult()
		default:
			r = "unknown step"
		}
		d, _ := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
		fmt.Printf("%s %s dumpable=%d\n", step, r, d)
	}
	// Alive until the test is done: the Server's threads end once no
	// process is left under the filter.
	in.ReadString('\n')
	return 0
}

// rightsResult sends a pipe's read end over a socketpair and reads
// through the fd received.
func rightsResult() string {
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return errName(err)
	}
	defer unix.Close(sp[0])
	defer unix.Close(sp[1])
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return errName(err)
	}
	defer unix.Close(p[0])
	unix.Write(p[1], []byte("through"))
	unix.Close(p[1])
	if err := unix.Sendmsg(sp[0], []byte("hi"), unix.UnixRights(p[0]), nil, 0); err != nil {
		return errName(err)
	}
	buf, oob := make([]byte, 16), make([]byte, 64)
	_, oobn, _, _, err := unix.Recvmsg(sp[1], buf, oob, 0)
	if err != nil {
		return errName(err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return "no-rights"
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return "no-rights"
	}
	defer unix.Close(fds[0])
	b := make([]byte, 16)
	k, _ := unix.Read(fds[0], b)
	if string(b[:k]) != "through" {
		return "wrong-fd"
	}
	return "ok"
}

// stepper starts the steps child (attr: its user) served by a root
// Server with options o and a gate of cfg, and returns a function that lets it make its
// next call and returns that call's line. The child lives until the test
// ends (its Server's threads with it).
func stepper(t *testing.T, steps []string, cfg GateConfig, o Options, attr *syscall.SysProcAttr) func() string {
	t.Helper()
	cmd := childCmd(t, "steps", steps, attr)
	stdin, out := startGateChild(t, cmd, cfg, o)
	stdin.Write([]byte("go\n"))
	return func() string {
		t.Helper()
		io.WriteString(stdin, "next\n")
		if !out.Scan() {
			t.Fatal("the child ended")
		}
		return out.Text()
	}
}

// peerServer listens on p (mode 0777) and sends the SO_PEERCRED of each
// connection it accepts.
func peerServer(t *testing.T, p string) chan unix.Ucred {
	t.Helper()
	l, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	os.Chmod(p, 0o777)
	peers := make(chan unix.Ucred, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			raw, _ := c.(*net.UnixConn).SyscallConn()
			raw.Control(func(fd uintptr) {
				if u, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
					peers <- *u
				}
			})
			c.Close()
		}
	}()
	return peers
}

// threadIDs are one thread's Uid and Gid lines of its status (real,
// effective, saved, file system) and its effective capabilities.
type threadIDs struct {
	tid      string
	uid, gid string
	capEff   uint64
}

// testThreads reads the ids of every thread of this process.
func testThreads(t *testing.T) []threadIDs {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	var out []threadIDs
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/status")
		if err != nil {
			continue // ended meanwhile
		}
		st := threadIDs{tid: task.Name()}
		for _, line := range strings.Split(string(b), "\n") {
			k, v, _ := strings.Cut(line, ":")
			switch k {
			case "Uid":
				st.uid = strings.Join(strings.Fields(v), " ")
			case "Gid":
				st.gid = strings.Join(strings.Fields(v), " ")
			case "CapEff":
				st.capEff, _ = strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			}
		}
		out = append(out, st)
	}
	return out
}

// checkThreads checks that every thread of this process holds root's ids,
// or (when want > 0) one of the targets' ids in earlier (ruid=euid=fsuid,
// saved 0) with exactly stickyCaps effective: a serving thread that took
// over from a slow one keeps the ids of its own last call. At least want
// threads must hold the last target's, uid:gid.
func checkThreads(t *testing.T, when string, uid, gid, want int, earlier [][2]int) {
	t.Helper()
	ids := func(id int) string { return fmt.Sprintf("%d %d 0 %d", id, id, id) }
	held := 0
	for _, th := range testThreads(t) {
		if th.uid == "0 0 0 0" && th.gid == "0 0 0 0" {
			continue
		}
		ok := false
		for _, e := range earlier {
			if want > 0 && th.uid == ids(e[0]) && th.gid == ids(e[1]) && th.capEff == stickyCaps {
				ok = true
			}
		}
		if !ok {
			t.Fatalf("%s: thread %s: Uid %s Gid %s CapEff %#x", when, th.tid, th.uid, th.gid, th.capEff)
		}
		if th.uid == ids(uid) && th.gid == ids(gid) {
			held++
		}
	}
	if held < want {
		t.Fatalf("%s: no serving thread kept the target's ids %d:%d", when, uid, gid)
	}
}

// stickyDir is a directory every user may search, on /dev/shm: connects
// there are the kernel's own business with the gate off (noGate).
func stickyDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/dev/shm", "nsbox-notify-sticky-")
	if err != nil {
		t.Skipf("no /dev/shm: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o777)
	return dir
}

// TestStickyEachTargetConnectsAsItself: one child thread changes its ids
// between connects; the listener sees each connect's own uid and gid,
// whether the serving thread keeps the last target's ids
// (OwnPIDNamespace) or not. Kept, a serving thread holds exactly the last
// target's ids with saved ids 0 and CAP_SYS_PTRACE|CAP_DAC_READ_SEARCH
// effective; not kept, every thread holds root's ids again after each
// call.
func TestStickyEachTargetConnectsAsItself(t *testing.T) {
	requireAsTarget(t)
	for _, sticky := range []bool{true, false} {
		t.Run(fmt.Sprintf("OwnPIDNamespace=%v", sticky), func(t *testing.T) {
			dir := stickyDir(t)
			p := filepath.Join(dir, "s.sock")
			peers := peerServer(t, p)
			ids := [][2]int{{1001, 2001}, {1001, 2001}, {1002, 2002}, {1001, 2001}, {nobody, nobody}}
			var steps []string
			for _, id := range ids {
				steps = append(steps, fmt.Sprintf("as:%d:%d", id[0], id[1]), "connect:"+p)
			}
			next := stepper(t, steps, GateConfig{Writable: []string{dir}}, Options{AsTarget: true, OwnPIDNamespace: sticky},
				&syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 0, Gid: 0, Groups: []uint32{}}})
			for i, id := range ids {
				if line := next(); !strings.HasPrefix(line, "connect:"+p+" ok ") {
					t.Fatalf("call %d: %s", i, line)
				}
				if u := <-peers; int(u.Uid) != id[0] || int(u.Gid) != id[1] {
					t.Fatalf("call %d as %d:%d: the peer is %d:%d", i, id[0], id[1], u.Uid, u.Gid)
				}
				want := 0
				if sticky {
					want = 1
				}
				checkThreads(t, fmt.Sprintf("after call %d", i), id[0], id[1], want, ids[:i+1])
			}
		})
	}
}

// TestStickyServesNonDumpableTarget: a target that made itself not
// dumpable (PR_SET_DUMPABLE 0), whose /proc files and descriptors the
// kernel then guards with CAP_SYS_PTRACE, is served by a thread that kept
// its ids from an earlier call: an absolute and a relative connect (its
// root and cwd links), a descriptor passed with SCM_RIGHTS (pidfd_getfd)
// and a sendmmsg (its msg_len written back through /proc/TID/mem, which
// the thread takes root's ids back for).
func TestStickyServesNonDumpableTarget(t *testing.T) {
	requireAsTarget(t)
	dir := stickyDir(t)
	p := filepath.Join(dir, "s.sock")
	peers := peerServer(t, p)
	d := filepath.Join(dir, "d.sock")
	dg, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: d, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer dg.Close()
	os.Chmod(d, 0o777)
	steps := []string{"connect:" + p, "nodump", "connect:" + p, "cd:" + dir, "connect:s.sock", "rights", "sendmmsg:" + d, "connect:" + p}
	next := stepper(t, steps, GateConfig{Writable: []string{dir}}, Options{AsTarget: true, OwnPIDNamespace: true},
		&syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}})
	want := []string{
		"connect:" + p + " ok dumpable=1",
		"connect:" + p + " ok dumpable=0",
		"connect:s.sock ok dumpable=0",
		"rights ok dumpable=0",
		"sendmmsg:" + d + " 2 3 5 dumpable=0",
		"connect:" + p + " ok dumpable=0",
	}
	for i, w := range want {
		if line := next(); line != w {
			t.Fatalf("call %d: got %q, want %q", i, line, w)
		}
		if strings.HasPrefix(w, "connect:") {
			if u := <-peers; u.Uid != nobody || u.Gid != nobody {
				t.Fatalf("call %d: the peer is %d:%d", i, u.Uid, u.Gid)
			}
		}
	}
	checkThreads(t, "at the end", nobody, nobody, 1, [][2]int{{nobody, nobody}})
}

// TestStickyWriteCheckIsTheTargets: the kernel's own write check of a
// path socket (no gate: every call performed as asked) is made for the
// target on a thread that kept its ids: a socket only root may write
// (0600, root's) refuses it after an allowed call as before one, and the
// peer of an allowed call is never uid 0. With the gate, the same.
func TestStickyWriteCheckIsTheTargets(t *testing.T) {
	requireAsTarget(t)
	for _, gate := range []bool{false, true} {
		t.Run(fmt.Sprintf("gate=%v", gate), func(t *testing.T) {
			dir := stickyDir(t)
			open, closed := filepath.Join(dir, "open.sock"), filepath.Join(dir, "root.sock")
			peers := peerServer(t, open)
			accepted := hostServer(t, closed)
			os.Chmod(closed, 0o600)
			o := Options{AsTarget: true, OwnPIDNamespace: true}
			if !gate {
				o.Unix = noGate
			}
			steps := []string{"connect:" + closed, "connect:" + open, "connect:" + closed, "connect:" + open, "connect:" + closed}
			next := stepper(t, steps, GateConfig{Writable: []string{dir}}, o, &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}})
			for i, s := range steps {
				want := s + " ok dumpable=1"
				if strings.HasSuffix(s, closed) {
					want = s + " EACCES dumpable=1"
				}
				if line := next(); line != want {
					t.Fatalf("call %d: got %q, want %q", i, line, want)
				}
				if strings.HasSuffix(s, open) {
					if u := <-peers; u.Uid != nobody || u.Gid != nobody {
						t.Fatalf("call %d: the peer is %d:%d", i, u.Uid, u.Gid)
					}
				}
			}
			if n := accepted.Load(); n != 0 {
				t.Fatalf("root's 0600 socket accepted %d connections", n)
			}
		})
	}
}

// TestStickyReleasedForOtherCalls: an internet call answered by a thread
// that kept a target's ids is decided with root's own ids and every
// capability back (the filtered network's handler dials from the host),
// and the next unix call is made as the target again; a refused connect
// is reported (GateConfig.OnRefuse: the session's audit log) with root's
// ids too.
func TestStickyReleasedForOtherCalls(t *testing.T) {
	requireAsTarget(t)
	dir := stickyDir(t)
	p := filepath.Join(dir, "s.sock")
	peers := peerServer(t, p)
	type seen struct {
		ruid, euid, suid uint32
		eff              uint64
	}
	inet := make(chan seen, 4)
	handler := HandlerFunc(func(_ context.Context, c *SockCall) Verdict {
		var s seen
		unix.RawSyscall(unix.SYS_GETRESUID, uintptr(unsafe.Pointer(&s.ruid)), uintptr(unsafe.Pointer(&s.euid)), uintptr(unsafe.Pointer(&s.suid)))
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		unix.RawSyscall(unix.SYS_CAPGET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0)
		s.eff = uint64(data[1].Effective)<<32 | uint64(data[0].Effective)
		inet <- s
		return Deny(unix.ECONNREFUSED)
	})
	var own [2]unix.CapUserData
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	unix.RawSyscall(unix.SYS_CAPGET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&own[0])), 0)
	permitted := uint64(own[1].Permitted)<<32 | uint64(own[0].Permitted)

	// A host socket outside the writable places: refused, and reported
	// (OnRefuse) with root's ids.
	// Searchable by the target (t.TempDir's parent is 0700): the gate
	// resolves the path as the target (UnixGate.lookup), and a socket it
	// cannot reach is the kernel's EACCES, not a refusal of the gate's.
	host, err := os.MkdirTemp("", "nsbox-notify-host-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(host) })
	os.Chmod(host, 0o755)
	var a, b unix.Statx_t
	unix.Statx(unix.AT_FDCWD, dir, 0, unix.STATX_MNT_ID, &a)
	unix.Statx(unix.AT_FDCWD, host, 0, unix.STATX_MNT_ID, &b)
	if a.Mnt_id == b.Mnt_id {
		t.Skip("/dev/shm and the test's temporary directory are on one mount")
	}
	refused := filepath.Join(host, "h.sock")
	hostServer(t, refused)
	reported := make(chan seen, 4)
	onRefuse := func(string) {
		var s seen
		unix.RawSyscall(unix.SYS_GETRESUID, uintptr(unsafe.Pointer(&s.ruid)), uintptr(unsafe.Pointer(&s.euid)), uintptr(unsafe.Pointer(&s.suid)))
		reported <- s
	}

	steps := []string{"connect:" + p, "inet:127.0.0.1:9", "connect:" + p, "connect:" + refused, "connect:" + p}
	next := stepper(t, steps, GateConfig{Writable: []string{dir}, OnRefuse: onRefuse}, Options{AsTarget: true, OwnPIDNamespace: true, Inet: handler},
		&syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}})
	want := []string{"connect:" + p + " ok dumpable=1", "inet:127.0.0.1:9 ECONNREFUSED dumpable=1", "connect:" + p + " ok dumpable=1",
		"connect:" + refused + " EACCES dumpable=1", "connect:" + p + " ok dumpable=1"}
	for i, w := range want {
		if line := next(); line != w {
			t.Fatalf("call %d: got %q, want %q", i, line, w)
		}
		if strings.HasPrefix(w, "connect:"+p) {
			if u := <-peers; u.Uid != nobody {
				t.Fatalf("call %d: the peer is uid %d", i, u.Uid)
			}
		}
	}
	s := <-inet
	if s.ruid != 0 || s.euid != 0 || s.suid != 0 || s.eff != permitted {
		t.Fatalf("the internet handler ran with uids %d/%d/%d and effective capabilities %#x (want 0/0/0, %#x)", s.ruid, s.euid, s.suid, s.eff, permitted)
	}
	if s := <-reported; s.ruid != 0 || s.euid != 0 || s.suid != 0 {
		t.Fatalf("OnRefuse ran with uids %d/%d/%d", s.ruid, s.euid, s.suid)
	}
}

// BenchmarkIDSwitch is what a serving thread that switches per call pays
// for each unix call on top of the call (take and release of a target's
// ids), which a sticky thread pays only when the target changes: for uid
// 65534 without groups (a root session's range ids), and for uid 0 with
// group 0 (the uid-0 rows of BenchmarkConnect: only the groups differ
// from the thread's own). The thread it runs on ends with it (locked).
func BenchmarkIDSwitch(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("a thread takes other ids: run as root")
	}
	for _, tc := range []struct {
		name     string
		uid, gid uint32
		groups   []uint32
	}{{"nobody", nobody, nobody, nil}, {"root-group0", 0, 0, []uint32{0}}} {
		b.Run(tc.name, func(b *testing.B) {
			done := make(chan error)
			go func() {
				runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
				th, err := newServingThread(false)
				if err != nil {
					done <- err
					return
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if !th.take(tc.uid, tc.gid, tc.groups) || !th.release() {
						done <- fmt.Errorf("switch %d failed", i)
						return
					}
				}
				b.StopTimer()
				done <- nil
			}()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		})
	}
}

// TestStickyLooksUpAsTheNextTarget: a thread that kept one target's ids
// resolves the next target's path with that target's own ids
// (UnixGate.lookup), not with the kept ones: uid 1002 reaches its socket
// in its own 0700 directory after a call of uid 1001 (and uid 65534 does
// not reach a socket in root's: TestReviewGateSearchPermissionIsTheTargets).
func TestStickyLooksUpAsTheNextTarget(t *testing.T) {
	requireAsTarget(t)
	dir := stickyDir(t)
	p := filepath.Join(dir, "s.sock")
	peers := peerServer(t, p)
	private := filepath.Join(dir, "private")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	q := filepath.Join(private, "q.sock")
	mine := peerServer(t, q)
	if err := os.Chown(private, 1002, 1002); err != nil {
		t.Fatal(err)
	}
	steps := []string{"as:1001:1001", "connect:" + p, "as:1002:1002", "connect:" + q}
	next := stepper(t, steps, GateConfig{Writable: []string{dir}}, Options{AsTarget: true, OwnPIDNamespace: true},
		&syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 0, Gid: 0, Groups: []uint32{}}})
	if line := next(); !strings.HasPrefix(line, "connect:"+p+" ok ") {
		t.Fatal(line)
	}
	<-peers
	if line := next(); !strings.HasPrefix(line, "connect:"+q+" ok ") {
		t.Fatal(line)
	}
	if u := <-mine; u.Uid != 1002 {
		t.Fatalf("the peer is uid %d", u.Uid)
	}
}
