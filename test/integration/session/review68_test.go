package session

import (
	"context"
	"errors"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nsbox/nsbox/pkg/sandbox"
	"golang.org/x/sys/unix"
)

// TestReview68DeadIdleSessionNotHandedOut
//
// Finding (LOW): a pool's idle sandbox whose worker had just died (killed
// by a limit, a watchdog, an OOM) was handed out for the next call until
// its worker was reaped, ~1 ms later: the call failed ("session closed")
// and the loss was neither counted nor reported. Now take() asks the
// worker's pidfd, so the call runs in another sandbox and every loss is
// reported.
func TestReview68DeadIdleSessionNotHandedOut(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		var mu sync.Mutex
		lost := 0
		p, err := sandbox.NewPool(sandbox.Policy{}, 1, sandbox.WithPoolErrors(func(f *sandbox.PoolFailure) {
			mu.Lock()
			defer mu.Unlock()
			if f.Op == "lost" && errors.Is(f.Err, sandbox.ErrPoolSandboxDied) {
				lost++
			}
		}))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		const rounds = 5
		for i := 0; i < rounds; i++ {
			// One idle sandbox, and no other child (the one lost in the
			// round before may still be closing). LastError is set by
			// design here: waitReady would stop at it.
			var kids []string
			deadline := time.Now().Add(60 * time.Second)
			for {
				kids = childPids(os.Getpid())
				if p.Stats().Ready == 1 && len(kids) == 1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("round %d: no single idle worker: children %v, stats %+v", i, kids, p.Stats())
				}
				time.Sleep(5 * time.Millisecond)
			}
			pid, _ := strconv.Atoi(kids[0])
			if pid <= 1 {
				t.Fatalf("round %d: bad worker pid %q", i, kids[0])
			}
			// Our own unreaped child: the pid cannot name another process.
			pidfd, err := unix.PidfdOpen(pid, 0)
			if err != nil {
				t.Fatalf("round %d: pidfd_open %d: %v", i, pid, err)
			}
			if err := unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0); err != nil {
				t.Fatalf("round %d: kill %d: %v", i, pid, err)
			}
			// Until it has exited (the pool may reap it meanwhile).
			pfd := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
			for {
				if n, err := unix.Poll(pfd, -1); n > 0 || err != nil && !errors.Is(err, unix.EINTR) {
					break
				}
			}
			unix.Close(pidfd)
			res, err := p.Exec(context.Background(), sandbox.Command{Argv: []string{"/bin/true"}})
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("round %d: the call after its idle sandbox died failed: %v (exit %d)", i, err, res.ExitCode)
			}
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			mu.Lock()
			n := lost
			mu.Unlock()
			if n == rounds {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d idle sandboxes killed, %d losses reported; stats %+v", rounds, n, p.Stats())
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}
