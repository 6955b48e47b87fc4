package integration

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The landlock backend, forced with --backend landlock on this host: the
// escape probes it claims to stop are stopped, and what it cannot stop is
// listed in its status (the started line of --json-status and `nsbox
// status`), not silently passed.

// requireLandlock skips when the landlock backend cannot start as u here,
// with nsbox's reason.
func requireLandlock(t *testing.T, u user) {
	t.Helper()
	r := u.run(t, &runOpts{dir: u.tempDir(t)}, "run", "--backend", "landlock", "--", "/bin/true")
	if r.code != 0 {
		t.Skipf("the landlock backend cannot run as %s here: %s", u.name, strings.TrimSpace(r.stderr))
	}
}

// eachBackend runs fn for the native and the landlock backend, each as
// root and root-less, skipping where that backend cannot run.
func eachBackend(t *testing.T, fn func(t *testing.T, backend string, u user)) {
	t.Helper()
	for _, backend := range []string{"native", "landlock"} {
		for _, u := range users() {
			backend, u := backend, u
			t.Run(backend+"/"+u.name, func(t *testing.T) {
				if backend == "landlock" {
					requireLandlock(t, u)
				} else {
					requireSandbox(t, u)
				}
				fn(t, backend, u)
			})
		}
	}
}

// startedEvent returns the "started" line of a --json-status file.
func startedEvent(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		var ev map[string]any
		if json.Unmarshal([]byte(line), &ev) == nil && ev["event"] == "started" {
			return ev
		}
	}
	t.Fatalf("no started event in %s", b)
	return nil
}

func notIsolated(ev map[string]any) string {
	var out []string
	list, _ := ev["not_isolated"].([]any)
	for _, x := range list {
		out = append(out, fmt.Sprint(x))
	}
	return strings.Join(out, "\n")
}

func TestLandlockBackendProbes(t *testing.T) {
	for _, u := range users() {
		u := u
		t.Run(u.name, func(t *testing.T) {
			requireLandlock(t, u)
			ws := u.tempDir(t)
			base := filepath.Dir(ws)
			for _, d := range []string{"sub", ".git", "secret"} {
				if err := os.Mkdir(filepath.Join(ws, d), 0o755); err != nil {
					t.Fatal(err)
				}
				os.Chown(filepath.Join(ws, d), u.uid, u.gid)
			}
			u.writeFile(t, filepath.Join(ws, "sub/existing"), "old\n", 0o644)
			u.writeFile(t, filepath.Join(ws, ".git/config"), "[core]\n", 0o644)
			u.writeFile(t, filepath.Join(ws, "secret/key"), "TOPSECRET\n", 0o644)
			u.writeFile(t, filepath.Join(base, "outside"), "host\n", 0o666)
			addr := listenLoopback(t)
			host, port, _ := net.SplitHostPort(addr)
			// A host process of the same user, for the signal probe.
			sleeper := exec.Command("/bin/sleep", "120")
			u.asUser(sleeper)
			if err := sleeper.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
			status := filepath.Join(base, "status.json")
			u.writeFile(t, status, "", 0o644)
			// A fractional sleep makes a unique command line to look for
			// (dash's exec has no -a to rename one).
			marker := fmt.Sprintf("297.%09d", time.Now().UnixNano()%1000000000)
			script := strings.Join([]string{
				`echo new > sub/new && echo WROTE_INSIDE`,
				`echo changed > sub/existing && echo WROTE_EXISTING`,
				`echo x > ` + base + `/outside && echo WROTE_OUTSIDE`,
				`echo x > /etc/nsbox-ll-probe && echo WROTE_ETC`,
				`cat secret/key && echo READ_SECRET`,
				`echo x >> .git/config && echo WROTE_GIT_CONFIG`,
				`echo x > .git/hooks-new && echo MADE_GIT_FILE`,
				`bash -c 'echo > /dev/tcp/` + host + `/` + port + `' && echo TCP_CONNECTED`,
				`/usr/bin/python3 -c 'import socket; s=socket.socket(socket.AF_UNIX); s.connect("\0nsbox-none")' 2>/dev/null && echo UNIX_SOCKET`,
				`kill -0 ` + strconv.Itoa(sleeper.Process.Pid) + ` && echo SIGNALED_HOST`,
				`test -d /proc/` + strconv.Itoa(os.Getpid()) + ` && echo SEES_HOST_PID`,
				// The worker (the shell's parent) cannot be killed from
				// inside: it kills the session's processes at its end.
				`kill -KILL $PPID && echo KILLED_WORKER`,
				`kill -KILL -1 && echo KILLED_ALL`,
				// A detached process the session must not leave behind.
				// It says it runs by a file in the private TMPDIR; the
				// script waits for it (bounded), or the check below
				// could not fail.
				`setsid /bin/sh -c ': > "$TMPDIR/detached"; exec sleep ` + marker + `' </dev/null >/dev/null 2>&1 &`,
				`i=0; while [ ! -e "$TMPDIR/detached" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done`,
				`[ -e "$TMPDIR/detached" ] && echo DETACHED_STARTED`,
				`echo done`,
			}, "\n")
			r := u.sh(t, &runOpts{dir: ws}, []string{"--backend", "landlock", "--workspace", ws, "--hide", filepath.Join(ws, "secret"), "--json-status", status}, script)
			expectCode(t, r, 0)
			out := r.stdout
			t.Logf("probes:\n%s%s", out, r.stderr)
			for _, want := range []string{"WROTE_INSIDE", "WROTE_EXISTING", "DETACHED_STARTED", "done"} {
				if !strings.Contains(out, want) {
					t.Errorf("%s missing: the workspace must stay writable\nstdout: %s\nstderr: %s", want, out, r.stderr)
				}
			}
			for _, escape := range []string{"WROTE_OUTSIDE", "WROTE_ETC", "READ_SECRET", "WROTE_GIT_CONFIG", "MADE_GIT_FILE", "TCP_CONNECTED", "UNIX_SOCKET", "KILLED_WORKER", "KILLED_ALL"} {
				if strings.Contains(out, escape) {
					t.Errorf("escape %s succeeded under the landlock backend\nstdout: %s", escape, out)
				}
			}
			if b, _ := os.ReadFile(filepath.Join(base, "outside")); string(b) != "host\n" {
				t.Errorf("the file outside the workspace changed: %q", b)
			}
			ev := startedEvent(t, status)
			if ev["backend"] != "landlock" {
				t.Fatalf("backend %v, want landlock", ev["backend"])
			}
			gaps := notIsolated(ev)
			ll, _ := ev["landlock"].(map[string]any)
			abi, _ := ll["abi"].(float64)
			// What the backend cannot stop is said, not passed silently.
			if strings.Contains(out, "SEES_HOST_PID") && !strings.Contains(gaps, "PID visibility") {
				t.Errorf("host PIDs are visible but the status does not say so:\n%s", gaps)
			}
			switch {
			case abi >= 6 && strings.Contains(out, "SIGNALED_HOST"):
				t.Errorf("ABI %v has the signal scope, yet a host process was signaled", abi)
			case abi < 6 && !strings.Contains(gaps, "signal processes of the same user"):
				t.Errorf("ABI %v cannot scope signals and the status does not say so:\n%s", abi, gaps)
			}
			if !strings.Contains(gaps, "frozen: no entry can be created, removed or renamed directly in "+ws) {
				t.Errorf("the workspace is split around .git and the hidden dir, but the status does not say it is frozen:\n%s", gaps)
			}
			// The session's processes are gone when nsbox returns.
			if left := pidsOfMarker(marker); len(left) > 0 {
				t.Errorf("processes of the session outlived it: %v", left)
				for _, p := range left {
					if pid, err := strconv.Atoi(p); err == nil {
						syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			}
		})
	}
}

// TestLandlockStatusListsGaps: `nsbox status --backend landlock` says what
// the backend does not isolate.
func TestLandlockStatusListsGaps(t *testing.T) {
	u := users()[0]
	requireLandlock(t, u)
	r := u.run(t, nil, "status", "--backend", "landlock", "--json")
	var rep struct {
		Backend     string   `json:"backend"`
		NotIsolated []string `json:"notIsolated"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	if rep.Backend != "landlock" {
		t.Fatalf("backend %q", rep.Backend)
	}
	if !strings.Contains(strings.Join(rep.NotIsolated, "\n"), "PID visibility") {
		t.Fatalf("status does not list PID visibility: %v", rep.NotIsolated)
	}
}

// TestMaskedProcPrefersNativeWithOuterProc: under a /proc masked as an
// outer container masks it (user namespaces working), auto runs the native
// backend with the outer /proc read-only and lists what that leaks; the
// landlock backend, forced, runs too.
func TestMaskedProcPrefersNativeWithOuterProc(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to mask /proc in a private mount namespace (unshare -m)")
	}
	u := users()[0]
	requireLandlock(t, u)
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("unshare(1) is not installed")
	}
	ws := u.tempDir(t)
	mask := func(args ...string) result {
		sh := "mount -t tmpfs nsbox-mask /proc/acpi 2>/dev/null || mount -t tmpfs nsbox-mask /proc/scsi || exit 99; exec \"$@\""
		return u.runAs(t, &runOpts{dir: ws}, "unshare", append([]string{"-m", "--propagation", "private", "/bin/sh", "-c", sh, "sh", nsboxBin(t)}, args...)...)
	}
	r := mask("run", "--json-status", "fd:1", "--", "/bin/sh", "-c", "echo x > /proc/sys/kernel/hostname || echo PROC_READONLY")
	if r.code == 99 {
		t.Skip("cannot mask a /proc entry here")
	}
	expectCode(t, r, 0)
	if !strings.Contains(r.stdout, `"backend":"native"`) || !strings.Contains(r.stdout, "/proc is the outer container's") || !strings.Contains(r.stdout, "PROC_READONLY") {
		t.Fatalf("auto under a masked /proc: want native with the outer /proc read-only and its leaks listed\nstdout: %s\nstderr: %s", r.stdout, r.stderr)
	}
	r = mask("run", "--backend", "landlock", "--json-status", "fd:1", "--", "/bin/true")
	expectCode(t, r, 0)
	if !strings.Contains(r.stdout, `"backend":"landlock"`) {
		t.Fatalf("--backend landlock: %s", r.stdout)
	}
}

// TestLandlockLimits: limits apply under the landlock backend too, through
// the same shim (started by a worker that is not PID 1): a command over
// its process limit is stopped, and the run still succeeds otherwise.
func TestLandlockLimits(t *testing.T) {
	for _, u := range users() {
		u := u
		t.Run(u.name, func(t *testing.T) {
			requireLandlock(t, u)
			ws := u.tempDir(t)
			r := u.sh(t, &runOpts{dir: ws}, []string{"--backend", "landlock", "--pids", "32", "--memory", "256M"},
				`i=0; while [ $i -lt 100 ]; do sleep 5 & i=$((i+1)); done; echo STARTED=$(jobs -p | wc -l)`)
			if strings.Contains(r.stdout, "STARTED=100") {
				t.Fatalf("100 processes started under --pids 32:\nstdout: %s\nstderr: %s", r.stdout, r.stderr)
			}
			// Either the shell saw its forks fail (rlimit), or nsbox ended
			// the run for the process limit (cgroup pids events).
			if !strings.Contains(r.stdout, "STARTED=") && !strings.Contains(r.stderr, "process limit 32 reached") && !strings.Contains(r.stderr, "Cannot fork") {
				t.Fatalf("the command did not run under limits:\ncode %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
			}
		})
	}
}

// TestNativeScopesUnderNetHost: the namespace sandbox's second layer. With
// --net host the host's abstract unix sockets share the sandbox's network
// namespace; on Landlock ABI 6 the scope refuses connects to them, and
// signals to the host's processes.
func TestNativeScopesUnderNetHost(t *testing.T) {
	if _, _, errno := syscall.Syscall(unixLandlockCreateRuleset, 0, 0, 1); errno != 0 {
		t.Skipf("no Landlock here: %v", errno)
	}
	abi, _, _ := syscall.Syscall(unixLandlockCreateRuleset, 0, 0, 1)
	if abi < 6 {
		t.Skipf("Landlock ABI %d has no scopes (ABI 6, Linux 6.12)", abi)
	}
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("needs /usr/bin/python3 for the socket probe")
	}
	name := fmt.Sprintf("nsbox-scope-test-%d", os.Getpid())
	ln, err := net.Listen("unix", "@"+name)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	eachUser(t, func(t *testing.T, u user) {
		sleeper := exec.Command("/bin/sleep", "120")
		u.asUser(sleeper)
		if err := sleeper.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
		ws := u.tempDir(t)
		// A host process is not in the sandbox's PID namespace: kill -0
		// by its pid could not even name it. The socket is the probe.
		probe := `import socket
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect("\0` + name + `")
    print("CONNECTED")
except OSError as e:
    print("REFUSED", e.errno)
`
		r := u.run(t, &runOpts{dir: ws}, "run", "--net", "host", "--", "/usr/bin/python3", "-c", probe)
		expectCode(t, r, 0)
		if !strings.Contains(r.stdout, "REFUSED 1") {
			t.Fatalf("connect to a host abstract socket under --net host: %q (stderr %s), want EPERM from the scope", r.stdout, r.stderr)
		}
		// Without the step (the bench knob) the same connect succeeds: the
		// scope is what refuses it.
		r = u.run(t, &runOpts{dir: ws, env: []string{"_NSBOX_BENCH_NO_SCOPES=1"}}, "run", "--net", "host", "--", "/usr/bin/python3", "-c", probe)
		if !strings.Contains(r.stdout, "CONNECTED") {
			t.Logf("without the scopes step: %q (another layer refuses it too)", r.stdout)
		}
	})
}

// unixLandlockCreateRuleset is SYS_LANDLOCK_CREATE_RULESET (the same number
// on every architecture).
const unixLandlockCreateRuleset = 444

// TestLandlockNetHost: with --net host the landlock backend leaves TCP to
// the host's network and refuses socket(AF_UNIX) only.
func TestLandlockNetHost(t *testing.T) {
	u := users()[0]
	requireLandlock(t, u)
	addr := listenLoopback(t)
	host, port, _ := net.SplitHostPort(addr)
	ws := u.tempDir(t)
	r := u.sh(t, &runOpts{dir: ws}, []string{"--backend", "landlock", "--net", "host"},
		`bash -c 'echo > /dev/tcp/`+host+`/`+port+`' && echo TCP_OK
/usr/bin/python3 -c 'import socket; socket.socket(socket.AF_UNIX)' 2>/dev/null && echo UNIX_OK
echo done`)
	expectCode(t, r, 0)
	if !strings.Contains(r.stdout, "TCP_OK") || strings.Contains(r.stdout, "UNIX_OK") {
		t.Fatalf("--net host under landlock: want TCP allowed and AF_UNIX refused\nstdout: %s\nstderr: %s", r.stdout, r.stderr)
	}
}
