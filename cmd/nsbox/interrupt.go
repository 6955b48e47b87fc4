package main

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// interruptSignals end a run early: the sandbox is killed whole, and nsbox
// then dies of the same signal, as the shell that sent it expects.
var interruptSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

// interrupt is a context that the first of interruptSignals cancels, and
// which remembers that signal.
type interrupt struct {
	context.Context
	sig  atomic.Value // syscall.Signal
	stop func()
}

func notifyInterrupt() *interrupt {
	ctx, cancel := context.WithCancel(context.Background())
	i := &interrupt{Context: ctx}
	ch := make(chan os.Signal, 1)
	for _, s := range interruptSignals {
		// A signal nsbox was started with ignored stays ignored: nohup's
		// SIGHUP, a background job's SIGINT (signal.Notify would
		// otherwise install a handler over SIG_IGN).
		if !signal.Ignored(s) {
			signal.Notify(ch, s)
		}
	}
	done := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			i.sig.Store(s.(syscall.Signal))
			cancel()
		case <-done:
		}
	}()
	i.stop = func() {
		signal.Stop(ch)
		close(done)
		cancel()
	}
	return i
}

// startInterrupt begins notifyInterrupt on a goroutine of its own and
// returns what waits for it. os/signal's set-up is slow here: a thread
// of its own, locked, and a round trip to it for every signal (with the
// Stop at the end, ~2 ms of a 25 ms run on these machines), which a run
// started this way overlaps with the policy's resolution. Until the
// handlers are in place the signals have their default effect, as they
// had before notifyInterrupt was called; one that arrives after that and
// before the caller waits is not lost: the interrupt it returns is
// cancelled already (a run that fails before it waits ends with its own
// error).
func startInterrupt() func() *interrupt {
	ch := make(chan *interrupt, 1)
	go func() { ch <- notifyInterrupt() }()
	return sync.OnceValue(func() *interrupt { return <-ch })
}

// Signal is the signal that interrupted the run, or 0.
func (i *interrupt) Signal() syscall.Signal {
	s, _ := i.sig.Load().(syscall.Signal)
	return s
}

// Stop releases the signals; a later one has its default effect again.
func (i *interrupt) Stop() { i.stop() }

// interrupted is the exit of a run that sig cut short: exit status 128+sig,
// and nsbox re-raises sig on itself after its cleanup (main), so that a
// calling shell sees "killed by SIGINT" and stops its loop, as it does for
// any program interrupted at the terminal.
func interrupted(sig syscall.Signal, msg string) *exitError {
	return &exitError{code: 128 + int(sig), msg: msg, signal: sig}
}

// dieOf ends the process by sig, with its default action. When sig is
// ignored (a background job of a non-interactive shell starts with SIGINT
// ignored), the caller's os.Exit follows.
func dieOf(sig syscall.Signal) {
	signal.Reset(sig)
	// Deferred cleanups have run; nothing is left to do but to die.
	unix.Kill(os.Getpid(), sig)
	// The runtime's handler, no longer notified, takes the default action
	// on whichever thread the kernel picked; give it that moment.
	time.Sleep(50 * time.Millisecond)
}

// signalName is the conventional name of sig: "SIGINT".
func signalName(sig syscall.Signal) string {
	if n := unix.SignalName(sig); n != "" {
		return n
	}
	return "signal " + sig.String()
}
