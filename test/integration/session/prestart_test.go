package session

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/pkg/ipc"
	"github.com/nsbox/nsbox/pkg/namespaces"
	"github.com/nsbox/nsbox/pkg/sandbox"
)

// gone reports whether no process has pid: a reaped worker. (A pid reused
// within the test's few milliseconds would read as alive and fail the test,
// never pass it wrongly.)
func gone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// interfaces lists the network interfaces a session's commands see.
func interfaces(t *testing.T, s *sandbox.Session) []string {
	t.Helper()
	res := sh(t, s, "tail -n +3 /proc/net/dev | cut -d: -f1")
	if res.ExitCode != 0 {
		t.Fatalf("reading /proc/net/dev: exit %d, %s", res.ExitCode, res.Stderr)
	}
	return strings.Fields(string(res.Stdout))
}

func TestPrestartedWorkerIsAdopted(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		p := sandbox.Policy{}
		w := sandbox.Prestart(sandbox.HintFor(p))
		pid := w.Pid()
		if pid <= 0 {
			t.Fatal("the prestarted worker did not start")
		}
		s := start(t, p, sandbox.WithPrestarted(w))
		if s.Pid() != pid {
			t.Fatalf("session worker %d, prestarted worker %d: not adopted", s.Pid(), pid)
		}
		if got := interfaces(t, s); len(got) != 1 || got[0] != "lo" {
			t.Fatalf("interfaces %v, want only lo", got)
		}
		if res := sh(t, s, "cat /proc/1/cmdline; echo; hostname"); string(res.Stdout) != "nsbox-init\x00\nnsbox\n" {
			t.Fatalf("PID 1 and hostname: %q", res.Stdout)
		}
		if got := pidWithin(t, w); got != pid {
			t.Fatalf("Pid() after Start = %d, want %d", got, pid)
		}
		w.Discard() // Start owns it: a no-op
		if res := sh(t, s, "echo still"); strings.TrimSpace(string(res.Stdout)) != "still" {
			t.Fatalf("Discard after Start touched the session: %q", res.Stdout)
		}
	})
}

// pidWithin is w.Pid(), failing the test instead of hanging.
func pidWithin(t *testing.T, w *sandbox.Prestarted) int {
	t.Helper()
	got := make(chan int, 1)
	go func() { got <- w.Pid() }()
	select {
	case p := <-got:
		return p
	case <-time.After(10 * time.Second):
		t.Fatal("Prestarted.Pid did not return")
		return 0
	}
}

// A prestarted worker killed from outside before Start is not adopted: Start
// starts a fresh one.
func TestPrestartedWorkerKilledBeforeStartIsReplaced(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		w := sandbox.Prestart(sandbox.PrestartHint{})
		pid := w.Pid()
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); !gone(pid); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("killed worker %d was not reaped", pid)
			}
		}
		s := start(t, sandbox.Policy{}, sandbox.WithPrestarted(w))
		if s.Pid() == pid {
			t.Fatal("a dead worker was adopted")
		}
		if res := sh(t, s, "echo ok"); strings.TrimSpace(string(res.Stdout)) != "ok" {
			t.Fatalf("%q", res.Stdout)
		}
		w.Discard()
		if pidWithin(t, w) != pid {
			t.Fatal("Pid changed")
		}
	})
}

// A worker prestarted with the host's network must not serve a policy that
// asks for an isolated one: clone(2) fixed its namespaces.
func TestPrestartedWorkerWithOtherNamespacesIsReplaced(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		w := sandbox.Prestart(sandbox.PrestartHint{HostNetwork: true})
		pid := w.Pid()
		s := start(t, sandbox.Policy{}, sandbox.WithPrestarted(w))
		if s.Pid() == pid {
			t.Fatal("a worker in the host's network namespace was adopted for an isolated policy")
		}
		if !gone(pid) {
			t.Fatalf("the unsuitable prestarted worker %d is still there", pid)
		}
		if got := interfaces(t, s); len(got) != 1 || got[0] != "lo" {
			t.Fatalf("interfaces %v, want only lo", got)
		}

		// And the other way round: host network asked, isolated prestarted.
		host, err := os.ReadFile("/proc/net/dev")
		if err != nil {
			t.Fatal(err)
		}
		w = sandbox.Prestart(sandbox.PrestartHint{})
		pid = w.Pid()
		s = start(t, sandbox.Policy{Network: sandbox.NetworkHost}, sandbox.WithPrestarted(w))
		if s.Pid() == pid || !gone(pid) {
			t.Fatalf("isolated prestarted worker %d adopted or left running for a host-network policy (worker %d)", pid, s.Pid())
		}
		if got, want := len(interfaces(t, s)), strings.Count(string(host), "\n")-2; got != want {
			t.Fatalf("%d interfaces inside, the host has %d", got, want)
		}
	})
}

func TestPrestartedWorkerEndsWithAFailedStartOrDiscard(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		w := sandbox.Prestart(sandbox.PrestartHint{})
		pid := w.Pid()
		bad := sandbox.Policy{Mounts: []sandbox.Mount{{Kind: sandbox.MountBind, Source: "/nonexistent/nsbox-prestart", Dest: "/x"}}}
		if _, err := sandbox.Start(context.Background(), bad, sandbox.WithPrestarted(w)); err == nil {
			t.Fatal("Start with a missing mount source succeeded")
		}
		if !gone(pid) {
			t.Fatalf("prestarted worker %d survived a failed Start", pid)
		}

		w = sandbox.Prestart(sandbox.PrestartHint{})
		pid = w.Pid()
		w.Discard()
		if !gone(pid) {
			t.Fatalf("prestarted worker %d survived Discard", pid)
		}
		w.Discard()
		// A discarded Prestarted is not adopted: Start starts its own.
		s := start(t, sandbox.Policy{}, sandbox.WithPrestarted(w))
		if s.Pid() == pid {
			t.Fatal("a discarded worker was adopted")
		}
		if res := sh(t, s, "echo ok"); strings.TrimSpace(string(res.Stdout)) != "ok" {
			t.Fatalf("%q", res.Stdout)
		}
	})
}

// A worker the program spawned itself (as nsbox's CLI does before its Go
// runtime starts) is adopted like a prestarted one.
func TestAdoptWorkerSpawnedByTheProgram(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		sup, wk, err := ipc.Socketpair()
		if err != nil {
			t.Fatal(err)
		}
		spawned := make(chan int, 1)
		done := make(chan struct{})
		t.Cleanup(func() { close(done) })
		go func() {
			// The parent death signal's thread: kept until the test ends.
			runtime.LockOSThread()
			p, err := namespaces.Spawn(namespaces.Options{}, namespaces.SpawnArgs{
				Path: "/proc/self/exe", Argv: []string{"nsbox-init"}, Env: []string{"_NSBOX_INIT=1"}, Extra: wk})
			wk.Close()
			if err != nil {
				t.Error(err)
				spawned <- 0
				return
			}
			spawned <- p.Pid
			<-done
		}()
		pid := <-spawned
		if pid == 0 {
			return
		}
		w := sandbox.AdoptWorker(pid, sup, sandbox.PrestartHint{})
		s := start(t, sandbox.Policy{}, sandbox.WithPrestarted(w))
		if s.Pid() != pid {
			t.Fatalf("session worker %d, spawned worker %d: not adopted", s.Pid(), pid)
		}
		if res := sh(t, s, "cat /proc/1/cmdline; echo; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"); string(res.Stdout) != "nsbox-init\x00\nlo\n" {
			t.Fatalf("%q", res.Stdout)
		}
		s.Close()
		if !gone(pid) {
			t.Fatalf("adopted worker %d survived Close", pid)
		}
	})
}
