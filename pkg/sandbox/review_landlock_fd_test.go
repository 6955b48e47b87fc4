package sandbox_test

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/nsbox/nsbox/pkg/sandbox"
	"golang.org/x/sys/unix"
)

// TestMain lets this test binary be its own sandbox worker (re-executed
// as /proc/self/exe): sandbox.Init takes over there and returns at once
// here.
func TestMain(m *testing.M) {
	sandbox.Init()
	os.Exit(m.Run())
}

// TestReviewLandlockRulesetFDClosedTwice (outside review, issue 20; fails
// until fixed): startLandlockWorker wraps the ruleset fd in an *os.File
// (os.NewFile) only to hand it to os.StartProcess, and the "start worker"
// step then closes the same number with Ruleset.Close. The *os.File is
// left to the garbage collector, whose finalizer closes that number again
// later, by then another file's: in a long-lived supervisor (nsbox mcp, a
// Pool) a later session's channel, socket or pipe is closed under it.
func TestReviewLandlockRulesetFDClosedTwice(t *testing.T) {
	if err := sandbox.LandlockAvailable(); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := sandbox.Start(ctx, sandbox.Policy{
		Mounts:  []sandbox.Mount{{Kind: sandbox.MountBind, Source: dir, Dest: dir}},
		Cwd:     dir,
		Network: sandbox.NetworkNone,
	}, sandbox.WithLandlock())
	if errors.Is(err, sandbox.ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Take every free fd number up to past the highest open one: the
	// ruleset's old number, unless the session reuses it itself (then the
	// Exec below is what breaks), is now one of ours.
	high := 0
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil && n > high {
			high = n
		}
	}
	var ours []int
	defer func() {
		for _, fd := range ours {
			unix.Close(fd)
		}
	}()
	for len(ours) == 0 || ours[len(ours)-1] < high+8 {
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			t.Fatal(err)
		}
		ours = append(ours, p[0], p[1])
	}
	// Run every finalizer pending now: a second GC's sentinel runs only
	// after the batch the first GC queued.
	for i := 0; i < 2; i++ {
		done := make(chan struct{})
		sentinel := new([16]byte)
		runtime.SetFinalizer(sentinel, func(*[16]byte) { close(done) })
		sentinel = nil
		runtime.GC()
		select {
		case <-done:
		case <-time.After(time.Minute): // a deadlock guard only
			t.Fatal("finalizers did not run")
		}
	}
	for _, fd := range ours {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
			t.Errorf("fd %d, opened after the landlock session started, was closed under its owner (%v): the ruleset's *os.File finalizer closed its number a second time", fd, err)
		}
	}
	res, err := s.Exec(ctx, sandbox.Command{Argv: []string{"/bin/true"}})
	if err != nil || res.ExitCode != 0 {
		t.Errorf("the landlock session broke after a GC: exit %d, %v", res.ExitCode, err)
	}
}
