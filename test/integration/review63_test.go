package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// review63Script starts, in one call, the ways a process tries to outlive
// its call: a double-forked daemon, a setsid session leader, a process in a
// process group of its own, a stopped process, and a chain that re-forks.
// Each writes its pid to ws/pN.
func review63Script(ws string) string {
	return fmt.Sprintf(`cd %[1]s/out
( sh -c 'echo $$ > p1.tmp; mv p1.tmp p1; exec sleep 300' </dev/null >/dev/null 2>&1 & )
setsid sh -c 'echo $$ > p2.tmp; mv p2.tmp p2; exec sleep 300' </dev/null >/dev/null 2>&1 &
perl -e 'setpgrp(0,0); open F,">p3.tmp"; print F $$; close F; rename "p3.tmp","p3"; sleep 300' </dev/null >/dev/null 2>&1 &
sh -c 'echo $$ > p4.tmp; mv p4.tmp p4; kill -STOP $$; exec sleep 300' </dev/null >/dev/null 2>&1 &
for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do [ -e p1 ] && [ -e p2 ] && [ -e p3 ] && [ -e p4 ] && break; sleep 0.05; done
echo STARTED`, ws)
}

// alivePids returns which of the pids the files ws/p1..p4 name still run
// (not zombies).
func review63Alive(t *testing.T, ws string) []string {
	t.Helper()
	var alive []string
	for i := 1; i <= 4; i++ {
		b, err := os.ReadFile(filepath.Join(ws, "out", "p"+strconv.Itoa(i)))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 {
			continue
		}
		st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		s := string(st)
		if j := strings.LastIndexByte(s, ')'); j > 0 && len(s) > j+2 && s[j+2] == 'Z' {
			continue
		}
		alive = append(alive, fmt.Sprintf("p%d=%d (%s)", i, pid, strings.Fields(s)[1]))
		t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	}
	return alive
}

// TestReview63LandlockPerCallDetachedProcessesGone: under the Landlock
// backend (no PID namespace), every way of detaching is gone when the
// per-call tool call returns.
func TestReview63LandlockPerCallDetachedProcessesGone(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := filepath.Join(u.visibleDir(t), "proj")
		u.mkdirs(t, ws, filepath.Join(ws, "out"))
		m := startMCP(t, u, ws, "--isolation", "per-call", "--pool-size", "1", "--backend", "landlock", "--workspace", ws)
		text, ok := m.call("run_command", map[string]any{"command": review63Script(ws)})
		if !ok || !strings.Contains(text, "STARTED") {
			t.Fatalf("call 1: %v %q; stderr %q", ok, text, m.stderr.String())
		}
		for i := 1; i <= 4; i++ {
			if _, err := os.Stat(filepath.Join(ws, "out", "p"+strconv.Itoa(i))); err != nil {
				t.Fatalf("process p%d did not start: %v (%q)", i, err, text)
			}
		}
		if alive := review63Alive(t, ws); len(alive) > 0 {
			t.Errorf("after the per-call tool call returned, processes it started still run: %v", alive)
		}
	})
}

// TestReview63LandlockPerCallOwnerKilled: the MCP server (the pool's
// owner) is SIGKILLed while a call runs and another sandbox waits idle:
// the call's detached processes and every worker end, and the TMPDIRs the
// server made are removed by the next nsbox.
func TestReview63LandlockPerCallOwnerKilled(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := filepath.Join(u.visibleDir(t), "proj")
		u.mkdirs(t, ws, filepath.Join(ws, "out"))
		m := startMCP(t, u, ws, "--isolation", "per-call", "--pool-size", "2", "--backend", "landlock", "--workspace", ws)
		// A first call: the pool is up.
		if text, ok := m.call("run_command", map[string]any{"command": "true"}); !ok {
			t.Fatalf("call 0: %q; stderr %q", text, m.stderr.String())
		}
		req, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 9999, "method": "tools/call", "params": map[string]any{
			"name": "run_command", "arguments": map[string]any{"command": review63Script(ws) + "; sleep 30"}}})
		m.in.Write(append(req, '\n'))
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if _, err := os.Stat(filepath.Join(ws, "out", "p4")); err == nil {
				break
			}
			if time.Now().After(deadline) {
				ents, _ := os.ReadDir(ws)
				t.Fatalf("the call did not start its processes (%v); stderr %q", ents, m.stderr.String())
			}
		}
		server := m.cmd.Process.Pid
		workers := childrenOf(server)
		if len(workers) == 0 {
			t.Fatal("no worker of the server found")
		}
		m.cmd.Process.Signal(syscall.SIGKILL)
		killed := time.Now()
		for time.Since(killed) < 15*time.Second {
			if len(review63AliveQuiet(ws)) == 0 {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		took := time.Since(killed)
		t.Logf("the call's processes ended %v after the server's SIGKILL (still alive: %v)", took, review63AliveQuiet(ws))
		// nsbox run ends them within a few ms of its SIGKILL; a worker with
		// a tool call in flight waited for the tool's 2 s grace first
		// (ipc.Peer.stop waits for every handler before killDescendants).
		if took > time.Second {
			t.Errorf("the call's detached processes ran on %v after the MCP server was SIGKILLed (the workspace writable all along); nsbox run's end it in ms", took.Round(10*time.Millisecond))
		}
		for _, w := range workers {
			t.Logf("worker %d: %s", w, procStat(w))
		}
		time.Sleep(2 * time.Second)
		if alive := review63Alive(t, ws); len(alive) > 0 {
			t.Errorf("2 s after the server was SIGKILLed, processes of its call still run: %v", alive)
		}
		for _, w := range workers {
			if st, err := os.ReadFile("/proc/" + strconv.Itoa(w) + "/stat"); err == nil && !strings.Contains(string(st), ") Z") {
				t.Errorf("2 s after the server was SIGKILLed, its worker %d still runs: %s", w, st)
				syscall.Kill(w, syscall.SIGKILL)
			}
		}
		// The TMPDIRs it made: left (documented), then removed by the
		// next nsbox of that uid.
		dir := fmt.Sprintf("/tmp/nsbox-%d", u.uid)
		left := func() []string {
			var out []string
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				if strings.Contains(e.Name(), "."+strconv.Itoa(server)+".") {
					out = append(out, e.Name())
				}
			}
			return out
		}
		t.Logf("left by the killed server: %v", left())
		u.run(t, &runOpts{dir: ws}, "run", "--backend", "landlock", "--", "/bin/true")
		if l := left(); len(l) > 0 {
			t.Errorf("after the next nsbox run, the killed server's TMPDIRs are still in %s: %v", dir, l)
			for _, n := range l {
				os.RemoveAll(filepath.Join(dir, n))
			}
		}
	})
}

func childrenOf(pid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		j := strings.LastIndexByte(s, ')')
		f := strings.Fields(s[j+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	return out
}

func procStat(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if len(b) > 40 {
		b = b[:40]
	}
	return string(b)
}

func review63AliveQuiet(ws string) []int {
	var alive []int
	for i := 1; i <= 4; i++ {
		b, err := os.ReadFile(filepath.Join(ws, "out", "p"+strconv.Itoa(i)))
		if err != nil {
			continue
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if pid <= 0 || err != nil {
			continue
		}
		s := string(st)
		if j := strings.LastIndexByte(s, ')'); j > 0 && len(s) > j+2 && s[j+2] == 'Z' {
			continue
		}
		alive = append(alive, pid)
	}
	return alive
}
