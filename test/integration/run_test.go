package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestPID1IsTheWorker(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		r := u.sh(t, nil, nil, `tr '\0' ' ' </proc/1/cmdline; echo; echo self=$$; ls /proc | grep -c '^[0-9]'`)
		expectCode(t, r, 0)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(lines) < 3 || !strings.HasPrefix(lines[0], "nsbox-init") {
			t.Fatalf("PID 1 inside is not the worker: %q", r.stdout)
		}
		// The host has hundreds of processes; inside there are the worker
		// and this shell's pipeline only.
		n, _ := strconv.Atoi(lines[2])
		if n == 0 || n > 6 {
			t.Fatalf("%d processes visible inside, want only the sandbox's own: %q", n, r.stdout)
		}
		// The test process itself must be invisible.
		r = u.sh(t, nil, nil, fmt.Sprintf("test -e /proc/%d/cmdline && cat /proc/%d/cmdline || echo invisible", os.Getpid(), os.Getpid()))
		if !strings.Contains(r.stdout, "invisible") && strings.Contains(r.stdout, "integration") {
			t.Fatalf("host process visible inside: %q", r.stdout)
		}
	})
}

func TestHostnameIsolated(t *testing.T) {
	host, _ := os.Hostname()
	eachUser(t, func(t *testing.T, u user) {
		r := u.sh(t, nil, nil, `hostname`)
		expectCode(t, r, 0)
		if strings.TrimSpace(r.stdout) != "nsbox" {
			t.Fatalf("hostname inside = %q, want nsbox", r.stdout)
		}
		r = u.sh(t, nil, []string{"--hostname", "box1"}, `hostname; hostname evil 2>/dev/null; hostname`)
		expectCode(t, r, 0)
		if !strings.HasPrefix(r.stdout, "box1\n") {
			t.Fatalf("--hostname not applied: %q", r.stdout)
		}
		if now, _ := os.Hostname(); now != host {
			t.Fatalf("host hostname changed from %q to %q", host, now)
		}
	})
}

func TestNetworkOnlyLoopback(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("needs /usr/bin/python3 for the TCP probe")
	}
	addr := listenLoopback(t)
	host, port, _ := strings.Cut(addr, ":")
	probe := fmt.Sprintf(`/usr/bin/python3 -c "
import socket,sys
try:
    socket.create_connection(('%s', %s), timeout=3); print('connected')
except OSError as e:
    print('refused', e)
"`, host, port)
	eachUser(t, func(t *testing.T, u user) {
		r := u.sh(t, nil, nil, `tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; cat /sys/class/net/lo/operstate 2>/dev/null; `+probe)
		expectCode(t, r, 0)
		lines := strings.Fields(r.stdout)
		if len(lines) == 0 || lines[0] != "lo" {
			t.Fatalf("interfaces inside: %q, want only lo", r.stdout)
		}
		if strings.Contains(r.stdout, "connected") {
			t.Fatalf("a TCP connect to the host's %s succeeded from the sandbox: %q", addr, r.stdout)
		}
		// lo is up: a listener inside is reachable inside.
		r = u.sh(t, nil, nil, `/usr/bin/python3 -c "
import socket
s=socket.socket(); s.bind(('127.0.0.1',0)); s.listen(1)
c=socket.create_connection(s.getsockname(), timeout=3); print('lo-ok')"`)
		if !strings.Contains(r.stdout, "lo-ok") {
			t.Fatalf("loopback inside does not work: %q %q", r.stdout, r.stderr)
		}
		// --net host shares the host network.
		r = u.sh(t, nil, []string{"--net", "host"}, probe)
		if !strings.Contains(r.stdout, "connected") {
			t.Fatalf("--net host cannot reach the host's %s: %q %q", addr, r.stdout, r.stderr)
		}
		// So does a profile that says network = "host". nsbox starts its
		// worker while it reads the profile, guessing the namespaces from
		// the flags (none here); the guess is wrong and must not stick.
		r = u.sh(t, nil, []string{"--profile", "network"}, probe)
		if !strings.Contains(r.stdout, "connected") {
			t.Fatalf("--profile network cannot reach the host's %s: %q %q", addr, r.stdout, r.stderr)
		}
	})
}

func TestReadOnlyRootAndWritableBinds(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		home := "/root"
		if u.uid != 0 {
			home = "/tmp" // nobody has no home; /tmp is private anyway
		}
		r := u.sh(t, nil, []string{"--rw", ws}, fmt.Sprintf(`
for p in /etc/nsbox-probe /usr/nsbox-probe /var/nsbox-probe %s/nsbox-probe-home %s/../nsbox-probe-parent; do
  if (echo x > "$p") 2>/dev/null; then echo "WROTE $p"; fi
done
echo hello > %s/out.txt && echo inside-ok`, home, ws, ws))
		expectCode(t, r, 0)
		if strings.Contains(r.stdout, "WROTE") && !strings.Contains(r.stdout, "WROTE /tmp/") {
			t.Fatalf("wrote outside the --rw paths: %q", r.stdout)
		}
		if !strings.Contains(r.stdout, "inside-ok") {
			t.Fatalf("write inside --rw failed: %q %q", r.stdout, r.stderr)
		}
		for _, p := range []string{"/etc/nsbox-probe", "/usr/nsbox-probe", "/var/nsbox-probe", "/root/nsbox-probe-home", filepath.Dir(ws) + "/nsbox-probe-parent"} {
			if _, err := os.Stat(p); err == nil {
				os.Remove(p)
				t.Fatalf("%s was created on the host", p)
			}
		}
		b, err := os.ReadFile(filepath.Join(ws, "out.txt"))
		if err != nil || string(b) != "hello\n" {
			t.Fatalf("file written inside not visible on the host: %q %v", b, err)
		}
		// --ro binds are readable, not writable.
		r = u.sh(t, nil, []string{"--ro", ws + ":/data"}, `cat /data/out.txt; echo y > /data/out.txt 2>/dev/null && echo WROTE`)
		if !strings.Contains(r.stdout, "hello") || strings.Contains(r.stdout, "WROTE") {
			t.Fatalf("--ro bind: %q %q", r.stdout, r.stderr)
		}
		// --tmpfs gives an empty writable directory.
		r = u.sh(t, nil, []string{"--tmpfs", "/scratch"}, `echo z > /scratch/f && cat /scratch/f`)
		expectCode(t, r, 0)
	})
}

func TestSymlinkInWritableDirDoesNotEscape(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		outside := filepath.Join(filepath.Dir(ws), "outside")
		os.Mkdir(outside, 0o777)
		os.Chmod(outside, 0o777)
		victim := filepath.Join(outside, "victim")
		u.writeFile(t, victim, "original\n", 0o666)
		os.Symlink(victim, filepath.Join(ws, "link-file"))
		os.Symlink(outside, filepath.Join(ws, "link-dir"))
		os.Symlink("/etc/passwd", filepath.Join(ws, "link-passwd"))
		r := u.sh(t, nil, []string{"--rw", ws}, fmt.Sprintf(`
cd %s
echo pwned > link-file 2>/dev/null && echo W1
echo pwned > link-dir/new 2>/dev/null && echo W2
echo pwned >> link-passwd 2>/dev/null && echo W3
true`, ws))
		expectCode(t, r, 0)
		if b, _ := os.ReadFile(victim); string(b) != "original\n" {
			t.Fatalf("write through a symlink escaped to the host: victim = %q (%q)", b, r.stdout)
		}
		if _, err := os.Stat(filepath.Join(outside, "new")); err == nil {
			t.Fatalf("file created outside through a directory symlink")
		}
		if strings.Contains(r.stdout, "W3") {
			t.Fatalf("appended to /etc/passwd through a symlink")
		}
	})
}

func TestCallerFDsAreClosed(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("TOPSECRET"), 0o644)
	eachUser(t, func(t *testing.T, u user) {
		f, err := os.Open(secret)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		// ExtraFiles[4] is fd 7 in nsbox.
		o := &runOpts{extraFiles: []*os.File{nil, nil, nil, nil, f}}
		r := u.sh(t, o, nil, `cat <&7 2>/dev/null; cat /proc/self/fd/7 2>/dev/null; ls /proc/self/fd`)
		if strings.Contains(r.stdout, "TOPSECRET") {
			t.Fatalf("fd 7 of the caller is readable inside")
		}
		for _, fd := range strings.Fields(r.stdout) {
			if n, _ := strconv.Atoi(fd); n > 3 {
				t.Fatalf("unexpected fd %d open inside: %q", n, r.stdout)
			}
		}
	})
}

func TestCallerEnvironmentNotVisible(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		o := &runOpts{env: []string{"NSBOX_IT_SECRET=hunter2", "PASSME=yes"}}
		r := u.sh(t, o, []string{"--pass-env", "PASSME", "--env", "SETME=1"}, `env; cat /proc/1/environ 2>/dev/null | tr '\0' '\n'`)
		if strings.Contains(r.stdout, "hunter2") {
			t.Fatalf("caller environment visible inside: %q", r.stdout)
		}
		if !strings.Contains(r.stdout, "PASSME=yes") || !strings.Contains(r.stdout, "SETME=1") {
			t.Fatalf("--pass-env/--env not applied: %q", r.stdout)
		}
	})
}

func TestDaemonsDieWithTheSandbox(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		marker := strconv.Itoa(900000 + os.Getpid()%1000*10 + u.uid%7)
		// A double fork with setsid: the classic daemon, re-parented to
		// PID 1 and out of the command's process group.
		r := u.sh(t, nil, nil, fmt.Sprintf(`setsid sh -c 'sleep %s & ' ; sleep %s & echo started`, marker, marker))
		expectCode(t, r, 0)
		deadline := time.Now().Add(10 * time.Second) // a leak guard, not a timing check
		for {
			left := pidsOfMarker("sleep\x00" + marker)
			if len(left) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("processes of the sandbox survived nsbox: %v", left)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

func TestExitCodes(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		expectCode(t, u.sh(t, nil, nil, "exit 3"), 3)
		expectCode(t, u.sh(t, nil, nil, "kill -9 $$"), 137)
		expectCode(t, u.sh(t, nil, nil, "kill -TERM $$"), 143)
		r := u.run(t, nil, "run", "--", "nsbox-no-such-command")
		expectCode(t, r, 127)
		if !strings.Contains(r.stderr, "not found") {
			t.Fatalf("stderr %q does not say not found", r.stderr)
		}
		expectCode(t, u.run(t, nil, "run", "--", "/etc/passwd"), 126)
		expectCode(t, u.run(t, nil, "run", "--", "/etc"), 126)
	})
}

func TestBadInput(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		cases := []struct {
			args []string
			code int
			want string
		}{
			{[]string{"run", "/bin/true"}, 125, "missing command"},
			{[]string{"run", "--"}, 125, "missing command"},
			{[]string{"run", "--no-such-flag", "--", "/bin/true"}, 125, "unknown flag"},
			{[]string{"run", "--rw", "/nonexistent/nsbox-path", "--", "/bin/true"}, 125, "mount /nonexistent/nsbox-path on /nonexistent/nsbox-path: no such file or directory"},
			{[]string{"run", "--rw", "", "--", "/bin/true"}, 125, "empty path"},
			{[]string{"run", "--ro", "/etc:relative", "--", "/bin/true"}, 125, "absolute"},
			{[]string{"run", "--net", "bogus", "--", "/bin/true"}, 125, "want none or host"},
		}
		for _, c := range cases {
			r := u.run(t, nil, c.args...)
			if r.code != c.code || !strings.Contains(r.stderr, c.want) {
				t.Errorf("nsbox %q: code %d stderr %q, want %d and %q", c.args, r.code, r.stderr, c.code, c.want)
			}
			if strings.Contains(r.stderr, "panic") || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
				t.Errorf("nsbox %q: error is not one clear line: %q", c.args, r.stderr)
			}
		}
	})
}

// nsbox started with fd 0, 1 or 2 closed still runs (the Go runtime puts
// /dev/null there); nothing of its own may take those slots first.
func TestClosedStdioAtStart(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		for _, redirect := range []string{"<&-", "2>&-"} {
			r := u.runAs(t, nil, "/bin/sh", "-c", `exec "$0" run -- /bin/sh -c 'echo out; cat' `+redirect, nsboxBin(t))
			if r.code != 0 || r.stdout != "out\n" {
				t.Errorf("nsbox run with %s: code %d stdout %q stderr %q", redirect, r.code, r.stdout, r.stderr)
			}
		}
	})
}

func TestJSONStatus(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		dir := u.tempDir(t)
		status := filepath.Join(dir, "status.jsonl")
		r := u.run(t, nil, "run", "--json-status", status, "--", "/bin/sh", "-c", "exit 7")
		expectCode(t, r, 7)
		b, err := os.ReadFile(status)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) != 2 {
			t.Fatalf("status lines: %q", b)
		}
		var started, exited map[string]any
		json.Unmarshal([]byte(lines[0]), &started)
		json.Unmarshal([]byte(lines[1]), &exited)
		if started["event"] != "started" || started["pid"] == nil {
			t.Fatalf("started line: %q", lines[0])
		}
		if exited["event"] != "exited" || exited["exit_code"] != float64(7) || exited["reason"] != "exited" {
			t.Fatalf("exited line: %q", lines[1])
		}
		// The network it got, and a filtered one's allow list (review
		// 74: a filtered run's line read as one with no network).
		if n, _ := started["network"].(map[string]any); n["mode"] != "none" {
			t.Errorf("started line of a default run: network %v, want mode none", started["network"])
		}
		r = u.run(t, nil, "run", "--json-status", "fd:1", "--allow-host", "pkg.example:443", "--check-sni", "--", "/bin/true")
		switch {
		case r.code != 0:
			// The filtered network's own tests say why it cannot run.
			t.Logf("filtered network not run here: %s", r.stderr)
		case !strings.Contains(r.stdout, `"network":{"allow":["pkg.example:443"],"check_sni":true,"mode":"filtered"}`):
			t.Errorf("started line of a filtered run: %q (stderr %q)", r.stdout, r.stderr)
		}
		// fd:N
		r = u.run(t, nil, "run", "--json-status", "fd:1", "--", "/bin/sh", "-c", "kill -9 $$")
		if !strings.Contains(r.stdout, `"reason":"signaled"`) || !strings.Contains(r.stdout, `"signal":9`) {
			t.Fatalf("fd:1 status: %q", r.stdout)
		}
		// A setup failure is reported too.
		r = u.run(t, nil, "run", "--json-status", "fd:1", "--rw", "/nonexistent/x", "--", "/bin/true")
		if !strings.Contains(r.stdout, `"reason":"setup_error"`) {
			t.Fatalf("setup error status: %q", r.stdout)
		}
		// The shell's names for the caller's descriptors are taken as fds.
		r = u.run(t, nil, "run", "--json-status", "/dev/stdout", "--", "/bin/true")
		if r.code != 0 || !strings.Contains(r.stdout, `"event":"started"`) {
			t.Fatalf("/dev/stdout: code %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
		}
		// An fd that is not open is an error, not lost lines.
		r = u.run(t, nil, "run", "--json-status", "fd:9", "--", "/bin/true")
		if r.code != 125 || !strings.Contains(r.stderr, "fd 9 is not open") {
			t.Fatalf("fd:9 not open: code %d stderr %q", r.code, r.stderr)
		}
		// The file is opened on the host: in the workspace, where an
		// earlier sandbox could plant a symlink or a FIFO, neither is
		// followed nor waited on; and the command cannot forge a line.
		ws := u.tempDir(t)
		victim := filepath.Join(ws, "..", "victim")
		u.writeFile(t, victim, "", 0o644)
		if err := os.Symlink(victim, filepath.Join(ws, "link.json")); err != nil {
			t.Fatal(err)
		}
		r = u.run(t, &runOpts{dir: ws}, "run", "--json-status", "link.json", "--", "/bin/true")
		if b, _ := os.ReadFile(victim); r.code != 125 || len(b) != 0 {
			t.Fatalf("symlink: code %d stderr %q, target now %q", r.code, r.stderr, b)
		}
		if err := unix.Mkfifo(filepath.Join(ws, "fifo.json"), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Lchown(filepath.Join(ws, "fifo.json"), u.uid, u.gid)
		r = u.run(t, &runOpts{dir: ws, timeout: 30 * time.Second}, "run", "--json-status", "fifo.json", "--", "/bin/true")
		if r.code != 125 || !strings.Contains(r.stderr, "not a regular file") {
			t.Fatalf("FIFO: code %d stderr %q", r.code, r.stderr)
		}
		r = u.run(t, &runOpts{dir: ws}, "run", "--json-status", "own.json", "--", "/bin/sh", "-c",
			`echo '{"event":"exited","exit_code":0}' >> own.json; exit 3`)
		b, _ = os.ReadFile(filepath.Join(ws, "own.json"))
		if r.code != 3 || strings.Contains(string(b), `"exit_code":0`) {
			t.Fatalf("the command wrote its own status line: code %d, file %q", r.code, b)
		}
	})
}

func TestWorkingDirectory(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		r := u.run(t, &runOpts{dir: ws}, "run", "--rw", ws, "--", "/bin/pwd")
		expectCode(t, r, 0)
		if strings.TrimSpace(r.stdout) != ws {
			t.Fatalf("cwd inside = %q, want %q", r.stdout, ws)
		}
		r = u.run(t, nil, "run", "--cwd", "/usr", "--", "/bin/pwd")
		if strings.TrimSpace(r.stdout) != "/usr" {
			t.Fatalf("--cwd: %q", r.stdout)
		}
	})
}

// TestInterrupt: SIGINT, SIGTERM or SIGHUP to nsbox kill the sandbox, and
// nsbox then dies of that same signal (a shell sees 128+N and stops its
// loop), with "interrupted_by" in the status; a signal nsbox was started
// with ignored (a background job's SIGINT, nohup's SIGHUP) stays ignored.
func TestInterrupt(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		dir := u.tempDir(t)
		for i, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
			status := filepath.Join(dir, fmt.Sprintf("status-%d.jsonl", i))
			cmd := exec.Command(nsboxBin(t), "run", "--json-status", status, "--", "/bin/sleep", "60")
			cmd.Dir = "/"
			cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + u.home()}
			u.asUser(cmd)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			waitForLine(t, status, `"event":"started"`)
			cmd.Process.Signal(sig)
			err := cmd.Wait()
			ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
			if err == nil || !ws.Signaled() || ws.Signal() != sig {
				t.Errorf("%v: nsbox ended with %v (%v), want to die of %v", sig, cmd.ProcessState, err, sig)
			}
			if want := "interrupted by " + unix.SignalName(sig); !strings.Contains(stderr.String(), want) {
				t.Errorf("%v: stderr %q does not say %q", sig, stderr.String(), want)
			}
			b, _ := os.ReadFile(status)
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			var exited map[string]any
			json.Unmarshal([]byte(lines[len(lines)-1]), &exited)
			if exited["event"] != "exited" || exited["interrupted_by"] != unix.SignalName(sig) ||
				exited["exit_code"] != float64(128+int(sig)) || exited["reason"] != "canceled" {
				t.Errorf("%v: exited line %q", sig, lines[len(lines)-1])
			}
		}
		// Started with SIGINT ignored, as `cmd &` in a script: the run
		// goes on to its own end.
		script := `trap '' INT; "$0" run --json-status "$1" -- /bin/sleep 0.5 & p=$!
			until grep -q started "$1" 2>/dev/null; do sleep 0.01; done
			kill -INT $p; wait $p`
		r := u.runAs(t, nil, "/bin/sh", "-c", script, nsboxBin(t), filepath.Join(dir, "ignored.jsonl"))
		expectCode(t, r, 0)
	})
}

// waitForLine waits until file has a line containing s.
func waitForLine(t *testing.T, file, s string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(file); err == nil && strings.Contains(string(b), s) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no line with %q after 30s", file, s)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
