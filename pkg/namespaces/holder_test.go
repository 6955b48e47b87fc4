package namespaces

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The test binary links holder.c, so it can be a holder and a stage
// itself: TestMain plays the worker a stage hands on to (argv[0]
// "nsbox-init"), which prints what it was given once its maps are
// written (the test writes a byte to its fd 3 then).
func TestMain(m *testing.M) {
	if len(os.Args) > 0 && os.Args[0] == "nsbox-init" && os.Getenv("NSBOX_TEST_STAGE") == "1" {
		os.Exit(stagedWorker())
	}
	os.Exit(m.Run())
}

func stagedWorker() int {
	ch := os.NewFile(3, "go")
	b := make([]byte, 1)
	if n, _ := ch.Read(b); n != 1 {
		return 3 // never mapped: the test said no
	}
	fmt.Printf("pid=%d\n", os.Getpid())
	for _, f := range []string{"uid_map", "gid_map", "setgroups"} {
		d, _ := os.ReadFile("/proc/self/" + f)
		fmt.Printf("%s=%s\n", f, strings.Join(strings.Fields(string(d)), " "))
	}
	st, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(st), "\n") {
		for _, k := range []string{"CapEff:", "CapPrm:", "CapAmb:", "CapInh:"} {
			if v, ok := strings.CutPrefix(l, k); ok {
				fmt.Printf("%s%s\n", strings.TrimSuffix(k, ":"), "="+strings.TrimSpace(v))
			}
		}
	}
	sid, _ := os.ReadFile("/proc/self/stat")
	// /proc is the host's here: the session is the worker's host pid
	// when the worker leads a session of its own.
	f := strings.Fields(string(sid))
	fmt.Printf("own session=%v\n", f[0] == f[5])
	return 0
}

// holderID is a root caller's full range at an unused spot of the id
// space, for a holder the test starts in its own XDG_RUNTIME_DIR.
func holderID(start uint32) *Identity {
	m := []IDRange{{Inside: 0, Outside: start, Count: RangeSize}}
	return &Identity{Mode: ModeFull, UIDMap: m, GIDMap: m}
}

func startTestHolder(t *testing.T, id *Identity, idle time.Duration) *Holder {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the holder's maps are written directly by root here; root-less through newuidmap is tested in test/integration (identity_holder_test.go)")
	}
	// A directory of the test's alone, 0700 as the holder wants it (the
	// testing package makes 0755 ones): never the real /tmp/nsbox-UID.
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_RUNTIME_DIR", dir)
	h, err := StartHolder(id, idle)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(h.Path) != dir {
		t.Fatalf("the holder listens on %s, not in the test's directory %s", h.Path, dir)
	}
	// Ended with the test, by pidfd (its number could be another
	// process's once it left on its own).
	if pfd, err := unix.PidfdOpen(h.Pid, 0); err == nil {
		t.Cleanup(func() { unix.PidfdSendSignal(pfd, unix.SIGKILL, nil, 0); unix.Close(pfd) })
	}
	t.Cleanup(h.Close)
	return h
}

// runStaged spawns the test binary as a worker inside h, writes its maps
// with id through the stage (unless skipMaps), and returns its output and
// the stage's error.
func runStaged(t *testing.T, h *Holder, id *Identity) (string, error) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	goR, goW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	type res struct {
		st  *os.ProcessState
		err error
	}
	started := make(chan *Stage, 1)
	done := make(chan res, 1)
	go func() {
		runtime.LockOSThread() // the parent death signal's thread
		p, st, err := SpawnInHolder(Options{}, SpawnArgs{Path: "/proc/self/exe", Argv: []string{"nsbox-init"},
			Env: []string{"NSBOX_TEST_STAGE=1"}, Stdout: w, Extra: goR}, h)
		w.Close()
		goR.Close()
		started <- st
		if err != nil {
			done <- res{err: err}
			return
		}
		ps, err := p.Wait()
		done <- res{ps, err}
	}()
	st := <-started
	var mapErr error
	if st != nil {
		if mapErr = st.WriteMaps(id); mapErr == nil {
			goW.Write([]byte{1})
		}
	}
	goW.Close()
	out, _ := io.ReadAll(r)
	got := <-done
	if got.err != nil {
		t.Fatal(got.err)
	}
	if mapErr == nil && !got.st.Success() {
		t.Fatalf("worker: %v\n%s", got.st, out)
	}
	return string(out), mapErr
}

func TestHolderStageWritesTheWorkersMaps(t *testing.T) {
	id := holderID(400000)
	h := startTestHolder(t, id, 5*time.Second)
	if err := h.Suits(id); err != nil {
		t.Fatal(err)
	}
	out, err := runStaged(t, h, id)
	if err != nil {
		t.Fatal(err)
	}
	caps := fmt.Sprintf("%016x", workerCaps)
	for _, want := range []string{
		"pid=1\n", // PID 1 of its own PID namespace, made inside the holder's
		// Inside the worker, its map is read against H, which maps each
		// host id to itself: the same numbers as a map against the host.
		"uid_map=0 400000 65536\n", "gid_map=0 400000 65536\n", "setgroups=allow\n",
		// The worker's list, as an exec'd worker holds it: not the full
		// set its clone gave it in the new namespace.
		"CapEff=" + caps + "\n", "CapPrm=" + caps + "\n", "CapAmb=" + caps + "\n",
		"own session=true\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
}

func TestHolderStageSingleIDDeniesSetgroups(t *testing.T) {
	h := startTestHolder(t, holderID(410000), 5*time.Second)
	// One id of the holder's range: the worker's map is that one line
	// only, whatever else the holder maps, and setgroups is denied.
	single := &Identity{Mode: ModeSingle, UIDMap: []IDRange{{Inside: 0, Outside: 410007, Count: 1}}, GIDMap: []IDRange{{Inside: 0, Outside: 410007, Count: 1}}}
	out, err := runStaged(t, h, single)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "setgroups=deny\n") || !strings.Contains(out, "uid_map=0 410007 1\n") || !strings.Contains(out, "gid_map=0 410007 1\n") {
		t.Errorf("single-id map through a stage:\n%s", out)
	}
}

func TestHolderRefusesOtherIDs(t *testing.T) {
	h := startTestHolder(t, holderID(420000), 5*time.Second)
	// Half inside the holder's range, half beyond it.
	other := holderID(420000 + RangeSize/2)
	if err := h.Suits(other); !errors.Is(err, ErrHolderUnsuitable) {
		t.Fatalf("Suits(other range) = %v, want ErrHolderUnsuitable", err)
	}
	// The prestarted path checks in the stage, after the worker exists:
	// nothing is written and the worker, never mapped, exits.
	if _, err := runStaged(t, h, other); !errors.Is(err, ErrHolderUnsuitable) {
		t.Fatalf("stage with another range: err = %v, want ErrHolderUnsuitable", err)
	}
}

func TestHolderLeavesWhenIdle(t *testing.T) {
	id := holderID(440000)
	h := startTestHolder(t, id, time.Second)
	if _, err := os.Stat(h.Path); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(h.Path); st.Mode().Perm()&0o077 != 0 {
		t.Errorf("socket mode %v: no other user may connect", st.Mode().Perm())
	}
	// A deadlock guard, not a timing check: the holder leaves after one
	// idle second and takes its socket along.
	for i := 0; i < 200; i++ {
		if _, err := os.Stat(h.Path); os.IsNotExist(err) {
			if ConnectHolder() != nil {
				t.Fatal("a holder still answers after the socket went")
			}
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s still there 10 s after an idle time of 1 s", h.Path)
}

// A stopped holder (SIGSTOP, or stuck) does not hold a start up: the
// connect gives up after its timeout and the start goes on without it.
func TestHolderStoppedIsPassedBy(t *testing.T) {
	h := startTestHolder(t, holderID(450000), 30*time.Second)
	if err := syscall.Kill(h.Pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(h.Pid, syscall.SIGCONT)
	if got := ConnectHolder(); got != nil {
		got.Close()
		t.Fatal("a stopped holder answered")
	}
	syscall.Kill(h.Pid, syscall.SIGCONT)
	got := ConnectHolder()
	if got == nil || got.Pid != h.Pid {
		t.Fatalf("the holder, running again: %v", got)
	}
	got.Close()
}

// An answer on the holder's socket with two fds (or a cut one) is
// refused and leaves neither behind: each received fd was installed in
// the supervisor by recvmsg, and the malformed-answer path closed none
// (review 69).
func TestHolderConnectClosesFDsOfMalformedAnswer(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_RUNTIME_DIR", dir)
	path, err := HolderPath()
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(path) != dir {
		t.Fatalf("holder path %s is not in the test's directory %s", path, dir)
	}
	l, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(l)
	if err := unix.Bind(l, &unix.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(l, 4); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir, "marker")
	var sent []int
	for i := 0; i < 2; i++ {
		fd, err := unix.Open(marker, unix.O_RDONLY|unix.O_CREAT|unix.O_CLOEXEC, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		sent = append(sent, fd)
	}
	go func() {
		a, _, err := unix.Accept4(l, unix.SOCK_CLOEXEC)
		if err != nil {
			return
		}
		defer unix.Close(a)
		unix.Sendmsg(a, []byte{'n'}, unix.UnixRights(sent...), nil, 0)
	}()
	count := func() int {
		n := 0
		ents, _ := os.ReadDir("/proc/self/fd")
		for _, e := range ents {
			if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && l == marker {
				n++
			}
		}
		return n
	}
	if h := ConnectHolder(); h != nil {
		h.Close()
		t.Fatal("an answer with two fds was taken for a holder")
	}
	if n := count(); n != len(sent) {
		t.Errorf("%d fds of the marker are open after the refused answer, want %d (the sender's own): the received ones leaked", n, len(sent))
	}
}
