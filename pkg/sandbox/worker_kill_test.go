package sandbox

import (
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCommandKillOnlyUnreaped: a timeout or cancel kills a command only
// while the reaper still waits for its pid. Once the pid is reaped (and
// so free for another process of the sandbox) but the exit not yet seen,
// kill sends nothing: here the number names a live process that is not
// the command's, which must survive.
func TestCommandKillOnlyUnreaped(t *testing.T) {
	other := exec.Command("sleep", "60")
	if err := other.Start(); err != nil {
		t.Skip(err)
	}
	defer func() { other.Process.Kill(); other.Wait() }()
	pid := other.Process.Pid
	r := &reaper{waiters: map[int]chan unix.WaitStatus{}}
	c := &command{res: spawnRes{pid: pid, pidfd: -1}, reaper: r}
	c.kill(true) // reaped already: not among the waiters
	if err := unix.Kill(pid, 0); err != nil {
		t.Fatalf("a pid no longer the command's was signalled: %v", err)
	}
	if c.timedOut {
		t.Error("a kill that sent nothing marked the command timed out")
	}
	// Among the waiters: the command's own, killed.
	r.waiters[pid] = make(chan unix.WaitStatus, 1)
	c.kill(true)
	st, _ := other.Process.Wait()
	if st == nil || st.Sys().(interface{ Signal() unix.Signal }).Signal() != unix.SIGKILL {
		t.Fatalf("the command was not killed: %v", st)
	}
	if !c.timedOut {
		t.Error("a timeout kill did not mark the command timed out")
	}
}
