package sandbox

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/nsbox/nsbox/pkg/ipc"
	"golang.org/x/sys/unix"
)

// quiesceTimeout bounds how long the worker waits for the processes it
// killed to be reaped. SIGKILL cannot be caught; only a process stuck in
// the kernel (uninterruptible I/O) takes longer, and the supervisor then
// ends the whole namespace anyway.
const quiesceTimeout = 2 * time.Second

// errNotQuiesced is the reply when processes remain after quiesceTimeout,
// or the worker is not PID 1 of a PID namespace (the Landlock backend).
var errNotQuiesced = errors.New("the sandbox's processes did not all end")

// quiesce handles typeQuiesce, on the main thread (HandleDirect: a
// handler goroutine waited for the Go scheduler to take back the P of the
// main thread's poll, 1.3 ms at the 90th percentile): every process of
// the sandbox but the worker is killed, and the reply comes once all are
// reaped, here, since the main thread is the one that reaps. The pool
// needs this before a call's result goes back: a background process of
// the call must not run on, writing into the shared workspace, while the
// next call does (review 56). Ending the whole namespace by killing PID 1
// gives the same, but only after the worker's own exit, whose unmapping of
// a Go process took ~1.7 ms a call.
func (w *worker) quiesce(ctx context.Context, req *ipc.Request) (any, error) {
	closeInts(req.FDs)
	if w.setup.Landlock || os.Getpid() != 1 {
		return nil, errNotQuiesced
	}
	// kill(-1) from PID 1 of a PID namespace reaches every process of the
	// namespace (and of those nested in it) except PID 1 itself (kill(2)).
	// SIGKILL: nothing inside can catch, block or outlive it.
	unix.Kill(-1, unix.SIGKILL)
	// A killed process is a zombie, its code stopped, until it is reaped
	// (every orphan is PID 1's child); kill(-1, 0) answers ESRCH once no
	// process but PID 1 is left. A process forked after the kill (by one
	// that had not yet been killed) is killed by the next round.
	deadline := time.Now().Add(quiesceTimeout)
	for delay := 20 * time.Microsecond; ; delay = min(2*delay, time.Millisecond) {
		w.reaper.reap() // a command's status goes to its waiter, as on SIGCHLD
		if unix.Kill(-1, 0) == unix.ESRCH {
			return nil, nil
		}
		if time.Now().After(deadline) {
			return nil, errNotQuiesced
		}
		time.Sleep(delay)
		unix.Kill(-1, unix.SIGKILL)
	}
}
