package sandbox

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The Landlock worker's teardown. With no PID namespace, nothing ends the
// session's processes with the session but the worker itself: it is their
// child subreaper, so every orphan of the session comes back to it, and
// it kills until none is left.

// killDescendantsDeadline bounds killDescendants' passes; the supervisor
// waits longer than this before it kills the worker (closeLandlock).
const killDescendantsDeadline = 10 * time.Second

// killDescendants kills every process the Landlock worker started and
// every orphan reparented to it, until none is left.
//
// It fails closed: when the children cannot be listed (/proc/self/task
// unreadable: an fd limit, a /proc gone), "none" is never assumed. It then
// kills the process groups of the commands it knows (known) and reports
// the failure.
func killDescendants(scoped bool, known []int) error {
	return killDescendantsOf(children, scoped, known)
}

// killDescendantsOf is killDescendants with the listing of children given.
//
// Killing the worker's children one generation a pass did not end a chain
// of processes that each fork their successor into a group of their own
// and exit: it outran the passes for the whole deadline and outlived the
// session, its pool and the server (review 37,
// TestReview37LandlockPerCallForkChainOutlivesCall). So with the signal
// scope (scoped) every pass starts with one kill(-1) from the worker's own
// domain, which the scope confines to the session: the kernel sends it to
// every process under tasklist_lock, the lock a fork takes to add its
// child, and a fork whose parent has a signal pending fails
// (kill_something_info, copy_process). Without the scope (before Linux
// 6.12) kill(-1) would reach every process of the uid: the passes are all
// there is, and the status lists the gap.
func killDescendantsOf(children func() ([]int, error), scoped bool, known []int) error {
	deadline := time.Now().Add(killDescendantsDeadline)
	for time.Now().Before(deadline) {
		if scoped {
			killScoped()
		}
		kids, err := children()
		if err != nil {
			for _, pid := range known {
				unix.Kill(-pid, unix.SIGKILL)
				unix.Kill(pid, unix.SIGKILL)
			}
			reapAll()
			return fmt.Errorf("list the worker's children: %w", err)
		}
		if len(kids) == 0 {
			return nil
		}
		for _, pid := range kids {
			unix.Kill(pid, unix.SIGKILL)
			// Its process group too: a command is a group leader.
			unix.Kill(-pid, unix.SIGKILL)
		}
		reapAll()
		time.Sleep(time.Millisecond)
	}
	return errors.New("processes of the session were still alive after 10 s of killing")
}

// killScoped sends SIGKILL with kill(-1) from a thread other than the
// main one: the main thread (forkTid) is in the commands' domain and its
// filter refuses kill(-1); every other thread is in the worker's, whose
// signal scope lets kill(-1) reach the session's processes only.
func killScoped() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never the main thread: it is locked to main
		defer runtime.UnlockOSThread()
		// Only from a thread whose own domain keeps it from signalling
		// the supervisor (a process of the same uid outside the
		// sandbox): the setup's probe (llScoped) ran on the main thread,
		// in the commands' domain, and this thread may be in the
		// worker's; without a scope of its own, kill(-1) here would
		// reach every process of the uid (review 39's note).
		if unix.Gettid() != os.Getpid() && unix.Kill(os.Getppid(), 0) == unix.EPERM {
			unix.Kill(-1, unix.SIGKILL)
		}
	}()
	<-done
}

// reapAll reaps what died (the reaper goroutine may race us for it; either
// one reaping is fine) so that the next pass sees their orphans.
func reapAll() {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG|unix.WALL, nil)
		if err == unix.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
	}
}

// children lists the worker's children (of all its threads), from
// /proc/self/task/*/children (CONFIG_PROC_CHILDREN), zombies included. An
// error means they could not be listed, never that there are none.
func children() ([]int, error) {
	tids, err := workerTids()
	if err != nil {
		return nil, err
	}
	var out []int
	for _, tid := range tids {
		b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/children")
		if errors.Is(err, os.ErrNotExist) {
			continue // the thread ended meanwhile
		}
		if err != nil {
			return nil, err
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				out = append(out, pid)
			}
		}
	}
	return out, nil
}
