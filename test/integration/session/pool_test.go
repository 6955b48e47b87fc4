package session

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

// waitReady waits until the pool has n idle sessions (a deadlock guard, not
// a timing assertion: refills run in the background).
// readyPool starts a Pool of n sandboxes of the default policy, closed
// when the test ends (Close again is harmless), and waits until all are
// ready.
func readyPool(t *testing.T, n int) *sandbox.Pool {
	t.Helper()
	p, err := sandbox.NewPool(sandbox.Policy{}, n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	waitReady(t, p, n)
	return p
}

func waitReady(t *testing.T, p *sandbox.Pool, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for p.Stats().Ready < n {
		if st := p.Stats(); st.LastError != nil {
			t.Fatalf("refill failed: %v", st.LastError)
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool never reached %d ready sessions: %+v", n, p.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPoolNoStateCrossesCalls: each Pool.Exec runs in a sandbox of its own,
// so a file in /tmp, a background process and an environment change made by
// one call are gone for the next.
func TestPoolNoStateCrossesCalls(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		p := readyPool(t, 2)
		marker := strconv.Itoa(500000 + os.Getpid()%100000)
		ctx := context.Background()
		run := func(script string) sandbox.Result {
			t.Helper()
			res, err := p.Exec(ctx, sandbox.Command{Argv: []string{"/bin/sh", "-c", script}})
			if err != nil {
				t.Fatalf("Pool.Exec %q: %v", script, err)
			}
			return res
		}
		res := run(fmt.Sprintf("echo secret > /tmp/left; export LEFT=1; echo 'export LEFT=1' >> /tmp/.profile; setsid sleep %s & echo $$", marker))
		if res.ExitCode != 0 {
			t.Fatalf("first call: exit %d, stderr %q", res.ExitCode, res.Stderr)
		}
		res = run(fmt.Sprintf(`test -e /tmp/left && echo FILE; test -n "$LEFT" && echo ENV; for c in /proc/[0-9]*/cmdline; do tr '\0' ' ' < $c; echo; done | grep -c 'slee[p] %s' || true`, marker))
		out := string(res.Stdout)
		if strings.Contains(out, "FILE") || strings.Contains(out, "ENV") {
			t.Fatalf("state crossed from one call to the next: %q", out)
		}
		if strings.TrimSpace(out) != "0" {
			t.Fatalf("the first call's background process is visible to the second: %q", out)
		}
		if st := p.Stats(); st.Taken != 2 {
			t.Fatalf("stats %+v: want 2 sessions taken", st)
		}
		// Close waits for the sandboxes the calls used: their processes
		// are gone when it returns.
		if err := p.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if left := pidsOf("sleep\x00" + marker); len(left) > 0 {
			t.Fatalf("a background process outlived the pool: %v", left)
		}
	})
}

// TestPoolRefillsAndCloses: a pool refills after each call and Close ends
// every idle session it holds.
func TestPoolRefillsAndCloses(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		p, err := sandbox.NewPool(sandbox.Policy{}, 1)
		if err != nil {
			t.Fatal(err)
		}
		waitReady(t, p, 1)
		for i := 0; i < 3; i++ {
			res, err := p.Exec(context.Background(), sandbox.Command{Argv: []string{"/bin/true"}})
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("call %d: %v, exit %d", i, err, res.ExitCode)
			}
			waitReady(t, p, 1)
		}
		kids := childPids(os.Getpid())
		if len(kids) == 0 {
			t.Fatal("no idle worker found among this process's children")
		}
		if err := p.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		for _, k := range kids {
			pid, _ := strconv.Atoi(k)
			if isRunning(pid) {
				t.Fatalf("worker %d still running after Pool.Close", pid)
			}
		}
		if _, err := p.Exec(context.Background(), sandbox.Command{Argv: []string{"/bin/true"}}); !errors.Is(err, sandbox.ErrPoolClosed) {
			t.Fatalf("Exec after Close: %v, want ErrPoolClosed", err)
		}
	})
}

// TestPoolRefillErrorReported: a pool whose sessions cannot start says so
// in its stats and in Exec's error, instead of hanging or hiding it.
func TestPoolRefillErrorReported(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		p, missing := brokenPool(t)
		deadline := time.Now().Add(60 * time.Second)
		for p.Stats().RefillErrors == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("no refill error reported: %+v", p.Stats())
			}
			time.Sleep(5 * time.Millisecond)
		}
		if st := p.Stats(); st.LastError == nil || !strings.Contains(st.LastError.Error(), missing) {
			t.Fatalf("LastError %v does not name %s", st.LastError, missing)
		}
		if _, err := p.Exec(context.Background(), sandbox.Command{Argv: []string{"/bin/true"}}); err == nil {
			t.Fatal("Exec on a pool that cannot start a sandbox succeeded")
		}
	})
}

// poolOwnerMain is a separate process that fills a pool and waits to be
// killed: its idle sessions must die with it.
func poolOwnerMain() int {
	p, err := sandbox.NewPool(sandbox.Policy{}, 2)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	for p.Stats().Ready < 2 {
		if err := p.Stats().LastError; err != nil {
			fmt.Println("error", err)
			return 1
		}
		time.Sleep(5 * time.Millisecond)
	}
	kids := childPids(os.Getpid())
	fmt.Println("ready", strings.Join(kids, " "))
	select {}
}

// TestPoolSessionsDieWithOwner: SIGKILL of the pool's process takes its
// idle sandboxes down.
func TestPoolSessionsDieWithOwner(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		self, _ := os.Executable()
		cmd := exec.Command(self)
		cmd.Env = []string{"NSBOX_IT_POOL_OWNER=1", "PATH=/usr/bin:/bin"}
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, _ := bufio.NewReader(out).ReadString('\n')
		fields := strings.Fields(line)
		if len(fields) < 3 || fields[0] != "ready" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("pool owner: %q", line)
		}
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		deadline := time.Now().Add(10 * time.Second)
		for _, f := range fields[1:] {
			pid, _ := strconv.Atoi(f)
			for isRunning(pid) {
				if time.Now().After(deadline) {
					t.Fatalf("idle worker %d survived its pool's owner", pid)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	})
}

// childPids lists the pids whose parent is ppid.
func childPids(ppid int) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "PPid:") && strings.TrimSpace(l[5:]) == strconv.Itoa(ppid) {
				out = append(out, e.Name())
			}
		}
	}
	return out
}

// isRunning: the process exists and is not a zombie.
func isRunning(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// brokenPool is a pool of one whose sandboxes can never start: its policy
// binds a path that does not exist (returned, for messages to name it).
// The pool is closed at the end of the test.
func brokenPool(t *testing.T) (*sandbox.Pool, string) {
	t.Helper()
	missing := t.TempDir() + "/gone"
	pol := sandbox.Policy{Mounts: []sandbox.Mount{{Kind: sandbox.MountBind, Source: missing, Dest: "/gone"}}}
	p, err := sandbox.NewPool(pol, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, missing
}

// TestPoolWorkerSettingsStayOut: a pooled worker runs its Go code on one
// processor (GOMAXPROCS=1 in its own environment); the commands it starts
// get the policy's environment, never the worker's.
func TestPoolWorkerSettingsStayOut(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		p := readyPool(t, 1)
		res, err := p.Exec(context.Background(), sandbox.Command{Argv: []string{"/bin/sh", "-c", "env; echo done"}})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("Pool.Exec: %v, exit %d, stderr %q", err, res.ExitCode, res.Stderr)
		}
		out := string(res.Stdout)
		if !strings.Contains(out, "done") || strings.Contains(out, "GOMAXPROCS") || strings.Contains(out, "_NSBOX_INIT") {
			t.Fatalf("the command's environment: %q", out)
		}
		// And the workers did get it: the pool's refill is a worker of
		// this process's, whose environment (non-dumpable: root reads
		// it) holds GOMAXPROCS=1.
		if os.Geteuid() != 0 {
			t.Log("a root-less worker is non-dumpable: its environment is not readable here; the root run checks it")
			return
		}
		for i := 0; i < 500; i++ { // a deadlock guard while the refill starts
			for _, env := range pooledWorkerEnvs(t) {
				if !strings.Contains("\x00"+env+"\x00", "\x00GOMAXPROCS=1\x00") {
					t.Fatalf("a pooled worker's environment lacks GOMAXPROCS=1: %q", env)
				}
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatal("no pooled worker of this process found")
	})
}

// pooledWorkerEnvs returns the environments of this process's workers
// (children whose argv[0] is nsbox-init).
func pooledWorkerEnvs(t *testing.T) []string {
	t.Helper()
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		st, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
		if !strings.HasPrefix(string(cmd), "nsbox-init\x00") || len(st) == 0 {
			continue
		}
		f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err == nil {
			out = append(out, string(env))
		}
	}
	return out
}
