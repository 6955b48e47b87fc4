package notify

import (
	"encoding/binary"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A root supervisor's calls made as the target (astarget.go).

// TestAsTargetPeerSeesTargetIDs: a root supervisor with AsTarget makes
// the call with the target's host ids (the listener's SO_PEERCRED names
// the sandbox's uid, not root), call after call, and its threads hold
// their own ids again once each call is made.
func TestAsTargetPeerSeesTargetIDs(t *testing.T) {
	requireAsTarget(t)
	// On a path every user may search (t.TempDir's parent is 0700): the
	// gate resolves it as the target (UnixGate.lookup).
	dir := stickyDir(t)
	p := filepath.Join(dir, "s.sock")
	l, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	os.Chmod(p, 0o777)
	type peer struct {
		u      unix.Ucred
		groups string
	}
	peers := make(chan peer, 8)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			raw, _ := c.(*net.UnixConn).SyscallConn()
			raw.Control(func(fd uintptr) {
				if u, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
					// SO_PEERGROUPS: the supplementary groups, as
					// 32-bit ids.
					b := make([]byte, 4*64)
					n := uint32(len(b))
					var gs []string
					if _, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, fd, unix.SOL_SOCKET, unix.SO_PEERGROUPS, uintptr(unsafe.Pointer(&b[0])), uintptr(unsafe.Pointer(&n)), 0); e == 0 {
						for i := 0; i+4 <= int(n); i += 4 {
							gs = append(gs, strconv.Itoa(int(binary.NativeEndian.Uint32(b[i:]))))
						}
					}
					peers <- peer{*u, strings.Join(gs, ",")}
				}
			})
			c.Close()
		}
	}()
	const calls = 3
	// A supplementary group too: the thread takes it for the call.
	lines := runAsTargetChild(t, "connect", strings.Fields(strings.Repeat(p+" ", calls)), dir,
		&syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{4242}}})
	if len(lines) != calls {
		t.Fatalf("%q", lines)
	}
	for i, line := range lines {
		if line != p+" ok" {
			t.Fatalf("%q", lines)
		}
		pr := <-peers
		if u := pr.u; u.Uid != nobody || u.Gid != nobody {
			t.Fatalf("connect %d: the peer is uid %d gid %d, not the target's %d", i, u.Uid, u.Gid, nobody)
		}
		if pr.groups != "4242" {
			t.Fatalf("connect %d: the peer's groups are %q, not the target's 4242", i, pr.groups)
		}
	}
	// Every thread of this process (the Server's among them, still
	// running) holds root's ids again.
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/status")
		if err != nil {
			continue // ended meanwhile
		}
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, _ := strings.Cut(line, ":"); k == "Uid" || k == "Gid" {
				if f := strings.Fields(v); len(f) != 4 || f[0] != "0" || f[1] != "0" || f[2] != "0" || f[3] != "0" {
					t.Fatalf("thread %s: %s", task.Name(), line)
				}
			}
		}
	}
}

// TestParseStatus: the ids, groups and capabilities of this process's own
// /proc/self/status, as the kernel writes them, and malformed files
// refused (the gate then fails closed).
func TestParseStatus(t *testing.T) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip(err)
	}
	st, err := parseStatus(b)
	if err != nil {
		t.Fatal(err)
	}
	if st.uid[1] != uint32(os.Geteuid()) || st.gid[1] != uint32(os.Getegid()) {
		t.Fatalf("uid %v gid %v", st.uid, st.gid)
	}
	groups, _ := os.Getgroups()
	if len(groups) != len(st.groups) {
		t.Fatalf("groups %v, want %v", st.groups, groups)
	}
	st, err = parseStatus([]byte("Name:\tx\nUid:\t1\t2\t3\t4\nGid:\t5\t6\t7\t8\nGroups:\t9 10 \nCapEff:\t0000000000000002\n"))
	if err != nil || st.uid != [4]uint32{1, 2, 3, 4} || st.gid != [4]uint32{5, 6, 7, 8} || len(st.groups) != 2 || st.groups[1] != 10 || st.capEff != 2 {
		t.Fatalf("%+v %v", st, err)
	}
	for _, bad := range []string{
		"Uid:\t1\t2\t3\t4\nCapEff:\t0\n",                            // no Gid
		"Uid:\t1\t2\t3\nGid:\t5\t6\t7\t8\nCapEff:\t0\n",             // three uids
		"Uid:\t1\t2\t3\t4\nGid:\t5\t6\t7\t8\n",                      // no CapEff
		"Uid:\t1\t2\t3\t4294967296\nGid:\t5\t6\t7\t8\nCapEff:\t0\n", // past 32 bits
		"Uid:\t1\t2\t3\t4\nGid:\t5\t6\t7\t8\nGroups:\t-1\nCapEff:\t0\n",
	} {
		if _, err := parseStatus([]byte(bad)); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}

const nobody = 65534

func requireAsTarget(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("AsTarget is a root supervisor's: run as root")
	}
	if err := Supported(); err != nil {
		t.Skip(err)
	}
}

// runAsTargetChild runs the child scenario mode with attr (another user),
// served by a root Server with AsTarget and a gate whose writable place is
// dir, and returns the child's lines.
func runAsTargetChild(t *testing.T, mode string, args []string, dir string, attr *syscall.SysProcAttr) []string {
	t.Helper()
	_, lines := runChildAttr(t, mode, args, GateConfig{Writable: []string{dir}}, Options{AsTarget: true}, attr)
	return lines
}

// TestAsTargetGroupsFollowSetgroups: the groups the Server keeps of a
// thread between its calls (creds) are dropped when the thread calls
// setgroups: a thread that gave up the one group that may write the
// socket is refused, and allowed again once it takes the group back.
func TestAsTargetGroupsFollowSetgroups(t *testing.T) {
	requireAsTarget(t)
	// On a path every user may search (t.TempDir's parent is 0700): the
	// gate resolves it as the target (UnixGate.lookup).
	dir := stickyDir(t)
	p := filepath.Join(dir, "s.sock")
	hostServer(t, p)
	// Only group 4242 may write it.
	if err := os.Chown(p, 0, 4242); err != nil {
		t.Fatal(err)
	}
	os.Chmod(p, 0o720)
	// CAP_SETGID as an ambient capability: the child changes its own
	// groups, as uid 65534.
	lines := runAsTargetChild(t, "groups", []string{p}, dir, &syscall.SysProcAttr{
		Credential:  &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{4242}},
		AmbientCaps: []uintptr{unix.CAP_SETGID},
	})
	want := []string{"with ok", "without EACCES", "again ok"}
	if strings.Join(lines, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q, want %q", lines, want)
	}
}

// TestFastCredsMatchStatus: a thread's credentials from PIDFD_GET_INFO,
// capget and its kept groups (fastCreds) are those its status shows; the
// first call reads the status, later ones do not, and none do once a
// setgroups was seen.
func TestFastCredsMatchStatus(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tid := unix.Gettid()
	srv := &Server{}
	call := credsCaller(t, tid, srv)
	first, read := call()
	if !read {
		t.Fatal("the first call did not read the status")
	}
	second, read := call()
	if read {
		if srv.noPidfdInfo.Load() {
			t.Skip("no PIDFD_GET_INFO (Linux 6.13)")
		}
		t.Fatal("a later call read the status again")
	}
	if !reflect.DeepEqual(first, second) {
		t.Fatalf("status %+v, fast %+v", first, second)
	}
	srv.groupsMoved.Store(true)
	if _, read := call(); !read {
		t.Fatal("after a setgroups, the status was not read")
	}
}

// TestFastCredsAreTheThreadsNotTheLeaders: a thread that is not its
// group's leader and holds ids and groups of its own (raw setresuid and
// setgroups change one thread): its PIDFD_GET_INFO ids and capget
// capabilities are its own, not the leader's, and equal its status.
func TestFastCredsAreTheThreadsNotTheLeaders(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a thread takes other ids: run as root")
	}
	type ready struct {
		tid int
		err error
	}
	got := make(chan ready)
	done := make(chan struct{})
	var thread func()
	thread = func() {
		// Locked and never unlocked: Go ends this thread with the
		// goroutine, so its ids reach no other goroutine.
		runtime.LockOSThread()
		tid := unix.Gettid()
		if tid == unix.Getpid() {
			// The leader: kept locked here until the test ends, so
			// that the next goroutine runs on another thread.
			go thread()
			<-done
			return
		}
		g := []uint32{4242, 4343}
		if e := setGroups(g); e != 0 {
			got <- ready{err: e}
			return
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, 1234, 1235, 0); e != 0 {
			got <- ready{err: e}
			return
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, 2345, 2346, 0); e != 0 {
			got <- ready{err: e}
			return
		}
		got <- ready{tid: tid}
		<-done
	}
	go thread()
	r := <-got
	defer close(done)
	if r.err != nil {
		t.Skip(r.err)
	}
	call := credsCaller(t, r.tid, &Server{})
	first, read := call()
	if !read {
		t.Fatal("the first call did not read the status")
	}
	second, read := call()
	if read {
		t.Skip("no PIDFD_GET_INFO (Linux 6.13)")
	}
	if first.uid != [4]uint32{2345, 2346, 0, 2346} || first.gid != [4]uint32{1234, 1235, 0, 1235} {
		t.Fatalf("status: uid %v gid %v", first.uid, first.gid)
	}
	if !reflect.DeepEqual(first.groups, []uint32{4242, 4343}) {
		t.Fatalf("status: groups %v", first.groups)
	}
	if !reflect.DeepEqual(first, second) {
		t.Fatalf("status %+v, fast %+v", first, second)
	}
}

// credsCaller returns a function that makes one call's creds for thread
// tid through a kept entry of it (as openProc keeps one) on srv, and says
// whether that call read the thread's status. It skips where the kernel
// has no thread pidfds (the entries are not kept there).
func credsCaller(t *testing.T, tid int, srv *Server) func() (*procStatus, bool) {
	t.Helper()
	pidfd, exact, err := openPidfd(tid)
	if err != nil {
		t.Fatal(err)
	}
	if !exact {
		unix.Close(pidfd)
		t.Skip("no PIDFD_THREAD (Linux 6.9): thread entries are not kept")
	}
	dir, err := unix.Open("/proc/"+strconv.Itoa(tid), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(pidfd)
		t.Fatal(err)
	}
	p := &proc{pidfd: pidfd, dir: dir, status: -1, root: -1, refs: 1, exact: true}
	t.Cleanup(p.close)
	return func() (*procStatus, bool) {
		c := &SockCall{Pid: tid, proc: p, srv: srv}
		st, err := c.creds()
		if err != nil {
			t.Fatal(err)
		}
		return st, c.statusBuf != nil
	}
}
