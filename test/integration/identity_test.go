package integration

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The sandbox's identity (docs/security.md, "Identity"): a full id range
// inside, never host root outside, idmapped writable binds for root, and
// no set-id file made inside.

// defaultRootStart is namespaces.DefaultRootStart: the host uid of a
// root-started sandbox's root when /etc/subuid has no nsbox entry.
const defaultRootStart = 0xFFFF0000 - 65536

// fullRange says whether u's sandboxes get a full id range here: root
// always (unless /etc/subuid is broken), another user only with
// newuidmap and an entry, which these tests do not add (see
// TestIdentityRootlessFullRange).
func fullRange(t *testing.T, u user) bool {
	r := u.run(t, nil, "status")
	return strings.Contains(r.stdout, "full range")
}

// hostUIDOfSandbox runs a command in a sandbox and returns the host uid
// and gid (real, from the host's /proc/PID/status) of the sandboxed
// process, found by a marker in its command line.
func hostUIDOfSandbox(t *testing.T, u user, env []string) (uid, gid string) {
	t.Helper()
	marker := fmt.Sprintf("nsbox-identity-%d", time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, nsboxBin(t), "run", "--", "/bin/sh", "-c", "echo ready; read x", marker)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "HOME=" + u.home()}, env...)
	cmd.Dir = "/"
	u.asUser(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		stdin.Close()
		cmd.Wait()
		t.Fatalf("sandbox did not start: %q %v; stderr: %s", line, err, stderr.String())
	}
	pids := pidsOfMarker(marker)
	if len(pids) == 0 {
		t.Fatalf("no host process with %s in its command line", marker)
	}
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + pid + "/status")
		if err != nil {
			continue
		}
		var u2, g2 string
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			switch {
			case len(f) > 1 && f[0] == "Uid:":
				u2 = f[1]
			case len(f) > 1 && f[0] == "Gid:":
				g2 = f[1]
			}
		}
		if strings.Contains(string(b), "Name:\tsh") {
			return u2, g2
		}
	}
	t.Fatalf("the sandboxed sh (%s) was not found in /proc", marker)
	return "", ""
}

func TestIdentityHostIDs(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		uid, gid := hostUIDOfSandbox(t, u, nil)
		if u.uid != 0 {
			// Root-less: the caller's own ids, whatever the map.
			if uid != strconv.Itoa(u.uid) {
				t.Errorf("host uid %s, want the caller's %d", uid, u.uid)
			}
			return
		}
		// Root: never host root; the default range without an nsbox
		// entry (this host's /etc/subuid has none).
		if uid == "0" || gid == "0" {
			t.Fatalf("a root-started sandbox runs as host uid %s gid %s", uid, gid)
		}
		if os.Getenv("NSBOX_SUBUID") == "" && !hasNsboxEntry(t) && uid != strconv.Itoa(defaultRootStart) {
			t.Errorf("host uid %s, want the default range's %d", uid, defaultRootStart)
		}
	})
}

func hasNsboxEntry(t *testing.T) bool {
	b, _ := os.ReadFile("/etc/subuid")
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "nsbox:") {
			return true
		}
	}
	return false
}

// NSBOX_SUBUID/NSBOX_SUBGID point the range choice at other files (tests,
// admins): an nsbox entry is used, an overlap or a malformed file is a
// clear error before anything starts.
func TestIdentityRootRangeFromSubIDFiles(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("the root range is chosen for root callers only")
	}
	u := users()[0]
	requireSandbox(t, u)
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good", "someone:100000:65536\nnsbox:300000:65536\n")
	uid, gid := hostUIDOfSandbox(t, u, []string{"NSBOX_SUBUID=" + good, "NSBOX_SUBGID=" + good})
	if uid != "300000" || gid != "300000" {
		t.Errorf("host ids %s/%s, want 300000 from the nsbox entry", uid, gid)
	}
	for name, text := range map[string]string{
		"overlap":   "someone:100000:65536\nnsbox:120000:65536\n",
		"malformed": "nsbox:300000\n",
	} {
		p := write(name, text)
		r := u.run(t, &runOpts{env: []string{"NSBOX_SUBUID=" + p, "NSBOX_SUBGID=" + good}}, "run", "--", "/bin/true")
		if r.code != 125 || !strings.Contains(r.stderr, p) {
			t.Errorf("%s: exit %d, want 125 and an error naming %s; stderr: %s", name, r.code, p, r.stderr)
		}
	}
}

func TestIdentityShadowUnreadable(t *testing.T) {
	if _, err := os.Stat("/etc/shadow"); err != nil {
		t.Skip("no /etc/shadow on this host")
	}
	eachUser(t, func(t *testing.T, u user) {
		r := u.sh(t, nil, nil, "cat /etc/shadow >/dev/null")
		if r.code == 0 {
			t.Fatalf("cat /etc/shadow succeeded inside as %s", u.name)
		}
		if !strings.Contains(r.stderr, "Permission denied") {
			t.Errorf("stderr %q, want Permission denied", r.stderr)
		}
	})
}

// What a sandbox writes to its workspace belongs to the caller on the
// host; chown inside to another id of the range lands as that id.
func TestIdentityWorkspaceOwners(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		r := u.sh(t, &runOpts{dir: ws}, []string{"--rw", ws}, "echo x > made && mkdir sub && id -u")
		expectCode(t, r, 0)
		if got := strings.TrimSpace(r.stdout); got != strconv.Itoa(u.uid) {
			t.Errorf("id -u inside %s, want the caller's %d", got, u.uid)
		}
		for _, n := range []string{"made", "sub"} {
			st, err := os.Stat(filepath.Join(ws, n))
			if err != nil {
				t.Fatal(err)
			}
			s := st.Sys().(*syscall.Stat_t)
			if int(s.Uid) != u.uid || int(s.Gid) != u.gid {
				t.Errorf("%s is owned by %d:%d on the host, want %d:%d", n, s.Uid, s.Gid, u.uid, u.gid)
			}
		}
		if !fullRange(t, u) {
			return
		}
		r = u.sh(t, &runOpts{dir: ws}, []string{"--rw", ws}, `python3 -c 'import os; os.chown("made", 1234, 1234)'`)
		expectCode(t, r, 0)
		st, _ := os.Stat(filepath.Join(ws, "made"))
		if s := st.Sys().(*syscall.Stat_t); u.uid == 0 && (s.Uid != 1234 || s.Gid != 1234) {
			t.Errorf("chown inside to 1234 left %d:%d on the host", s.Uid, s.Gid)
		}
	})
}

// setIDProbe tries to make set-id files and directories in the current
// directory in each way the filters watch, printing each outcome.
const setIDProbe = `cp /bin/true x
chmod 4755 x 2>/dev/null; echo chmod=$?
chmod g+s x 2>/dev/null; echo chmodg=$?
python3 - <<'EOF'
import errno, os
for path, mode in (("y", 0o4755), ("z", 0o2755)):
    try:
        os.open(path, os.O_CREAT | os.O_WRONLY, mode)
        print("open", path, "ok")
    except OSError as e:
        print("open", path, errno.errorcode[e.errno])
try:
    os.mkdir("d", 0o2775)
    print("mkdir setgid ok")
except OSError as e:
    print("mkdir", errno.errorcode[e.errno])
# openat2's mode is behind a pointer: ENOSYS, so callers fall back to
# openat, whose mode the filter reads.
import ctypes, platform
if platform.machine() in ("x86_64", "aarch64"):
    libc = ctypes.CDLL(None, use_errno=True)
    class How(ctypes.Structure):
        _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]
    how = How(os.O_CREAT | os.O_WRONLY, 0o4755, 0)
    r = libc.syscall(437, -100, b"w", ctypes.byref(how), ctypes.sizeof(how))
    print("openat2", errno.errorcode.get(ctypes.get_errno()) if r < 0 else "ok")
EOF`

// No set-user-ID or set-group-ID file can be made, root or not, whatever
// the seccomp profile (a profile of the user's gets nsbox's set-id filter
// beside it: Docker's allows chmod 4755; review 17) and on both backends.
func TestIdentityNoSetIDFiles(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		docker := hdProfileCopy(t, u, "../../pkg/seccomp/testdata/docker-default.json")
		// Lets openat2 through and denies seccomp(2): nsbox could not
		// guard openat2 after it, so the run is refused, saying so.
		noSeccomp := filepath.Join(u.tempDir(t), "noseccomp.json")
		u.writeFile(t, noSeccomp, `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["seccomp"],"action":"SCMP_ACT_ERRNO"}]}`, 0o644)
		if r := u.run(t, nil, "run", "--seccomp", noSeccomp, "--", "true"); r.code != 125 || !strings.Contains(r.stderr, "openat2") {
			t.Errorf("a profile that allows openat2 and denies seccomp(2): exit %d, want 125 naming openat2: %s", r.code, r.stderr)
		}
		for _, v := range []struct {
			name     string
			flags    []string
			landlock bool
		}{
			{"default", nil, false},
			{"docker-profile", []string{"--seccomp", docker}, false},
			{"landlock", []string{"--backend", "landlock"}, true},
			{"landlock-docker-profile", []string{"--backend", "landlock", "--seccomp", docker}, true},
		} {
			t.Run(v.name, func(t *testing.T) {
				if v.landlock {
					requireLandlock(t, u)
				}
				// In a subdirectory: the Landlock backend freezes the
				// workspace's top (docs/security.md, "frozen").
				ws := u.visibleDir(t)
				u.mkdirAs(t, filepath.Join(ws, "sub"))
				r := u.sh(t, &runOpts{dir: ws}, append([]string{"--rw", ws}, v.flags...), "cd sub\n"+setIDProbe)
				expectCode(t, r, 0)
				for _, want := range []string{"chmod=1\n", "chmodg=1\n", "open y EPERM\n", "open z EPERM\n", "mkdir setgid ok\n", "openat2 ENOSYS\n"} {
					if !strings.Contains(r.stdout, want) {
						t.Errorf("missing %q in:\n%s%s", want, r.stdout, r.stderr)
					}
				}
				filepath.Walk(ws, func(p string, fi os.FileInfo, err error) error {
					if err == nil && !fi.IsDir() && fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
						t.Errorf("%s carries %v on the host", p, fi.Mode())
					}
					return nil
				})
			})
		}
	})
}

// makeTarball writes a release-like tarball: members owned by 1234:1234, a
// 0700 directory and old modification times.
func makeTarball(t *testing.T, path string) (dirTime, fileTime time.Time) {
	t.Helper()
	dirTime = time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	fileTime = time.Date(2002, 3, 4, 5, 6, 7, 0, time.UTC)
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, h := range []*tar.Header{
		{Name: "rel/", Typeflag: tar.TypeDir, Mode: 0o700, Uid: 1234, Gid: 1234, Uname: "", Gname: "", ModTime: dirTime, Format: tar.FormatUSTAR},
		{Name: "rel/data.txt", Typeflag: tar.TypeReg, Mode: 0o640, Uid: 1234, Gid: 1234, ModTime: fileTime, Size: 5, Format: tar.FormatUSTAR},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			io.WriteString(tw, "data\n")
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return dirTime, fileTime
}

func TestIdentityTarExtract(t *testing.T) {
	if _, err := exec.LookPath("tar"); err != nil {
		t.Skip("tar is not installed")
	}
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		// In the workspace: /tmp inside is the sandbox's own.
		dirTime, fileTime := makeTarball(t, filepath.Join(ws, "rel.tar"))
		r := u.sh(t, &runOpts{dir: ws}, []string{"--rw", ws}, "tar xf rel.tar")
		expectCode(t, r, 0)
		for _, c := range []struct {
			name  string
			mode  os.FileMode
			mtime time.Time
		}{{"rel", 0o700 | os.ModeDir, dirTime}, {"rel/data.txt", 0o640, fileTime}} {
			st, err := os.Stat(filepath.Join(ws, c.name))
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode() != c.mode || !st.ModTime().Equal(c.mtime) {
				t.Errorf("%s: mode %v mtime %v, want %v %v", c.name, st.Mode(), st.ModTime().UTC(), c.mode, c.mtime)
			}
			s := st.Sys().(*syscall.Stat_t)
			switch {
			case u.uid == 0 && (s.Uid != 1234 || s.Gid != 1234):
				t.Errorf("%s is owned by %d:%d on the host, want the tarball's 1234:1234", c.name, s.Uid, s.Gid)
			case u.uid != 0 && int(s.Uid) != u.uid:
				t.Errorf("%s is owned by %d on the host, want the caller's %d", c.name, s.Uid, u.uid)
			}
		}
	})
}

// id, setgroups, initgroups-style calls and subprocess's user=: they work
// with a full range and setgroups is refused in the single-id fallback
// (CVE-2014-8989).
func TestIdentityGroupsAndUserSwitch(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		full := fullRange(t, u)
		r := u.sh(t, nil, nil, `id -u; id -g; id -G
python3 - <<'EOF'
import errno, os, subprocess
try:
    os.setgroups([1234, 5678])
    print("setgroups", os.getgroups())
except OSError as e:
    print("setgroups", errno.errorcode[e.errno])
try:
    out = subprocess.run(["id", "-u"], user=65534, capture_output=True, text=True)
    print("user=65534", out.stdout.strip(), out.returncode)
except OSError as e:
    print("user=65534", errno.errorcode[e.errno])
EOF`)
		expectCode(t, r, 0)
		want := fmt.Sprintf("%d\n%d\n%d\n", u.uid, u.gid, u.gid)
		if !strings.HasPrefix(r.stdout, want) {
			t.Errorf("id inside:\n%s\nwant it to begin with\n%s", r.stdout, want)
		}
		if full {
			for _, w := range []string{"setgroups [1234, 5678]\n", "user=65534 65534 0\n"} {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("full range: missing %q in\n%s%s", w, r.stdout, r.stderr)
				}
			}
		} else if !strings.Contains(r.stdout, "setgroups EPERM\n") {
			t.Errorf("single-id map: setgroups must be refused:\n%s%s", r.stdout, r.stderr)
		}
	})
}

// The root-less full range through newuidmap needs an /etc/subuid entry
// for uid 65534: newuidmap reads only the real file. The test adds one
// and restores the file byte for byte afterwards; it runs only as root
// and only where newuidmap is installed.
func TestIdentityRootlessFullRange(t *testing.T) {
	u := requireHolderTest(t) // root, newuidmap; the first start leaves a holder, ended after
	addSubIDEntry(t, "65534:1000000:65536")
	if !fullRange(t, u) {
		t.Fatalf("nsbox status does not report a full range for uid 65534 with an entry:\n%s", u.run(t, nil, "status").stdout)
	}
	ws := u.tempDir(t)
	r := u.sh(t, &runOpts{dir: ws}, []string{"--rw", ws}, `cat /proc/self/uid_map; echo x > own
python3 -c 'import os; os.setgroups([7]); os.chown("own", 65534, 7); print("ok")'`)
	expectCode(t, r, 0)
	if !strings.Contains(r.stdout, "1000000") || !strings.Contains(r.stdout, "ok\n") {
		t.Errorf("stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	st, _ := os.Stat(filepath.Join(ws, "own"))
	if s := st.Sys().(*syscall.Stat_t); s.Uid != 65534 || s.Gid != 1000007 {
		t.Errorf("own is %d:%d on the host, want 65534:1000007 (gid 7 of the range)", s.Uid, s.Gid)
	}
}

// addSubIDEntry adds entry to /etc/subuid and /etc/subgid for the test
// and restores both files byte for byte afterwards.
func addSubIDEntry(t *testing.T, entry string) {
	for _, path := range []string{"/etc/subuid", "/etc/subgid"} {
		old, err := os.ReadFile(path)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		existed := err == nil
		st, _ := os.Stat(path)
		t.Cleanup(func() {
			if !existed {
				os.Remove(path)
				return
			}
			os.WriteFile(path, old, st.Mode().Perm())
		})
		line := entry + "\n"
		if len(old) > 0 && !bytes.HasSuffix(old, []byte("\n")) {
			line = "\n" + line
		}
		if err := os.WriteFile(path, append(append([]byte{}, old...), line...), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

var fullRanges sync.Map // user name -> bool

func fullRangeCached(t *testing.T, u user) bool {
	if v, ok := fullRanges.Load(u.name); ok {
		return v.(bool)
	}
	f := fullRange(t, u)
	fullRanges.Store(u.name, f)
	return f
}

// commandCaps is every capability set of a command: empty with the
// single-id map; with a full range CAP_CHOWN, CAP_DAC_OVERRIDE,
// CAP_DAC_READ_SEARCH, CAP_FOWNER, CAP_KILL, CAP_SETGID and CAP_SETUID of
// the sandbox's user namespace (what tar, chown and user= need), which the
// kernel honours on the range's ids only.
func commandCaps(t *testing.T, u user) string {
	if fullRangeCached(t, u) {
		return "00000000000000ef"
	}
	return "0000000000000000"
}

// checkIDMaps checks the maps and setgroups a command sees: the caller's
// own id mapped to itself with setgroups denied (single-id map, also for
// root with --allow-single-id), or 65,536 ids with setgroups allowed, a
// root caller's never including host id 0.
func checkIDMaps(t *testing.T, u user, uidMap, gidMap, setgroups string) {
	t.Helper()
	if !fullRangeCached(t, u) {
		if want := fmt.Sprintf("%d %d 1", u.uid, u.uid); uidMap != want {
			t.Errorf("uid_map = %q, want exactly %q", uidMap, want)
		}
		if want := fmt.Sprintf("%d %d 1", u.gid, u.gid); gidMap != want {
			t.Errorf("gid_map = %q, want exactly %q", gidMap, want)
		}
		if setgroups != "deny" {
			t.Errorf("setgroups = %q, want deny with a single-id map (CVE-2014-8989)", setgroups)
		}
		return
	}
	for name, m := range map[string]string{"uid_map": uidMap, "gid_map": gidMap} {
		f := strings.Fields(m)
		total := 0
		for i := 0; i+2 < len(f); i += 3 {
			n, _ := strconv.Atoi(f[i+2])
			total += n
			if u.uid == 0 && f[i+1] == "0" {
				t.Errorf("%s = %q maps host id 0", name, m)
			}
		}
		if len(f)%3 != 0 || total < 65536 {
			t.Errorf("%s = %q, want a 65,536-id range", name, m)
		}
	}
	if setgroups != "allow" {
		t.Errorf("setgroups = %q, want allow with a full range", setgroups)
	}
}

// A root-started sandbox reaches a workspace below a directory only root
// may enter (a project in /root): the directory is shown through the
// sandbox's idmap, read-only; the host's root-only files elsewhere stay
// out of reach.
func TestIdentityRootWorkspaceBelowPrivateDir(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("a private directory of root's is a root caller's case")
	}
	u := users()[0]
	requireSandbox(t, u)
	base, err := os.MkdirTemp("/var/tmp", "nsbox-it-private-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o700); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(base, "proj")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	r := u.sh(t, &runOpts{dir: ws}, []string{"--rw", ws}, `pwd; echo x > made; echo y > ../outside 2>/dev/null && echo WROTE-PARENT; cat /etc/shadow >/dev/null 2>&1 || echo shadow-denied`)
	expectCode(t, r, 0)
	if !strings.HasPrefix(r.stdout, ws+"\n") || !strings.Contains(r.stdout, "shadow-denied") || strings.Contains(r.stdout, "WROTE-PARENT") {
		t.Errorf("stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	st, err := os.Stat(filepath.Join(ws, "made"))
	if err != nil {
		t.Fatal(err)
	}
	if s := st.Sys().(*syscall.Stat_t); s.Uid != 0 {
		t.Errorf("made is owned by %d on the host, want 0", s.Uid)
	}
}

// A bind on a filesystem that cannot be idmapped (sysfs) stops a root
// start with one line naming the path and the way out; --allow-single-id
// takes that way: the single-id map, with a warning.
func TestIdentityUnidmappableBind(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("only root-started sandboxes idmap their binds")
	}
	if _, err := os.Stat("/sys/kernel"); err != nil {
		t.Skip("no /sys/kernel to bind")
	}
	u := users()[0]
	requireSandbox(t, u)
	r := u.run(t, nil, "run", "--ro", "/sys/kernel:/x", "--", "/bin/true")
	if r.code != 125 || !strings.Contains(r.stderr, "/sys/kernel") || !strings.Contains(r.stderr, "--allow-single-id") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Errorf("exit %d, want 125 and one line naming /sys/kernel and --allow-single-id; stderr:\n%s", r.code, r.stderr)
	}
	r = u.run(t, nil, "run", "--allow-single-id", "--ro", "/sys/kernel:/x", "--", "/bin/cat", "/proc/self/uid_map")
	expectCode(t, r, 0)
	if f := strings.Fields(r.stdout); len(f) != 3 || f[0] != "0" || f[1] != "0" || f[2] != "1" {
		t.Errorf("uid_map %q, want the single-id map", r.stdout)
	}
	if !strings.Contains(r.stderr, "warning") || !strings.Contains(r.stderr, "/sys/kernel") {
		t.Errorf("no warning naming /sys/kernel: %s", r.stderr)
	}
}
