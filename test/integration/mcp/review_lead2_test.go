package mcpintegration

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Review of 6ee377d (cmd/nsbox/httpstores.go): run directories of `nsbox mcp
// --http` and their removal by the next server.

// lockedRunDirs lists the directories below DATA/nsbox/http-sessions that
// hold a lock file (whatever their name).
func lockedRunDirs(h *home) []string {
	parent := filepath.Join(h.data, "nsbox", "http-sessions")
	ents, _ := os.ReadDir(parent)
	var out []string
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		if _, err := os.Lstat(filepath.Join(parent, e.Name(), ".lock")); err == nil {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestReviewLead2HTTPStartRaceRemovesLiveRun: openHTTPStores makes its run
// directory (MkdirTemp "run-*"), then creates .lock (O_EXCL), then flocks it:
// three steps. A second server starting in between (two clients launching
// their servers at once, a supervisor restarting several) finds an unlocked
// .lock in a run-* directory, takes it for a dead server's, and removes the
// live server's run directory. The first server's flock then succeeds on
// the unlinked file (or fails with EWOULDBLOCK, and its sessions get no
// stores); it serves with a run directory that no longer exists. Its
// sessions' stores are re-created there by MkdirAll without a lock file,
// and any server started a minute later removes them under the live
// sessions (removeDeadHTTPRuns: "a directory without a lock older than
// httpRunStartup"). strace widens the window between the create and the
// flock (delay_enter on flock) so that the race happens every time.
func TestReviewLead2HTTPStartRaceRemovesLiveRun(t *testing.T) {
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("strace is not installed: it is what holds the first server between its lock file and its flock")
	}
	if out, err := exec.Command(strace, "-f", "-qq", "-o", "/dev/null", "-e", "trace=flock", "/bin/true").CombinedOutput(); err != nil {
		t.Skipf("strace cannot trace here: %v %s", err, out)
	}
	eachUser(t, func(t *testing.T, u user) {
		h := newHome(t, u)
		// Server A, held 5 s in its flock of the run directory's lock.
		a := h.mcpCmd(t, "--http", "127.0.0.1:0")
		a.Path = strace
		a.Args = append([]string{"strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=flock",
			"-e", "inject=flock:delay_enter=5000000"}, a.Args...)
		// Its own process group: strace detaches on a signal and leaves
		// nsbox running, so the cleanup signals both.
		if a.SysProcAttr == nil {
			a.SysProcAttr = &syscall.SysProcAttr{}
		}
		a.SysProcAttr.Setpgid = true
		aErr := &syncBuffer{}
		pr, pw := io.Pipe()
		a.Stderr = io.MultiWriter(aErr, pw)
		if err := a.Start(); err != nil {
			t.Fatal(err)
		}
		aExited := make(chan struct{})
		go func() { a.Wait(); pw.Close(); close(aExited) }()
		aServing := make(chan struct{})
		go func() {
			sc := bufio.NewScanner(pr)
			for sc.Scan() {
				if servingAt.MatchString(sc.Text()) {
					close(aServing)
					break
				}
			}
			io.Copy(io.Discard, pr)
		}()
		t.Cleanup(func() {
			syscall.Kill(-a.Process.Pid, syscall.SIGINT)
			select {
			case <-aExited:
			case <-time.After(30 * time.Second):
				syscall.Kill(-a.Process.Pid, syscall.SIGKILL)
				<-aExited
			}
			if t.Failed() {
				t.Logf("server A stderr:\n%s", aErr)
			}
		})
		// A has created its lock file and is now in its (delayed) flock.
		deadline := time.Now().Add(time.Minute) // a deadlock guard only
		var aDirs []string
		for {
			if aDirs = lockedRunDirs(h); len(aDirs) > 0 {
				break
			}
			select {
			case <-aExited:
				t.Fatalf("server A exited before it made its run directory\nstderr: %s", aErr)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("server A made no run directory with a lock file\nstderr: %s", aErr)
			}
			time.Sleep(20 * time.Millisecond)
		}
		// Server B starts and serves (it cleaned up before serving).
		b := startHTTPServer(t, h)
		_ = b
		select {
		case <-aServing:
			t.Skip("server A finished its flock before server B looked: the window was missed, nothing shown")
		default:
		}
		select {
		case <-aServing:
		case <-aExited:
			t.Fatalf("server A exited\nstderr: %s", aErr)
		case <-time.After(2 * time.Minute):
			t.Fatalf("server A did not serve\nstderr: %s", aErr)
		}
		if strings.Contains(aErr.String(), "no memory and notepad stores for HTTP sessions") {
			t.Fatalf("server B's start took server A's stores away (A could not lock its run directory)\nA's stderr: %s", aErr)
		}
		if got := lockedRunDirs(h); len(got) != 2 {
			t.Fatalf("two live servers, locked run directories %q (A's was %q): server B removed the run directory of server A, which was between its lock file's creation and its flock (httpstores.go removeDeadHTTPRuns)", got, aDirs)
		}
	})
}

// TestReviewLead2HTTPStoresFIFOLockHangs: removeDeadHTTPRuns opens each run
// directory's .lock with O_RDONLY and no O_NONBLOCK, without checking what
// it is. A FIFO there blocks open(2) until a writer comes: the server never
// serves. Only the user's own uid can write DATA (every sandbox has it
// hidden), so this is hardening, not a sandbox escape: but one stray FIFO
// (a tool, a restore, a mistaken mkfifo) stops every later `nsbox mcp
// --http` of that user, silently, before it says where it listens.
func TestReviewLead2HTTPStoresFIFOLockHangs(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		h := newHome(t, u)
		run := filepath.Join(h.data, "nsbox", "http-sessions", "run-planted")
		if err := os.MkdirAll(run, 0o700); err != nil {
			t.Fatal(err)
		}
		for _, d := range []string{filepath.Join(h.data, "nsbox"), filepath.Dir(run), run} {
			u.chown(t, d)
		}
		fifo := filepath.Join(run, ".lock")
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		u.chown(t, fifo)

		s := &httpServer{stderr: &syncBuffer{}, exited: make(chan error, 1)}
		s.cmd = h.mcpCmd(t, "--http", "127.0.0.1:0")
		pr, pw := io.Pipe()
		s.cmd.Stderr = io.MultiWriter(s.stderr, pw)
		if err := s.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { s.exited <- s.cmd.Wait(); pw.Close() }()
		serving := make(chan bool, 1)
		go func() {
			sc := bufio.NewScanner(pr)
			ok := false
			for sc.Scan() {
				if servingAt.MatchString(sc.Text()) {
					ok = true
					break
				}
			}
			serving <- ok
			io.Copy(io.Discard, pr)
		}()
		defer func() {
			s.cmd.Process.Kill()
			<-s.exited
		}()
		select {
		case ok := <-serving:
			if !ok {
				t.Fatalf("nsbox mcp --http ended before serving\nstderr: %s", s.stderr)
			}
		case <-time.After(time.Minute): // a deadlock guard: it serves in well under a second
			// Unblock the server's open so that it can be reaped.
			if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				f.Close()
			}
			t.Fatalf("nsbox mcp --http hangs before serving: a FIFO at %s blocks its open of the lock file (httpstores.go removeDeadHTTPRuns, O_RDONLY without O_NONBLOCK)\nstderr: %s", fifo, s.stderr)
		}
	})
}
