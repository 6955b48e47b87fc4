package mounts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// Build pivots the calling process into the new root, so these tests run it
// in a child: the test binary re-executed (TestMain) in new user, mount and
// PID namespaces, with the plan in the environment. The child builds the
// root, then runs a shell script inside it; a failed Build exits with
// buildFailed and the error on stderr.

const (
	helperPlanEnv   = "NSBOX_MOUNTS_TEST_PLAN"
	helperScriptEnv = "NSBOX_MOUNTS_TEST_SCRIPT"
	buildFailed     = 3
)

func TestMain(m *testing.M) {
	if plan := os.Getenv(helperPlanEnv); plan != "" {
		os.Exit(helperMain(plan, os.Getenv(helperScriptEnv)))
	}
	os.Exit(m.Run())
}

func helperMain(planJSON, script string) int {
	var p Plan
	if err := json.Unmarshal([]byte(planJSON), &p); err != nil {
		fmt.Fprintln(os.Stderr, "bad plan:", err)
		return 2
	}
	if err := Build(&p, -1); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return buildFailed
	}
	err := syscall.Exec("/bin/sh", []string{"sh", "-c", script}, []string{"PATH=/usr/bin:/bin:/usr/sbin:/sbin"})
	fmt.Fprintln(os.Stderr, "exec /bin/sh:", err)
	return 2
}

// buildAndRun builds p in fresh namespaces and runs script inside. It
// returns the script's stdout, stderr and exit code (buildFailed when Build
// failed, with its error on stderr).
func buildAndRun(t *testing.T, p Plan, script string) (stdout, stderr string, code int) {
	t.Helper()
	js, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = []string{helperPlanEnv + "=" + string(js), helperScriptEnv + "=" + script}
	uid, gid := os.Getuid(), os.Getgid()
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:                 syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}},
		GidMappingsEnableSetgroups: false,
		Pdeathsig:                  syscall.SIGKILL,
	}
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.ENOSPC) {
			t.Skipf("user namespaces are not available here: %v", err)
		}
		t.Fatal(err)
	}
	if code == buildFailed && strings.Contains(e.String(), "mount proc") {
		t.Skipf("a fresh /proc cannot be mounted here: %s", e.String())
	}
	return o.String(), e.String(), code
}

// hostTempDir is a directory on the host outside /tmp, which the sandbox
// replaces with its own.
func hostTempDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("/var/tmp", "nsbox-mounts-test-")
	if err != nil {
		t.Skipf("no host directory outside /tmp to test with: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	d, err = filepath.EvalSymlinks(d)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func mustWrite(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBuildTmpfsMax: with Plan.TmpfsMax every writable tmpfs is bounded, in
// bytes and in inodes, whatever its own size (none, smaller, larger).
func TestBuildTmpfsMax(t *testing.T) {
	const max = 8 << 20
	p := Plan{
		TmpfsMax: max,
		Mounts: []Mount{
			{Kind: Tmpfs, Dest: "/scratch"},                     // no size: the kernel's half of RAM
			{Kind: Tmpfs, Dest: "/big", Size: 1 << 30},          // larger than the bound
			{Kind: Tmpfs, Dest: "/small", Size: 2 << 20},        // smaller: kept
			{Kind: Tmpfs, Dest: "/ro", Size: 0, ReadOnly: true}, // bounded too
		},
	}
	// stat -f: total blocks, block size, total inodes.
	out, stderr, code := buildAndRun(t, p, `
for d in /tmp /dev/shm /scratch /big /small /ro /dev /run; do
  echo "$d $(stat -f -c '%b %S %c' $d)"
done
for d in /tmp /dev/shm /scratch /big; do
  if head -c 16777216 /dev/zero 2>/run/err > $d/x; then echo "$d write ok"; else echo "$d write failed: $(cat /run/err)"; fi
  rm -f $d/x
done
i=0
while [ $i -lt 100000 ] && true 2>/dev/null > /dev/shm/f$i; do i=$((i+1)); done
echo "files in /dev/shm: $i"
`)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, stderr, out)
	}
	t.Log(out)
	want := map[string][2]int64{ // bytes, inodes
		"/tmp": {max, max / 4096}, "/dev/shm": {max, max / 4096}, "/scratch": {max, max / 4096},
		"/big": {max, max / 4096}, "/small": {2 << 20, minTmpfsInodes}, "/ro": {max, max / 4096},
		"/dev": {1 << 20, minTmpfsInodes}, "/run": {4 << 20, minTmpfsInodes},
	}
	for _, line := range strings.Split(out, "\n") {
		var d string
		var blocks, bsize, inodes int64
		if n, _ := fmt.Sscanf(line, "%s %d %d %d", &d, &blocks, &bsize, &inodes); n != 4 {
			continue
		}
		w, ok := want[d]
		if !ok {
			continue
		}
		delete(want, d)
		if blocks*bsize != w[0] || inodes != w[1] {
			t.Errorf("%s: %d bytes, %d inodes; want %d bytes, %d inodes", d, blocks*bsize, inodes, w[0], w[1])
		}
	}
	for d := range want {
		t.Errorf("%s: no statfs line", d)
	}
	for _, d := range []string{"/tmp", "/dev/shm", "/scratch", "/big"} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(d) + ` write failed: .*No space left on device$`).MatchString(out) {
			t.Errorf("writing 16 MiB to %s did not fail with ENOSPC under an 8 MiB bound", d)
		}
	}
	// The root of the tmpfs is one inode.
	if !strings.Contains(out, fmt.Sprintf("files in /dev/shm: %d\n", max/4096-1)) {
		t.Errorf("the inode bound of /dev/shm does not hold")
	}
}

// TestBuildTmpfsMaxUnset: without TmpfsMax the sizes are the plan's own.
func TestBuildTmpfsMaxUnset(t *testing.T) {
	out, stderr, code := buildAndRun(t, Plan{TmpSize: 3 << 20, Mounts: []Mount{{Kind: Tmpfs, Dest: "/s", Size: 5 << 20}}},
		`for d in /tmp /s; do echo "$d $(stat -f -c '%b %S' $d)"; done`)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, stderr, out)
	}
	if !strings.Contains(out, fmt.Sprintf("/tmp %d 4096", (3<<20)/4096)) || !strings.Contains(out, fmt.Sprintf("/s %d 4096", (5<<20)/4096)) {
		t.Errorf("sizes changed: %s", out)
	}
}

// TestBuildNestedHostDirs: host_dirs entries below the top level, symlinks
// among them, are recreated at their own path, their parents created.
func TestBuildNestedHostDirs(t *testing.T) {
	d := hostTempDir(t)
	mustWrite(t, d+"/dir/file", "file-content")
	mustWrite(t, d+"/deep/sub/inner", "inner-content")
	if err := os.Symlink("dir/file", d+"/link"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../dir/file", d+"/deep/link2"); err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, h := range []string{"/usr", "/bin", "/lib", "/lib64", "/etc/localtime", "/etc/ssl"} {
		if _, err := os.Lstat(h); err == nil {
			dirs = append(dirs, h)
		}
	}
	// Listed out of order, and one entry already inside another.
	dirs = append(dirs, d+"/deep/sub", d+"/link", d+"/deep/link2", d+"/dir", d+"/dir/file")
	out, stderr, code := buildAndRun(t, Plan{HostDirs: dirs}, fmt.Sprintf(`
ls -A /
echo "link=$(readlink %[1]s/link) $(cat %[1]s/link)"
echo "link2=$(readlink %[1]s/deep/link2) $(cat %[1]s/deep/link2)"
echo "inner=$(cat %[1]s/deep/sub/inner)"
if [ -L /etc/localtime ]; then echo "localtime=$(readlink /etc/localtime)"; fi
if [ -d /etc/ssl ]; then echo "ssl=yes"; fi
`, d))
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, stderr, out)
	}
	t.Log(out)
	for _, w := range []string{"link=dir/file file-content", "link2=../dir/file file-content", "inner=inner-content"} {
		if !strings.Contains(out, w+"\n") {
			t.Errorf("missing %q", w)
		}
	}
	for _, bad := range []string{"\nlink\n", "\nlink2\n", "\nlocaltime\n", "\nssl\n"} {
		if strings.Contains("\n"+out, bad) {
			t.Errorf("%q recreated at the root", strings.TrimSpace(bad))
		}
	}
	if lt, err := os.Readlink("/etc/localtime"); err == nil && !strings.Contains(out, "localtime="+lt+"\n") {
		t.Errorf("/etc/localtime is not the host's symlink (%s)", lt)
	}
	if st, err := os.Stat("/etc/ssl"); err == nil && st.IsDir() && !strings.Contains(out, "ssl=yes\n") {
		t.Errorf("/etc/ssl is missing")
	}
}

// hideWorkspace is a host directory bound read-write at /w, holding
// secrets, as a workspace shared with other sandboxes is.
func hideWorkspace(t *testing.T) string {
	t.Helper()
	d := hostTempDir(t)
	mustWrite(t, d+"/real/.env", "SECRET")
	mustWrite(t, d+"/decoy/.env", "DECOY")
	if err := os.Symlink("decoy", d+"/link"); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestBuildHide: a hide of a path that is there reads as empty, also through
// a bind whose destination is below a symlink inside the sandbox (the
// policy's SRC:DST binds), and a hidden directory is empty.
func TestBuildHide(t *testing.T) {
	d := hideWorkspace(t)
	mustWrite(t, d+"/real/sub/key", "KEY")
	// /lib is a symlink on merged-/usr hosts; /run is the sandbox's tmpfs
	// either way, reached here through a symlink of the plan's own.
	p := Plan{Mounts: []Mount{
		{Kind: Bind, Source: d, Dest: "/w"},
		{Kind: Bind, Source: d + "/real", Dest: "/run/x"},
		{Kind: Bind, Source: d + "/real", Dest: "/w/link/again"}, // through the workspace's own symlink
		{Kind: Hide, Dest: "/w/real/.env"},
		{Kind: Hide, Dest: "/w/real/sub"},
		{Kind: Hide, Dest: "/run/x/.env"},
		{Kind: Hide, Dest: "/w/link/again/.env"},
		{Kind: Hide, Dest: "/w/gone", Optional: true},
	}}
	if err := os.Mkdir(d+"/decoy/again", 0o755); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := buildAndRun(t, p, `
echo "real=[$(cat /w/real/.env)] run=[$(cat /run/x/.env)] again=[$(cat /w/decoy/again/.env)] decoy=[$(cat /w/decoy/.env)]"
echo "sub=[$(ls -A /w/real/sub)]"
`)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, stderr, out)
	}
	if want := "real=[] run=[] again=[] decoy=[DECOY]\nsub=[]\n"; out != want {
		t.Errorf("got %q, want %q", out, want)
	}
}

// TestBuildHideFailsClosed: a plan hide whose path is gone or moved when
// the root is built (a sandbox sharing the workspace renamed its parent,
// or swapped a symlink in, after the policy was resolved) stops the build:
// the secret is never visible unhidden.
func TestBuildHideFailsClosed(t *testing.T) {
	d := hideWorkspace(t)
	// The policy saw the secret at /w/gone/.env, or at /w/link/.env when
	// link was a directory; since, the directory was renamed to real (and
	// a symlink to a decoy put in its place).
	for _, c := range []struct{ dest, want string }{
		{"/w/gone/.env", "hide /w/gone/.env: it was there when the policy was resolved and is gone or moved now: run again"},
		// Following the symlink would hide the decoy.
		{"/w/link/.env", "hide /w/link/.env: a symlink is in the way now where the policy saw none: run again"},
	} {
		p := Plan{Mounts: []Mount{{Kind: Bind, Source: d, Dest: "/w"}, {Kind: Hide, Dest: c.dest}}}
		out, stderr, code := buildAndRun(t, p, `cat /w/real/.env`)
		if code != buildFailed || !strings.Contains(stderr, c.want) {
			t.Errorf("hide %s: exit %d, stdout %q, stderr %q; want exit %d and %q", c.dest, code, out, stderr, buildFailed, c.want)
		}
	}
	// The /proc masks skip what this kernel does not have.
	_, stderr, code := buildAndRun(t, Plan{}, `true`)
	if code != 0 {
		t.Fatalf("a plain plan fails: %s", stderr)
	}
}
