package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// requireInterpreter skips when the host has no interpreter for lang.
func requireInterpreter(t *testing.T, lang string) {
	t.Helper()
	names := map[string][]string{"python": {"python3", "python"}, "node": {"node", "nodejs"}, "bash": {"bash"}, "ruby": {"ruby"}}[lang]
	for _, n := range names {
		if _, err := exec.LookPath(n); err == nil {
			return
		}
	}
	t.Skipf("no %s interpreter on this host (hack/install-deps.sh installs it)", lang)
}

func TestScriptLanguages(t *testing.T) {
	progs := map[string]string{
		"python": "import sys\nprint('out python')\nprint('err python', file=sys.stderr)\nsys.exit(3)",
		"node":   "console.log('out node'); console.error('err node'); process.exit(3)",
		"bash":   "echo out bash; echo err bash >&2; exit 3",
		"ruby":   "puts 'out ruby'; $stderr.puts 'err ruby'; exit 3",
	}
	eachUser(t, func(t *testing.T, u user) {
		for lang, code := range progs {
			t.Run(lang, func(t *testing.T) {
				requireInterpreter(t, lang)
				r := u.run(t, nil, "script", "--lang", lang, "-c", code)
				expectCode(t, r, 3)
				if r.stdout != "out "+lang+"\n" || r.stderr != "err "+lang+"\n" {
					t.Fatalf("stdout %q stderr %q", r.stdout, r.stderr)
				}
			})
		}
		// From a file and from standard input.
		dir := u.tempDir(t)
		u.writeFile(t, dir+"/s.sh", "echo from file\n", 0o644)
		r := u.run(t, nil, "script", "--lang", "bash", dir+"/s.sh")
		expectCode(t, r, 0)
		if r.stdout != "from file\n" {
			t.Fatalf("file: %q", r.stdout)
		}
		r = u.run(t, &runOpts{stdin: strings.NewReader("echo from stdin")}, "script", "--lang", "bash", "-")
		expectCode(t, r, 0)
		if r.stdout != "from stdin\n" {
			t.Fatalf("stdin: %q", r.stdout)
		}
	})
}

func TestScriptWriteOutsideIsViolation(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		target := fmt.Sprintf("/usr/nsbox-it-violation-%d", os.Getpid())
		progs := map[string]string{
			"python": fmt.Sprintf("open(%q, 'w')", target),
			"node":   fmt.Sprintf("require('fs').writeFileSync(%q, 'x')", target),
			"bash":   fmt.Sprintf("echo x > %s", target),
			"ruby":   fmt.Sprintf("File.write(%q, 'x')", target),
		}
		for lang, code := range progs {
			t.Run(lang, func(t *testing.T) {
				requireInterpreter(t, lang)
				r := u.run(t, nil, "script", "--lang", lang, "-c", code)
				if r.code == 0 || !strings.Contains(r.stderr, "nsbox: sandbox violation: filesystem write "+target) {
					t.Fatalf("exit %d, stderr %q: want a violation naming the operation and %s", r.code, r.stderr, target)
				}
				if _, err := os.Stat(target); err == nil {
					os.Remove(target)
					t.Fatalf("%s created on the host", target)
				}
			})
		}
	})
}

func TestScriptMemoryLimit(t *testing.T) {
	requireInterpreter(t, "python")
	eachUser(t, func(t *testing.T, u user) {
		r := u.run(t, nil, "script", "--lang", "python", "--memory", "64M", "-c", "x = bytearray(512 << 20)\nx[-1] = 1\nprint('allocated')")
		if r.code == 0 && strings.Contains(r.stdout, "allocated") {
			t.Skipf("memory limits are not enforced for %s on this host (a 512 MiB allocation succeeded under --memory 64M)", u.name)
		}
		expectCode(t, r, 137)
		if !strings.Contains(r.stderr, "memory limit 64 MiB") {
			t.Fatalf("stderr %q", r.stderr)
		}
	})
}

func TestScriptTimeLimit(t *testing.T) {
	requireInterpreter(t, "python")
	eachUser(t, func(t *testing.T, u user) {
		start := time.Now()
		r := u.run(t, nil, "script", "--lang", "python", "--timeout", "1s", "-c", "while True: pass")
		expectCode(t, r, 124)
		if d := time.Since(start); d > 15*time.Second {
			t.Fatalf("stopped after %s", d)
		}
		if !strings.Contains(r.stderr, "time limit") {
			t.Fatalf("stderr %q", r.stderr)
		}
	})
}

func TestScriptHostEnvInvisible(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		r := u.run(t, &runOpts{env: []string{"NSBOX_IT_SECRET=hunter2"}}, "script", "--lang", "bash", "--env", "MINE=1",
			"-c", `echo "secret=${NSBOX_IT_SECRET:-unset} mine=$MINE"; env | cut -d= -f1 | sort | tr '\n' ' '`)
		expectCode(t, r, 0)
		if !strings.HasPrefix(r.stdout, "secret=unset mine=1\n") || strings.Contains(r.stdout, "NSBOX_IT_SECRET") {
			t.Fatalf("stdout %q", r.stdout)
		}
	})
}

func TestScriptNetworkOnlyWithNet(t *testing.T) {
	requireInterpreter(t, "python")
	addr := listenLoopback(t)
	host, port, _ := strings.Cut(addr, ":")
	code := fmt.Sprintf("import socket\ntry:\n  socket.create_connection((%q, %s), timeout=3); print('connected')\nexcept OSError as e:\n  print('failed', e)", host, port)
	eachUser(t, func(t *testing.T, u user) {
		r := u.run(t, nil, "script", "--lang", "python", "-c", code)
		expectCode(t, r, 0)
		if !strings.HasPrefix(r.stdout, "failed") {
			t.Fatalf("without --net: %q", r.stdout)
		}
		r = u.run(t, nil, "script", "--lang", "python", "--net", "-c", code)
		expectCode(t, r, 0)
		if !strings.HasPrefix(r.stdout, "connected") {
			t.Fatalf("with --net: %q", r.stdout)
		}
	})
}

func TestScriptInterpreterNotFound(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		empty := u.tempDir(t)
		r := u.run(t, nil, "script", "--lang", "ruby", "--env", "PATH="+empty, "-c", "puts 1")
		expectCode(t, r, 127)
		if !strings.Contains(r.stderr, "interpreter not found: ruby") {
			t.Fatalf("stderr %q", r.stderr)
		}
	})
}

func TestScriptBadInput(t *testing.T) {
	u := users()[0]
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"script", "-c", "x"}, "--lang is required"},
		{[]string{"script", "--lang", "cobol", "-c", "x"}, "unsupported language"},
		{[]string{"script", "--lang", "bash"}, "missing script"},
		{[]string{"script", "--lang", "bash", "--memory", "lots", "-c", "x"}, "--memory"},
	} {
		r := u.run(t, nil, c.args...)
		if r.code != 125 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exit %d stderr %q, want 125 and %q", c.args, r.code, r.stderr, c.want)
		}
	}
	r := u.run(t, nil, "script", "--no-sandbox", "--lang", "bash", "-c", "echo unsandboxed")
	expectCode(t, r, 0)
	if r.stdout != "unsandboxed\n" || !strings.Contains(r.stderr, "WARNING: sandboxing is disabled") {
		t.Fatalf("--no-sandbox: %q %q", r.stdout, r.stderr)
	}
}

// Scripts run with what the strict profile hides hidden: a script is no
// more entitled to ~/.ssh than a command under nsbox run.
func TestScriptHidesCredentials(t *testing.T) {
	requireInterpreter(t, "bash")
	eachUser(t, func(t *testing.T, u user) {
		home := u.fakeHome(t)
		r := u.run(t, &runOpts{env: []string{"HOME=" + home}}, "script", "--lang", "bash", "-c", "ls -A "+home+"/.ssh | wc -l")
		expectCode(t, r, 0)
		if strings.TrimSpace(r.stdout) != "0" {
			t.Fatalf("~/.ssh is not empty inside the script: %q", r.stdout)
		}
		// A hide inside --workdir holds: the work directory is mounted
		// first, the hides over it.
		proj := filepath.Join(home, "proj")
		u.mkdirAs(t, proj, filepath.Join(home, "cfg"), filepath.Join(home, "cfg", "nsbox"))
		u.writeFile(t, filepath.Join(proj, "secret"), "S=1\n", 0o644)
		u.writeFile(t, filepath.Join(home, "cfg", "nsbox", "config.toml"), "[filesystem]\nhide = [\""+filepath.Join(proj, "secret")+"\"]\n", 0o644)
		r = u.run(t, &runOpts{env: []string{"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, "cfg")}}, "script", "--workdir", proj, "--lang", "bash", "-c", "wc -c < secret")
		expectCode(t, r, 0)
		if strings.TrimSpace(r.stdout) != "0" {
			t.Fatalf("a hidden file in --workdir was readable: %q", r.stdout)
		}
		// Nor can --workdir make the home directory writable.
		r = u.run(t, &runOpts{env: []string{"HOME=" + home}}, "script", "--workdir", home, "--lang", "bash", "-c", "true")
		if r.code != 125 || !strings.Contains(r.stderr, "home directory") {
			t.Fatalf("--workdir ~: code %d stderr %q", r.code, r.stderr)
		}
	})
}
