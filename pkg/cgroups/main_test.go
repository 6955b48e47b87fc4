package cgroups

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The test binary doubles as the processes the tests put into groups:
// NSBOX_CGTEST_HELPER selects what it does instead of running tests.
const helperEnv = "NSBOX_CGTEST_HELPER"

func TestMain(m *testing.M) {
	if h := os.Getenv(helperEnv); h != "" {
		os.Exit(runHelper(h))
	}
	os.Exit(m.Run())
}

// gate blocks until the parent has put us into the group (one byte or EOF
// on stdin), so nothing runs outside the limits.
func gate() { var b [1]byte; _, _ = os.Stdin.Read(b[:]) }

func runHelper(h string) int {
	switch h {
	case "alloc": // touch 512 MiB, 1 MiB at a time: the memory limit must stop it
		gate()
		var keep [][]byte
		for i := 0; i < 512; i++ {
			b := make([]byte, 1<<20)
			for j := 0; j < len(b); j += 4096 {
				b[j] = byte(i)
			}
			keep = append(keep, b)
		}
		fmt.Println("allocated", len(keep), "MiB")
		return 0
	case "spin": // burn CPU for NSBOX_CGTEST_MS of wall time
		gate()
		ms, _ := strconv.Atoi(os.Getenv("NSBOX_CGTEST_MS"))
		end := time.Now().Add(time.Duration(ms) * time.Millisecond)
		x := 0
		for time.Now().Before(end) {
			for i := 0; i < 100000; i++ {
				x += i
			}
		}
		return x & 0
	case "rlimit-mmap": // apply RLIMIT_DATA from NSBOX_CGTEST_AS, then map 256 MiB
		n, _ := strconv.ParseUint(os.Getenv("NSBOX_CGTEST_AS"), 10, 64)
		if err := unix.Setrlimit(unix.RLIMIT_DATA, &unix.Rlimit{Cur: n, Max: n}); err != nil {
			fmt.Println("setrlimit:", err)
			return 2
		}
		_, err := unix.Mmap(-1, 0, 256<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err == unix.ENOMEM {
			return 0
		}
		fmt.Println("mmap of 256 MiB under RLIMIT_DATA returned", err)
		return 3
	case "delegated":
		return runDelegatedHelper()
	}
	fmt.Fprintln(os.Stderr, "unknown helper", h)
	return 2
}

type helperProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *strings.Builder
}

// release opens the gate.
func (p *helperProc) release() { _, _ = p.stdin.Write([]byte{1}); _ = p.stdin.Close() }

// wait returns the signal that ended the process (0 if it exited).
func (p *helperProc) wait() (syscall.Signal, int) {
	err := p.cmd.Wait()
	ws, _ := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if err != nil && ws.Signaled() {
		return ws.Signal(), -1
	}
	return 0, ws.ExitStatus()
}

// startIn starts argv in m's group: cloned into it (CgroupFD) when the mode
// allows, else started, added with AddProcess, then released. An argv of
// nil means the test binary in helper mode h.
func startIn(t *testing.T, m *Manager, h string, env []string, argv ...string) *helperProc {
	t.Helper()
	if argv == nil {
		argv = []string{"/proc/self/exe"}
		env = append(env, helperEnv+"="+h)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	fd, useFD := m.CgroupFD()
	if useFD {
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &helperProc{cmd: cmd, stdin: stdin, out: out}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	if !useFD {
		if err := m.AddProcess(cmd.Process.Pid); err != nil {
			t.Fatalf("AddProcess: %v", err)
		}
	}
	p.release()
	return p
}

// newManager is New plus a Cleanup that destroys the group and checks that
// nothing is left on the host.
func newManager(t testing.TB, l Limits) *Manager {
	t.Helper()
	m, err := New("test", l)
	if err != nil {
		t.Fatalf("New(%+v): %v", l, err)
	}
	dirs := groupDirs(m)
	t.Cleanup(func() {
		if err := m.Destroy(); err != nil {
			t.Errorf("Destroy: %v", err)
		}
		for _, d := range dirs {
			if _, err := os.Stat(d); !os.IsNotExist(err) {
				t.Errorf("group %s left behind (%v)", d, err)
			}
		}
	})
	return m
}

// groupDirs lists the directories a Manager created.
func groupDirs(m *Manager) []string {
	switch b := m.b.(type) {
	case *v1Backend:
		return b.dirList()
	case *v2Backend:
		return []string{b.dir}
	}
	return nil
}
