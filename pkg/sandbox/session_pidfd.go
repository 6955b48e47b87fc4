package sandbox

// The worker's process as the supervisor holds it: a pidfd taken while it
// is still an unreaped child, its reap, and its fds.

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// holdWorker takes a pidfd of the worker, s.pid, which must still be the
// caller's unreaped child (so that the pid is the worker's, whatever
// happened to it: a zombie keeps its pid). Nothing takes the worker's fds
// by its pid number after that: a worker that died during setup and was
// reaped leaves a pid the kernel may give to any process, whose fds
// pidfd_getfd would then hand the supervisor (found by review: a pidfd
// opened from the number, then a check that the worker had not been
// reaped, left a window between the reap and the check).
func (s *Session) holdWorker() {
	s.pidfdMu.Lock()
	defer s.pidfdMu.Unlock()
	if fd, err := unix.PidfdOpen(s.pid, 0); err == nil {
		s.workerPidfd, s.hasPidfd = fd, true
	}
}

// waitExit reaps proc, our own child, once it has exited. It waits for
// that on the runtime's poller (a pidfd turns readable when its process
// exits), not in os.Process.Wait's waitid(2): a goroutine blocked in a
// system call keeps its P, and with the supervisor's other long waits
// (the serving thread's poll, the channel's recvmsg) a GOMAXPROCS=2
// process had no idle P left, so the runtime's monitor took Ps back and
// woke every 20 µs through the start (benchmarks-history.md, "The tenth
// stop"). Where the pidfd cannot be polled, Wait blocks as before.
func waitExit(proc *os.Process) (*os.ProcessState, error) {
	// Our unreaped child: its pid names no other process until Wait.
	if fd, err := unix.PidfdOpen(proc.Pid, unix.PIDFD_NONBLOCK); err == nil {
		f := os.NewFile(uintptr(fd), "pidfd")
		if rc, err := f.SyscallConn(); err == nil {
			rc.Read(func(fd uintptr) bool {
				p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
				n, err := unix.Poll(p, 0)
				return err != nil || n > 0
			})
		}
		f.Close()
	}
	return proc.Wait()
}

// reaped records the worker's end: its pidfd is closed (under pidfdMu, so
// never while workerFD uses it), then s.exited.
func (s *Session) reaped(st *os.ProcessState, err error) {
	s.pidfdMu.Lock()
	if s.hasPidfd {
		unix.Close(s.workerPidfd)
		s.hasPidfd = false
	}
	s.pidfdMu.Unlock()
	s.waitErr = waitError(st, err)
	close(s.exited)
}

// workerExited reports whether the worker has ended, reaped or not: its
// pidfd polls readable from its exit on, before waitExit reaps it and
// Done closes.
func (s *Session) workerExited() bool {
	select {
	case <-s.Done():
		return true
	default:
	}
	s.pidfdMu.Lock()
	defer s.pidfdMu.Unlock()
	if !s.hasPidfd {
		return false
	}
	p := []unix.PollFd{{Fd: int32(s.workerPidfd), Events: unix.POLLIN}}
	n, err := unix.Poll(p, 0)
	return err == nil && n > 0
}

// errWorkerGone: the worker exited before its fd could be taken.
var errWorkerGone = errors.New("the worker exited")

// workerFD copies the worker's fd n (pidfd_getfd), through the pidfd
// taken when it was spawned.
func (s *Session) workerFD(n int) (int, error) {
	s.pidfdMu.Lock()
	defer s.pidfdMu.Unlock()
	if !s.hasPidfd {
		return -1, errWorkerGone
	}
	return unix.PidfdGetfd(s.workerPidfd, n, 0)
}
