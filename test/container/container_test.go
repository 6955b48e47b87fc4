// Package container runs the built nsbox inside real containers: a private
// containerd (its own socket, root and state directories) started by the
// test, `ctr run` of a rootfs the test builds from busybox and the nsbox
// binary, under (a) the default masked /proc, (b) containerd's default
// seccomp profile and (c) an unmasked /proc with contrib/kubernetes's
// seccomp profile. Each case checks which backend ran and that its
// promises hold: a write outside the workspace refused, a hidden secret
// unreadable, the network refused, no process of the session left. It
// installs nothing (containerd, runc and busybox-static come from
// hack/install-deps.sh), stops its containerd and leaves nothing behind;
// it skips with the reason when containerd cannot start.
package container

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// repoRoot is the checkout: go test runs a package's tests in its own
// directory (runtime.Caller would give a module path under -trimpath,
// which make test uses).
func repoRoot(t *testing.T) string {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Clean(filepath.Join(wd, "..", ".."))
}

func nsboxBin(t *testing.T) string {
	if p := os.Getenv("NSBOX_BIN"); p != "" {
		return p
	}
	p := filepath.Join(repoRoot(t), "bin", "nsbox")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("no nsbox binary: run make build or set NSBOX_BIN (%v)", err)
	}
	return p
}

// daemon is the test's own containerd.
type daemon struct {
	dir, sock string
	// runDirs are the directories of /run/containerd that did not exist
	// before: the shims make their sockets' directory there whatever the
	// configuration says, and it is removed again when empty.
	runDirs []string
	cmd     *exec.Cmd
	log     bytes.Buffer
}

// startContainerd starts containerd on a private socket, root and state
// directory, with the plugins that would touch the host's state (CRI, the
// /opt installer, snapshotters the test does not use) disabled.
func startContainerd(t *testing.T) *daemon {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("containerd needs root")
	}
	for _, b := range []string{"containerd", "ctr", "runc"} {
		if _, err := exec.LookPath(b); err != nil {
			t.Skipf("%s is not installed (hack/install-deps.sh installs containerd): %v", b, err)
		}
	}
	dir, err := os.MkdirTemp("", "nsbox-ctr-")
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{dir: dir, sock: filepath.Join(dir, "c.sock")}
	for _, p := range []string{"/run/containerd", "/run/containerd/s"} {
		if _, err := os.Lstat(p); err != nil {
			d.runDirs = append([]string{p}, d.runDirs...) // deepest first
		}
	}
	cfg := fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = %q
[ttrpc]
  address = %q
[debug]
  address = ""
[metrics]
  address = ""
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), d.sock, d.sock+".ttrpc")
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	d.cmd = exec.Command("containerd", "--config", filepath.Join(dir, "config.toml"))
	d.cmd.Stdout, d.cmd.Stderr = &d.log, &d.log
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := d.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		t.Skipf("containerd cannot start: %v", err)
	}
	t.Cleanup(func() { d.stop(t) })
	deadline := time.Now().Add(30 * time.Second)
	for {
		if out, err := exec.Command("ctr", "--address", d.sock, "version").CombinedOutput(); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Skipf("containerd did not come up: %v\n%s\nlog:\n%s", err, out, d.log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	return d
}

// stop ends containerd and its shims and removes everything the test
// made: mounts beneath its directory, the directory, the shims' sockets.
func (d *daemon) stop(t *testing.T) {
	if d.cmd.Process != nil {
		d.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { d.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	// Shims outlive containerd by design; these are ours by their
	// address argument.
	for _, pid := range pidsWith(d.sock) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	for _, mp := range mountsUnder(d.dir) {
		syscall.Unmount(mp, syscall.MNT_DETACH)
	}
	os.RemoveAll(d.dir)
	for _, p := range d.runDirs {
		os.Remove(p) // only if empty: never what another containerd keeps there
	}
	if left := mountsUnder(d.dir); len(left) > 0 {
		t.Errorf("mounts left behind: %v", left)
	}
	if left := pidsWith(d.sock); len(left) > 0 {
		t.Errorf("processes left behind: %v", left)
	}
}

func pidsWith(marker string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.Contains(b, []byte(marker)) {
			out = append(out, pid)
		}
	}
	return out
}

func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && strings.HasPrefix(fields[4], dir) {
			out = append(out, fields[4])
		}
	}
	return out
}

// buildRootfs makes a minimal root: busybox (static) with its applets,
// nsbox, /etc/passwd, a workspace /work and a secret /secret/key.
func buildRootfs(t *testing.T, base, nsbox string) string {
	t.Helper()
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Skipf("busybox is not installed (busybox-static): %v", err)
	}
	if out, _ := exec.Command("file", "-L", bb).Output(); len(out) > 0 && !bytes.Contains(out, []byte("statically linked")) {
		t.Skipf("%s is not statically linked (busybox-static)", bb)
	}
	if out, _ := exec.Command("file", "-L", nsbox).Output(); len(out) > 0 && !bytes.Contains(out, []byte("statically linked")) {
		t.Skipf("%s is not statically linked: make build links it statically when libc.a and libseccomp.a are installed", nsbox)
	}
	root := filepath.Join(base, "rootfs")
	for _, d := range []string{"bin", "etc", "proc", "sys", "dev", "tmp", "run", "root", "work/sub", "secret", "status"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(filepath.Join(root, "tmp"), 0o1777)
	os.Chmod(filepath.Join(root, "status"), 0o777)
	copyFile(t, bb, filepath.Join(root, "bin/busybox"))
	copyFile(t, nsbox, filepath.Join(root, "bin/nsbox"))
	list, err := exec.Command(bb, "--list").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range strings.Fields(string(list)) {
		if a != "busybox" {
			os.Symlink("busybox", filepath.Join(root, "bin", a))
		}
	}
	write := func(p, s string) {
		if err := os.WriteFile(filepath.Join(root, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("etc/passwd", "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n")
	write("etc/group", "root:x:0:\nnogroup:x:65534:\n")
	write("secret/key", "TOPSECRET\n")
	write("work/sub/existing", "old\n")
	return root
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// script runs inside the container: a loopback listener of the container,
// then one nsbox run whose probes print a word only when they succeed,
// then, after nsbox returned, whether any process of the session is left.
const script = `
nc -l -p 8081 >/dev/null 2>&1 &
sleep 0.2
cd /work
nsbox run --workspace /work --hide /secret --json-status /status/run.json -- /bin/sh -c '
echo in > /work/sub/new && echo WROTE_INSIDE
echo x > /etc/owned && echo WROTE_OUTSIDE
chmod 0600 /etc/group 2>/dev/null && echo CHMOD_OUTSIDE
: > /work/sub/x && chmod 0700 /work/sub/x && touch -r /work/sub/existing /work/sub/x && echo META_INSIDE
cat /secret/key 2>/dev/null | grep -q TOPSECRET && echo READ_SECRET
echo hi | nc -w 1 127.0.0.1 8081 && echo NET_OK
setsid /bin/sh -c "exec sleep \$((300+1))" </dev/null >/dev/null 2>&1 &
echo SANDBOX_DONE
'
echo "NSBOX_EXIT=$?"
nsbox run --backend required --workspace /work -- /bin/true 2>/status/required.err
echo "REQUIRED_EXIT=$?"
left=0
for p in /proc/[0-9]*; do
  if tr "\0" " " < $p/cmdline 2>/dev/null | grep -qx "sleep 301 "; then left=$((left+1)); fi
done
echo "LEFT=$left"
nsbox status --json > /status/status.json 2>/status/status.err
`

type caseResult struct {
	out         string
	backend     string
	notIsolated []any
	status      map[string]any
}

// runCase runs the script in a container made with ctr run args.
func (d *daemon) runCase(t *testing.T, root, id string, args []string) caseResult {
	t.Helper()
	os.Remove(filepath.Join(root, "status/run.json"))
	os.Remove(filepath.Join(root, "etc/owned"))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	full := append([]string{"--address", d.sock, "run", "--rm", "--fifo-dir", filepath.Join(d.dir, "fifo"),
		"--runc-root", filepath.Join(d.dir, "runc"), "--cgroup", "", "--env", "PATH=/bin", "--env", "HOME=/root"}, args...)
	cmd := exec.CommandContext(ctx, "ctr", full...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("ctr run %s did not finish: %s", id, out)
	}
	if err != nil && !bytes.Contains(out, []byte("NSBOX_EXIT=")) {
		t.Fatalf("ctr run %s: %v\n%s\ncontainerd log:\n%s", id, err, out, d.log.String())
	}
	r := caseResult{out: string(out)}
	if b, err := os.ReadFile(filepath.Join(root, "status/run.json")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			var ev map[string]any
			if json.Unmarshal([]byte(line), &ev) == nil && ev["event"] == "started" {
				r.backend, _ = ev["backend"].(string)
				r.notIsolated, _ = ev["not_isolated"].([]any)
			}
		}
	}
	if b, err := os.ReadFile(filepath.Join(root, "status/status.json")); err == nil {
		json.Unmarshal(b, &r.status)
	}
	return r
}

// promises checks what every backend promises.
func promises(t *testing.T, root string, r caseResult) {
	t.Helper()
	if !strings.Contains(r.out, "NSBOX_EXIT=0") || !strings.Contains(r.out, "SANDBOX_DONE") || !strings.Contains(r.out, "WROTE_INSIDE") || !strings.Contains(r.out, "META_INSIDE") {
		t.Fatalf("the sandbox did not run, or could not write its workspace:\n%s", r.out)
	}
	// CHMOD_OUTSIDE: a file the container's root owns, outside the
	// workspace (read-only mount natively, the metadata gate under
	// Landlock, which has no right for chmod).
	for _, escape := range []string{"WROTE_OUTSIDE", "CHMOD_OUTSIDE", "READ_SECRET", "NET_OK"} {
		if strings.Contains(r.out, escape) {
			t.Errorf("%s under backend %s:\n%s", escape, r.backend, r.out)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "etc/owned")); err == nil {
		t.Errorf("a file outside the workspace was created (backend %s)", r.backend)
	}
	if !strings.Contains(r.out, "LEFT=0") {
		t.Errorf("processes of the session outlived it (backend %s):\n%s", r.backend, r.out)
	}
}

func TestContainer(t *testing.T) {
	nsbox := nsboxBin(t)
	d := startContainerd(t)
	root := buildRootfs(t, d.dir, nsbox)
	profile := filepath.Join(repoRoot(t), "contrib/kubernetes/seccomp-nsbox.json")

	t.Run("masked-proc", func(t *testing.T) {
		// User namespaces work (no seccomp filter), a fresh /proc does not:
		// the native backend with the container's /proc read-only is
		// preferred over landlock, and says what that leaks.
		r := d.runCase(t, root, "nsbox-masked", []string{"--rootfs", root, "nsbox-masked", "/bin/sh", "-c", script})
		t.Logf("backend %s\n%s", r.backend, r.out)
		if r.backend != "native" {
			t.Fatalf("backend %q under a masked /proc, want native with the outer /proc\n%s", r.backend, r.out)
		}
		promises(t, root, r)
		if gaps := fmt.Sprint(r.notIsolated); !strings.Contains(gaps, "/proc is the outer container's") {
			t.Errorf("the run does not say its /proc is the container's: %s", gaps)
		}
	})
	t.Run("default-seccomp", func(t *testing.T) {
		r := d.runCase(t, root, "nsbox-seccomp", []string{"--seccomp", "--rootfs", root, "nsbox-seccomp", "/bin/sh", "-c", script})
		t.Logf("backend %s\n%s", r.backend, r.out)
		if r.backend == "" && strings.Contains(r.out, "landlock") {
			// containerd's default profile may refuse landlock_* too: then
			// nothing can sandbox here, and nsbox must say so and refuse.
			if !strings.Contains(r.out, "NSBOX_EXIT=125") {
				t.Fatalf("no backend, but nsbox did not refuse:\n%s", r.out)
			}
			t.Skipf("containerd's default seccomp profile refuses Landlock here: nsbox refused with its reason:\n%s", r.out)
		}
		if r.backend != "landlock" {
			t.Fatalf("backend %q under the default seccomp profile, want landlock\n%s", r.backend, r.out)
		}
		promises(t, root, r)
		if gaps := fmt.Sprint(r.status["notIsolated"]); !strings.Contains(gaps, "PID visibility") {
			t.Errorf("status does not say what landlock does not isolate: %s", gaps)
		}
		// The metadata gate runs under the runtime's default profile,
		// which refuses pidfd_getfd and process_vm_readv.
		if gaps := fmt.Sprint(r.notIsolated); !strings.Contains(gaps, "only on files Landlock lets them write") {
			t.Errorf("the run does not say the metadata gate decides modes and times: %s", gaps)
		}
		// required is native or nothing.
		if !strings.Contains(r.out, "REQUIRED_EXIT=125") {
			t.Errorf("--backend required fell back:\n%s", r.out)
		}
	})
	t.Run("unmasked-proc-userns-profile", func(t *testing.T) {
		spec := ociSpec(t, d, root, profile)
		r := d.runCase(t, root, "nsbox-unmasked", []string{"--config", spec, "nsbox-unmasked"})
		t.Logf("backend %s\n%s", r.backend, r.out)
		if r.backend != "native" {
			t.Fatalf("backend %q with /proc unmasked and namespaces allowed, want native\n%s", r.backend, r.out)
		}
		promises(t, root, r)
		if !strings.Contains(r.out, "REQUIRED_EXIT=0") {
			t.Errorf("--backend required refused where native runs:\n%s", r.out)
		}
	})
}

// ociSpec writes containerd's default spec for the script, with the
// rootfs, without the masked and read-only /proc paths (what Kubernetes'
// procMount: Unmasked asks of the runtime), and with the seccomp profile
// of contrib/kubernetes. ctr run has no flag for an unmasked /proc.
func ociSpec(t *testing.T, d *daemon, root, profile string) string {
	t.Helper()
	out, err := exec.Command("ctr", "--address", d.sock, "oci", "spec").Output()
	if err != nil {
		t.Fatalf("ctr oci spec: %v", err)
	}
	var spec map[string]any
	if err := json.Unmarshal(out, &spec); err != nil {
		t.Fatal(err)
	}
	prof, err := os.ReadFile(profile)
	if err != nil {
		t.Fatal(err)
	}
	var seccomp any
	if err := json.Unmarshal(prof, &seccomp); err != nil {
		t.Fatal(err)
	}
	spec["root"] = map[string]any{"path": root}
	proc := spec["process"].(map[string]any)
	proc["args"] = []string{"/bin/sh", "-c", script}
	proc["env"] = []string{"PATH=/bin", "HOME=/root"}
	proc["cwd"] = "/"
	linux := spec["linux"].(map[string]any)
	delete(linux, "maskedPaths")
	delete(linux, "readonlyPaths")
	linux["seccomp"] = seccomp
	delete(linux, "cgroupsPath")
	b, _ := json.MarshalIndent(spec, "", "  ")
	p := filepath.Join(d.dir, "spec-unmasked.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
