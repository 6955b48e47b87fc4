package notify

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// victimPy makes a process with the id argv[1] (clone3 with set_tid, so
// that the test does not have to wait for the id to come round), which
// prints its id and the address of an 8-byte buffer, waits for a line and
// prints the buffer in hex.
const victimPy = `
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
class Args(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in "flags pidfd child_tid parent_tid exit_signal stack stack_size tls set_tid set_tid_size cgroup".split()]
tid = (ctypes.c_int * 1)(int(sys.argv[1]))
a = Args(exit_signal=17, set_tid=ctypes.addressof(tid), set_tid_size=1)
r = libc.syscall(435, ctypes.byref(a), ctypes.sizeof(a))
if r < 0:
    print("error", ctypes.get_errno(), flush=True); sys.exit(1)
if r == 0:
    buf = ctypes.create_string_buffer(8)
    print(os.getpid(), ctypes.addressof(buf), flush=True)
    sys.stdin.readline()
    print(buf.raw.hex(), flush=True)
    os._exit(0)
os.waitpid(r, 0)
`

// TestWriteMemFollowsTheThreadNotItsNumber: sendmmsg's write back goes to
// the memory of the thread that made the call, never to whatever process
// has its id by then. A send can block in the supervisor while the
// sandbox kills the caller and its id is given to a host process (review
// finding: a write by pid, process_vm_writev, then wrote an
// attacker-chosen word into that process). The control write by number
// shows the id was reused.
func TestWriteMemFollowsTheThreadNotItsNumber(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("choosing a process id (clone3 set_tid) needs root")
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed")
	}
	old := exec.Command("sleep", "60")
	if err := old.Start(); err != nil {
		t.Fatal(err)
	}
	pid := old.Process.Pid
	pidfd, _, err := openPidfd(pid)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := unix.Open("/proc/"+strconv.Itoa(pid), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{pidfd: pidfd, dir: dir, status: -1, root: -1, refs: 1}
	defer p.close()
	old.Process.Kill()
	old.Wait()

	victim := exec.Command(py, "-c", victimPy, strconv.Itoa(pid))
	stdin, _ := victim.StdinPipe()
	stdout, _ := victim.StdoutPipe()
	victim.Stderr = os.Stderr
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	defer victim.Wait()
	defer stdin.Close()
	out := bufio.NewScanner(stdout)
	if !out.Scan() {
		t.Fatal("the victim said nothing")
	}
	var got int
	var addr uint64
	if _, err := fmt.Sscanf(out.Text(), "%d %d", &got, &addr); err != nil {
		if strings.HasPrefix(out.Text(), "error 17") { // EEXIST
			t.Skip("another process took the id meanwhile")
		}
		t.Fatalf("victim: %s", out.Text())
	}
	if got != pid {
		t.Fatalf("victim has id %d, want %d", got, pid)
	}
	c := &SockCall{Pid: pid, proc: p}
	defer func() {
		for _, fd := range c.later {
			unix.Close(fd)
		}
	}()
	if err := (&Server{}).writeMem(c, addr, []byte{1, 2, 3, 4}); err == nil {
		t.Error("writeMem wrote through a dead thread's entry")
	}
	// Control: a write by number reaches the new process.
	b := []byte{5, 6, 7, 8}
	local := []unix.Iovec{{Base: &b[0]}}
	local[0].SetLen(len(b))
	if _, err := unix.ProcessVMWritev(pid, local, []unix.RemoteIovec{{Base: uintptr(addr + 4), Len: 4}}, 0); err != nil {
		t.Fatalf("control write by number: %v", err)
	}
	stdin.Write([]byte("\n"))
	if !out.Scan() {
		t.Fatal("the victim said nothing")
	}
	if out.Text() != "0000000005060708" {
		t.Fatalf("victim's buffer %s, want 0000000005060708 (only the write by number)", out.Text())
	}
}
