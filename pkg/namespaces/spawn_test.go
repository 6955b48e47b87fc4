package namespaces

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// spawnSh runs script under /bin/sh through Spawn and returns its stdout.
// extra, when set, becomes fd 3.
func spawnSh(t *testing.T, o Options, script string, extra *os.File) (string, *os.ProcessState, int) {
	t.Helper()
	return spawnArgv(t, o, []string{"/bin/sh", "-c", script}, extra)
}

func spawnArgv(t *testing.T, o Options, argv []string, extra *os.File) (string, *os.ProcessState, int) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	done := make(chan error, 1)
	var (
		st  *os.ProcessState
		pid int
	)
	go func() {
		runtime.LockOSThread() // the parent death signal's thread
		p, err := Spawn(o, SpawnArgs{Path: argv[0], Argv: argv, Env: []string{"ONLY=this"}, Stdout: w, Extra: extra})
		w.Close()
		if err == nil {
			pid = p.Pid
			st, err = p.Wait()
		}
		done <- err
	}()
	out, _ := io.ReadAll(r)
	if err := <-done; err != nil {
		if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
			t.Skipf("user namespaces are not available here: %v", err)
		}
		t.Fatal(err)
	}
	return string(out), st, pid
}

func TestSpawnSetsUpTheWorkerProcess(t *testing.T) {
	extra, err := os.Open("/dev/zero")
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	// /proc is still the host's here (the worker mounts its own later):
	// /proc/self is each reading process, which inherited all of this from
	// the shell.
	out, st, pid := spawnSh(t, Options{}, `
echo pid=$$
echo sid=$(cut -d' ' -f6 /proc/self/stat)
set -- $(cat /proc/self/uid_map); echo uid_map=$*
set -- $(cat /proc/self/gid_map); echo gid_map=$*
echo setgroups=$(cat /proc/self/setgroups)
grep -E '^Sig(Blk|Ign):' /proc/self/status | tr -d '\t'
echo fd0=$(readlink /proc/self/fd/0) fd3=$(readlink /proc/self/fd/3)
echo ifaces=$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ')
echo env=$(env | grep -v '^PWD=' | sort | tr '\n' ' ')
`, extra)
	if !st.Success() {
		t.Fatalf("child failed: %v\n%s", st, out)
	}
	for _, want := range []string{
		"pid=1\n",                    // PID 1 of a new PID namespace
		fmt.Sprintf("sid=%d\n", pid), // its own session: no controlling terminal
		// No map yet: the parent writes it (WriteMaps, idmap_test.go).
		"uid_map=\n",
		"gid_map=\n",
		"SigBlk:0000000000000000\n",
		"SigIgn:0000000000000000\n",
		"fd0=/dev/null fd3=/dev/zero\n",
		"ifaces=lo\n",
		"env=ONLY=this\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
}

// Only fds 0 to 3 cross the exec, also one the test process inherited
// without O_CLOEXEC.
func TestSpawnPassesOnlyItsFDs(t *testing.T) {
	leak, err := os.Open("/dev/zero")
	if err != nil {
		t.Fatal(err)
	}
	defer leak.Close()
	if _, err := unix.FcntlInt(leak.Fd(), unix.F_SETFD, 0); err != nil {
		t.Fatal(err)
	}
	out, st, _ := spawnArgv(t, Options{HostNetwork: true}, []string{"/bin/ls", "/proc/self/fd"}, leak)
	// 3 is Extra (the same file, placed on purpose); 4 is ls's own directory.
	if got := strings.Fields(out); !st.Success() || strings.Join(got, " ") != "0 1 2 3 4" {
		t.Fatalf("fds in the child: %q (%v), want 0 1 2 3 4; fd %d was inheritable", got, st, leak.Fd())
	}
	// Without Extra, nothing at 3 either (3 is ls's directory then).
	out, st, _ = spawnArgv(t, Options{HostNetwork: true}, []string{"/bin/ls", "/proc/self/fd"}, nil)
	if got := strings.Fields(out); !st.Success() || strings.Join(got, " ") != "0 1 2 3" {
		t.Fatalf("fds in the child without Extra: %q (%v), want 0 1 2 3", got, st)
	}
}

func TestSpawnHostNetworkAndAmbientCaps(t *testing.T) {
	out, _, _ := spawnSh(t, Options{HostNetwork: true}, `
echo ifaces=$(tail -n +3 /proc/net/dev | wc -l)
grep '^CapAmb:' /proc/self/status | tr -d '\t'`, nil)
	host, err := os.ReadFile("/proc/net/dev")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("ifaces=%d\n", strings.Count(string(host), "\n")-2); !strings.Contains(out, want) {
		t.Errorf("host network: want %q in\n%s", want, out)
	}
	// The worker execs before its maps exist, root or not, so it is
	// nobody's root then: exactly the worker's set crosses the exec as
	// ambient capabilities.
	var want uint64
	for _, c := range []uint{unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN, unix.CAP_NET_BIND_SERVICE, unix.CAP_SETPCAP, unix.CAP_DAC_OVERRIDE, unix.CAP_SYS_CHROOT, unix.CAP_SETUID, unix.CAP_SETGID,
		unix.CAP_CHOWN, unix.CAP_DAC_READ_SEARCH, unix.CAP_FOWNER, unix.CAP_KILL} {
		want |= 1 << c
	}
	if w := fmt.Sprintf("CapAmb:%016x", want); !strings.Contains(out, w) {
		t.Errorf("want %q in\n%s", w, out)
	}
}

func TestSpawnReportsTheFailedStep(t *testing.T) {
	_, err := Spawn(Options{}, SpawnArgs{Path: "/nonexistent/nsbox-worker", Argv: []string{"x"}})
	var se *SpawnError
	if errors.Is(err, syscall.EPERM) {
		t.Skipf("user namespaces are not available here: %v", err)
	}
	if !errors.As(err, &se) || se.Step != "exec" || !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("got %v, want the exec step failing with ENOENT", err)
	}
}

// The child shares the parent's memory until it execs. Spawning while
// other goroutines allocate and collect must leave the Go process sound.
func TestSpawnUnderGarbageCollection(t *testing.T) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var keep [][]byte
			for {
				select {
				case <-stop:
					return
				default:
				}
				keep = append(keep, make([]byte, 64<<10))
				if len(keep) > 64 {
					keep = nil
					runtime.GC()
				}
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	for i := 0; i < 40; i++ {
		if out, st, _ := spawnSh(t, Options{HostNetwork: true}, "echo ok", nil); out != "ok\n" || !st.Success() {
			t.Fatalf("spawn %d: %q %v", i, out, st)
		}
	}
}

func TestCloneFlagsAgreeWithC(t *testing.T) {
	if got, want := cloneFlagsC, CloneFlags(Options{HostNetwork: true}); got != want {
		t.Fatalf("NSBOX_CLONE_FLAGS = %#x, CloneFlags = %#x", got, want)
	}
	if CloneFlags(Options{})&^cloneFlagsC != unix.CLONE_NEWNET {
		t.Fatal("an isolated network must add exactly CLONE_NEWNET")
	}
}

// A stage's fds 4 and 5 given without fd 3 (SpawnInHolder without Extra)
// leave nothing of the caller's at 3: close_range starts past the last fd
// given, and an empty slot below it kept what the process had there, an
// fd inherited without O_CLOEXEC crossing the exec (review 69).
func TestSpawnEmptySlotBelowLastFDIsClosed(t *testing.T) {
	// Whatever this process has at 3 (the runtime's), made inheritable
	// for the duration; it must not reach the child.
	flags, err := unix.FcntlInt(3, unix.F_GETFD, 0)
	if err != nil {
		t.Skipf("fd 3 is not open in the test process: %v", err)
	}
	leaked, err := os.Readlink("/proc/self/fd/3")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unix.FcntlInt(3, unix.F_SETFD, 0); err != nil {
		t.Fatal(err)
	}
	defer unix.FcntlInt(3, unix.F_SETFD, flags)
	a, err := os.Open("/dev/zero")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := os.Open("/dev/null")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// The shell reads its own fd table: it opens nothing at 3 for -c.
		argv := []string{"/bin/sh", "-c", `for n in 3 4 5; do echo "$n=$(readlink /proc/$$/fd/$n)"; done`}
		pid, err := spawn(Options{HostNetwork: true}, SpawnArgs{Path: argv[0], Argv: argv, Env: []string{"X=1"}, Stdout: w}, &stageArgs{userns: a, conn: b})
		w.Close()
		if err == nil {
			var ws unix.WaitStatus
			_, err = unix.Wait4(pid, &ws, 0, nil)
		}
		done <- err
	}()
	out, _ := io.ReadAll(r)
	if err := <-done; err != nil {
		if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
			t.Skipf("user namespaces are not available here: %v", err)
		}
		t.Fatal(err)
	}
	// (The shell's command substitution has a pipe of its own at 3.)
	if strings.Contains(string(out), "3="+leaked+"\n") || !strings.Contains(string(out), "4=/dev/zero\n") || !strings.Contains(string(out), "5=/dev/null\n") {
		t.Errorf("fds 3 to 5 in the child:\n%s\nwant 3 not %s (the test process's, inheritable), 4 /dev/zero, 5 /dev/null", out, leaked)
	}
}
