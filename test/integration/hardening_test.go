package integration

// Hardening tests: what a command inside the sandbox can and cannot do to
// the host, checked from inside with a small static Go program
// (testdata/posture) and from outside by looking at the host. Each runs as
// root and as uid 65534 (eachUser). docs/security.md is the threat model
// these tests hold nsbox to.
//
// Helpers here are prefixed with hd so that they cannot collide with the
// other files of this package.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// hdPostureDest is where the posture binary's directory is bound inside.
const hdPostureDest = "/nsbox-posture"

var (
	hdPostureOnce sync.Once
	hdPostureDir  string
	hdPostureErr  error
)

// hdPosture builds testdata/posture once per test run, statically, into a
// directory every test identity can read, and returns that directory. It
// is bound read-only at hdPostureDest in the sandboxes (the host's /tmp is
// not visible inside).
func hdPosture(t *testing.T) string {
	t.Helper()
	hdPostureOnce.Do(func() {
		hdRemoveStalePostureDirs()
		dir, err := os.MkdirTemp("", fmt.Sprintf("nsbox-posture-%d-", os.Getpid()))
		if err != nil {
			hdPostureErr = err
			return
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			hdPostureErr = err
			return
		}
		goTool, err := exec.LookPath("go")
		if err != nil {
			goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		cmd := exec.Command(goTool, "build", "-o", filepath.Join(dir, "posture"), "./testdata/posture")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			hdPostureErr = fmt.Errorf("building testdata/posture: %v\n%s", err, out)
			return
		}
		hdPostureDir = dir
	})
	if hdPostureErr != nil {
		t.Fatal(hdPostureErr)
	}
	return hdPostureDir
}

// hdRemoveStalePostureDirs removes the posture builds of test processes
// that are gone (a test binary has no hook to remove its own at exit).
func hdRemoveStalePostureDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "nsbox-posture-*-*"))
	for _, d := range dirs {
		f := strings.Split(filepath.Base(d), "-")
		if len(f) < 4 {
			continue
		}
		pid, err := strconv.Atoi(f[2])
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			os.RemoveAll(d)
		}
	}
}

// hdRunPosture runs the posture program in a sandbox with the given nsbox
// flags and decodes its JSON report into v.
func hdRunPosture(t *testing.T, u user, flags []string, v any, args ...string) result {
	t.Helper()
	dir := hdPosture(t)
	full := append([]string{"run"}, flags...)
	full = append(full, "--ro", dir+":"+hdPostureDest, "--", hdPostureDest+"/posture")
	full = append(full, args...)
	r := u.run(t, nil, full...)
	if r.code != 0 {
		t.Fatalf("posture %v in nsbox %v: exit %d\nstdout: %s\nstderr: %s", args, flags, r.code, r.stdout, r.stderr)
	}
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		t.Fatalf("posture %v: bad JSON: %v\n%s", args, err, r.stdout)
	}
	return r
}

// hdRunOnHost runs the posture program on the host, unsandboxed, as u: the
// control that shows what the kernel answers without nsbox.
func hdRunOnHost(t *testing.T, u user, v any, args ...string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(hdPosture(t), "posture"), args...)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	u.asUser(cmd)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("posture %v on the host as %s: %v\n%s", args, u.name, err, stderr.String())
	}
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("posture %v on the host: bad JSON: %v\n%s", args, err, out)
	}
}

var (
	hdHelpOnce sync.Once
	hdHelp     string
)

// hdHasRunFlag reports whether `nsbox run --help` lists flag.
func hdHasRunFlag(t *testing.T, flag string) bool {
	t.Helper()
	bin := nsboxBin(t)
	hdHelpOnce.Do(func() {
		out, _ := exec.Command(bin, "run", "--help").CombinedOutput()
		hdHelp = string(out)
	})
	return regexp.MustCompile(`(?m)^\s+(-\w, )?` + regexp.QuoteMeta(flag) + `\b`).MatchString(hdHelp)
}

// hdRequireRunFlag skips when `nsbox run --help` does not list flag: some
// flags are being added to the CLI while these tests are written.
func hdRequireRunFlag(t *testing.T, flag string) {
	t.Helper()
	if !hdHasRunFlag(t, flag) {
		t.Skipf("`nsbox run --help` does not list %s yet", flag)
	}
}

// hdPostureReport mirrors testdata/posture's default report.
type hdPostureReport struct {
	Pid            int               `json:"pid"`
	Ppid           int               `json:"ppid"`
	Uid            []int             `json:"uid"`
	Gid            []int             `json:"gid"`
	Groups         []int             `json:"groups"`
	UidMap         string            `json:"uid_map"`
	GidMap         string            `json:"gid_map"`
	Setgroups      string            `json:"setgroups"`
	CapInh         string            `json:"cap_inh"`
	CapPrm         string            `json:"cap_prm"`
	CapEff         string            `json:"cap_eff"`
	CapBnd         string            `json:"cap_bnd"`
	CapAmb         string            `json:"cap_amb"`
	NoNewPrivs     int               `json:"no_new_privs"`
	Seccomp        int               `json:"seccomp"`
	SeccompFilters int               `json:"seccomp_filters"`
	Securebits     int               `json:"securebits"`
	Namespaces     map[string]uint64 `json:"namespaces"`
	FDs            map[int]struct {
		Target  string `json:"target"`
		Cloexec bool   `json:"cloexec"`
	} `json:"fds"`
	ListFD       int               `json:"list_fd"`
	Hostname     string            `json:"hostname"`
	PID1         map[string]string `json:"pid1"`
	DotDotIsRoot bool              `json:"dotdot_is_root"`
	CwdAfterUp   string            `json:"cwd_after_up"`
	ProcSelfRoot string            `json:"proc_self_root"`
	MountInfo    []string          `json:"mountinfo"`
	Errors       []string          `json:"errors"`
}

var hdTimeNSNote sync.Once

// Securebits every command must run with, locked (capabilities(7)):
// NOROOT, NO_SETUID_FIXUP, KEEP_CAPS_LOCKED, NO_CAP_AMBIENT_RAISE and the
// locks of the other three.
const hdLockedSecurebits = 0xef

func hdOwnNamespaces(t *testing.T) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for _, ns := range []string{"cgroup", "ipc", "mnt", "net", "pid", "user", "uts", "time"} {
		var st unix.Stat_t
		if err := unix.Stat("/proc/self/ns/"+ns, &st); err != nil {
			t.Fatal(err)
		}
		out[ns] = st.Ino
	}
	return out
}

// TestHardeningPosture checks the identity, privileges and view of the world
// a command gets: no capability in any set but, with a full id range, those
// over its own files and ids (commandCaps), no_new_privs, locked
// securebits, a seccomp filter, the caller's ids and the map of its
// identity (checkIDMaps), namespaces of its own, only stdio inherited, a worker
// (PID 1) it cannot inspect, and a mount table that is nsbox's plan and
// nothing of the host's beyond it.
func TestHardeningPosture(t *testing.T) {
	hostNS := hdOwnNamespaces(t)
	eachUser(t, func(t *testing.T, u user) {
		variants := []struct {
			name  string
			flags []string
			need  string
		}{
			{"default", nil, ""},
			// Limits change how commands start (cgroups, or an rlimit shim
			// that re-executes the nsbox binary): the posture must not.
			{"limits", []string{"--pids", "512"}, "--pids"},
		}
		for _, v := range variants {
			t.Run(v.name, func(t *testing.T) {
				if v.need != "" {
					hdRequireRunFlag(t, v.need)
				}
				var p hdPostureReport
				hdRunPosture(t, u, v.flags, &p)
				hdCheckPosture(t, u, &p, hostNS, false)
			})
		}
	})
}

func hdCheckPosture(t *testing.T, u user, p *hdPostureReport, hostNS map[string]uint64, hostNet bool) {
	t.Helper()
	if len(p.Errors) > 0 {
		t.Errorf("posture could not read everything: %v", p.Errors)
	}
	// Privileges: none, or with a full id range only the file and id
	// capabilities of the sandbox's namespace (identity_test.go).
	wantCaps := commandCaps(t, u)
	for name, v := range map[string]string{"CapInh": p.CapInh, "CapPrm": p.CapPrm, "CapEff": p.CapEff, "CapBnd": p.CapBnd, "CapAmb": p.CapAmb} {
		if v != wantCaps {
			t.Errorf("%s = %q inside, want %s", name, v, wantCaps)
		}
	}
	if p.NoNewPrivs != 1 {
		t.Errorf("NoNewPrivs = %d, want 1", p.NoNewPrivs)
	}
	if p.Securebits&hdLockedSecurebits != hdLockedSecurebits {
		t.Errorf("securebits = %#x, want at least %#x (NOROOT, NO_SETUID_FIXUP, NO_CAP_AMBIENT_RAISE, locked)", p.Securebits, hdLockedSecurebits)
	}
	if p.Seccomp != 2 || p.SeccompFilters < 1 {
		t.Errorf("Seccomp = %d with %d filters, want mode 2 (filter) with at least one", p.Seccomp, p.SeccompFilters)
	}
	// Identity: the caller's own ids, one id mapped to itself.
	for i, id := range p.Uid {
		if id != u.uid {
			t.Errorf("uid[%d] = %d (real, effective, saved, fs: %v), want %d", i, id, p.Uid, u.uid)
		}
	}
	for i, id := range p.Gid {
		if id != u.gid {
			t.Errorf("gid[%d] = %d (%v), want %d", i, id, p.Gid, u.gid)
		}
	}
	checkIDMaps(t, u, p.UidMap, p.GidMap, p.Setgroups)
	// Namespaces differ from the host's (the test process's).
	for _, ns := range []string{"user", "mnt", "pid", "ipc", "uts", "cgroup", "net"} {
		if ns == "net" && hostNet {
			continue
		}
		got, ok := p.Namespaces[ns]
		if !ok {
			t.Errorf("no %s namespace inode reported", ns)
		} else if got == hostNS[ns] {
			t.Errorf("%s namespace inside is the host's (inode %d)", ns, got)
		}
	}
	if p.Namespaces["time"] == hostNS["time"] {
		hdTimeNSNote.Do(func() {
			t.Logf("note: the time namespace is the host's (nsbox does not create one; clocks cannot be set anyway)")
		})
	}
	if p.Hostname != "nsbox" {
		t.Errorf("hostname inside = %q, want nsbox", p.Hostname)
	}
	if p.Pid == 1 || p.Ppid != 1 {
		t.Errorf("pid %d, ppid %d: want a child of the worker (PID 1)", p.Pid, p.Ppid)
	}
	// File descriptors: only stdio crossed execve. An fd with FD_CLOEXEC
	// cannot have been inherited through execve: it was opened by the
	// posture process itself (its listing, the Go runtime's cgroup files).
	var inherited []string
	for fd, f := range p.FDs {
		if !f.Cloexec && fd > 2 {
			inherited = append(inherited, fmt.Sprintf("%d -> %s", fd, f.Target))
		}
	}
	for fd := 0; fd <= 2; fd++ {
		if f, ok := p.FDs[fd]; !ok || f.Cloexec {
			t.Errorf("fd %d missing or close-on-exec inside: %+v", fd, p.FDs)
		}
	}
	if len(inherited) > 0 {
		sort.Strings(inherited)
		t.Errorf("fds other than 0, 1, 2 inherited into the command: %v", inherited)
	}
	if _, ok := p.FDs[p.ListFD]; !ok {
		t.Errorf("the listing fd %d is not in the listing: the fd report is unreliable: %+v", p.ListFD, p.FDs)
	}
	// PID 1, the worker, is non-dumpable: none of its magic links, its
	// memory or environment; and ptrace is refused by the filter.
	hdCheckWorkerOpaque(t, p)
	if got := p.PID1["ptrace_peekuser"]; got != "EPERM" {
		t.Errorf("ptrace(PTRACE_PEEKUSER, 1) = %s, want EPERM from the filter (the kernel says ESRCH)", got)
	}
	// The root: ".." of / is /, and /proc/self/root is /.
	if !p.DotDotIsRoot || p.CwdAfterUp != "/" || p.ProcSelfRoot != "/" {
		t.Errorf("root escape: /.. is / = %v, chdir(/../../..) lands in %q, /proc/self/root = %q", p.DotDotIsRoot, p.CwdAfterUp, p.ProcSelfRoot)
	}
	hdCheckMounts(t, p.MountInfo, map[string]bool{hdPostureDest: true}, nil)
}

// hdWorkerChecks are what a command must not do to PID 1, the worker.
var hdWorkerChecks = []string{"readlink_exe", "open_exe", "open_exe_write", "open_environ", "open_mem",
	"readlink_any_fd", "open_any_fd", "readlink_root", "readlink_cwd"}

// hdCheckWorkerOpaque: PID 1 is non-dumpable, so none of its magic links,
// its memory, its environment or its fds (the channel to the supervisor,
// anything it inherited) may be opened from inside.
func hdCheckWorkerOpaque(t *testing.T, p *hdPostureReport) {
	t.Helper()
	for _, k := range hdWorkerChecks {
		got, ok := p.PID1[k]
		if !ok {
			t.Errorf("pid1 check %s missing", k)
			continue
		}
		if strings.HasPrefix(got, "OK") || strings.HasPrefix(got, "open OK") {
			t.Errorf("/proc/1 (the nsbox worker): %s succeeded from inside: %s", k, got)
		}
	}
}

// hdMount is one line of /proc/PID/mountinfo (proc(5)).
type hdMount struct {
	id, parent, dev, root, point, opts, fstype, source string
}

func hdParseMountInfo(lines []string) ([]hdMount, error) {
	var out []hdMount
	for _, l := range lines {
		f := strings.Fields(l)
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if len(f) < 7 || sep < 0 || sep+2 >= len(f) {
			return nil, fmt.Errorf("bad mountinfo line %q", l)
		}
		out = append(out, hdMount{id: f[0], parent: f[1], dev: f[2], root: f[3], point: f[4], opts: f[5], fstype: f[sep+1], source: f[sep+2]})
	}
	return out, nil
}

func hdHasOpt(opts, o string) bool {
	for _, x := range strings.Split(opts, ",") {
		if x == o {
			return true
		}
	}
	return false
}

// hdNsboxMounts are the mount points nsbox itself creates under the
// directories it does not take from the host, and that may be writable.
var hdNsboxMounts = map[string]bool{
	"/proc": true, "/dev": true, "/dev/pts": true, "/dev/shm": true, "/tmp": true, "/run": true,
	"/dev/null": true, "/dev/zero": true, "/dev/full": true, "/dev/random": true, "/dev/urandom": true, "/dev/tty": true,
}

// hdCheckMounts holds the sandbox's mount table to the plan:
//   - the root is a tmpfs of nsbox's, the only mount whose parent is not in
//     the table (pivot_root detached the old root: nothing is stacked under
//     or over it);
//   - every mount is nosuid, and read-only unless nsbox made it (/proc,
//     /dev, /tmp, /run...) or the test asked for it (writable);
//   - below /proc, /dev, /tmp and /run there is nothing but nsbox's own
//     mounts: none of the host's (its /dev/mqueue, /run/user/N, binfmt_misc,
//     anything in its /tmp) shows through;
//   - no mount exposes the root directory of the host's root filesystem, or
//     its /tmp and /run, which the sandbox must not see (extra lists the
//     destinations of binds the test itself made from there).
func hdCheckMounts(t *testing.T, lines []string, extra, writable map[string]bool) {
	t.Helper()
	ms, err := hdParseMountInfo(lines)
	if err != nil {
		t.Fatal(err)
	}
	hostRoot := hdHostRootDev(t)
	ids := map[string]bool{}
	for _, m := range ms {
		ids[m.id] = true
	}
	roots := 0
	for _, m := range ms {
		if m.point == "/" {
			roots++
			if m.fstype != "tmpfs" || !hdHasOpt(m.opts, "ro") {
				t.Errorf("the root is %s (%s), want nsbox's read-only tmpfs: %+v", m.fstype, m.opts, m)
			}
			if ids[m.parent] {
				t.Errorf("the root mount has a parent inside the table: something is stacked under it: %+v", m)
			}
		} else if !ids[m.parent] {
			t.Errorf("mount %s hangs from a mount that is not in the sandbox's table (old root not detached?): %+v", m.point, m)
		}
		if !hdHasOpt(m.opts, "nosuid") {
			t.Errorf("mount %s is not nosuid: %s", m.point, m.opts)
		}
		if !hdNsboxMounts[m.point] && !writable[m.point] && m.point != "/" && !hdHasOpt(m.opts, "ro") {
			t.Errorf("mount %s (%s from %s) is writable inside: %s", m.point, m.fstype, m.root, m.opts)
		}
		for _, top := range []string{"/proc", "/dev", "/tmp", "/run"} {
			if !strings.HasPrefix(m.point, top+"/") || hdNsboxMounts[m.point] || extra[m.point] {
				continue
			}
			// A read-only bind of the sandbox's own proc (/proc/sys made
			// read-only) or a mask (/dev/null, an empty tmpfs over
			// /proc/kcore and the like) is nsbox's, not the host's.
			if top == "/proc" && hdHasOpt(m.opts, "ro") && (m.fstype == "proc" || m.fstype == "tmpfs" || m.root == "/null") {
				continue
			}
			t.Errorf("host mount %s (%s) is visible inside nsbox's own %s", m.point, m.fstype, top)
		}
		if m.dev == hostRoot && !extra[m.point] {
			if m.root == "/" || m.root == "/tmp" || strings.HasPrefix(m.root, "/tmp/") || m.root == "/run" || strings.HasPrefix(m.root, "/run/") {
				t.Errorf("mount %s exposes %s of the host's root filesystem", m.point, m.root)
			}
		}
	}
	if roots != 1 {
		t.Errorf("%d mounts on / inside, want exactly 1 (nsbox's tmpfs)", roots)
	}
}

// hdHostRootDev is the major:minor of the host's root filesystem, from the
// test process's own mount table.
func hdHostRootDev(t *testing.T) string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	ms, err := hdParseMountInfo(strings.Split(strings.TrimSpace(string(b)), "\n"))
	if err != nil {
		t.Fatal(err)
	}
	dev := ""
	for _, m := range ms {
		if m.point == "/" {
			dev = m.dev // the last one is the visible one
		}
	}
	return dev
}

// hdProbes mirrors testdata/posture's probe report.
type hdProbes struct {
	Denied  map[string]string `json:"denied"`
	Allowed map[string]string `json:"allowed"`
	Arch    string            `json:"arch"`
}

// hdProfile is what the tests read of an OCI seccomp profile.
type hdProfile struct {
	DefaultAction string `json:"defaultAction"`
	Syscalls      []struct {
		Name     string            `json:"name"`
		Names    []string          `json:"names"`
		Action   string            `json:"action"`
		ErrnoRet *int              `json:"errnoRet"`
		Args     []json.RawMessage `json:"args"`
		Includes json.RawMessage   `json:"includes"`
		Excludes json.RawMessage   `json:"excludes"`
	} `json:"syscalls"`
}

// hdDefaultDenials reads the shipped default profile and returns, for every
// syscall it refuses whatever the arguments, the errno it answers, and, for
// syscalls refused only for some arguments, the errno of those rules.
func hdDefaultDenials(t *testing.T) (always, byArgs map[string]string) {
	t.Helper()
	b, err := os.ReadFile("../../profiles/seccomp/default.json")
	if err != nil {
		t.Fatalf("reading the default profile: %v", err)
	}
	var p hdProfile
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("default profile: %v", err)
	}
	if p.DefaultAction != "SCMP_ACT_ALLOW" {
		t.Fatalf("the default profile's defaultAction is %s: this test expects a denylist", p.DefaultAction)
	}
	always, byArgs = map[string]string{}, map[string]string{}
	for i, r := range p.Syscalls {
		names := r.Names
		if r.Name != "" {
			names = append(names, r.Name)
		}
		if r.Action != "SCMP_ACT_ERRNO" || r.ErrnoRet == nil {
			t.Fatalf("default profile syscalls[%d] (%v): action %s: this test knows only SCMP_ACT_ERRNO denials", i, names, r.Action)
		}
		if len(r.Includes) > 0 || len(r.Excludes) > 0 {
			t.Fatalf("default profile syscalls[%d] (%v) has includes/excludes: this test does not evaluate them", i, names)
		}
		errno := unix.ErrnoName(syscall.Errno(*r.ErrnoRet))
		target := always
		if len(r.Args) > 0 {
			target = byArgs
		}
		for _, n := range names {
			if prev, ok := target[n]; ok && prev != errno {
				t.Fatalf("default profile: %s is denied with both %s and %s", n, prev, errno)
			}
			target[n] = errno
		}
	}
	return always, byArgs
}

// hdProbeSyscall is the syscall a probe of testdata/posture calls:
// "unshare(CLONE_NEWNS|PARENT)" -> "unshare".
func hdProbeSyscall(probe string) string {
	name, _, _ := strings.Cut(probe, "(")
	return name
}

// hdTimeOffset is CLOCK_REALTIME - CLOCK_BOOTTIME: it stays constant unless
// someone sets the clock.
func hdTimeOffset() time.Duration {
	var rt, bt unix.Timespec
	unix.ClockGettime(unix.CLOCK_REALTIME, &rt)
	unix.ClockGettime(unix.CLOCK_BOOTTIME, &bt)
	return time.Duration(rt.Nano() - bt.Nano())
}

// TestHardeningSeccompDenials runs every denied syscall of the default
// profile inside the sandbox and checks that the filter answers it: the
// errno the profile names (EPERM, ENOSYS for clone3), or a SIGSYS death for
// the x32 and i386 ABIs. Every probe passes arguments that make the kernel
// itself fail the call with another errno (EINVAL, EFAULT, EBADF, ENOTTY,
// ESRCH...) or do nothing, so it is harmless even if the filter let it
// through, and so that EPERM can be told apart from the kernel's answer.
// The control run (no filter: --seccomp unconfined --allow-privileged, or
// the host when those flags are missing) shows that answer; probes where
// the kernel itself says EPERM first (it checks a capability of the initial
// namespace before the arguments) are listed in the log as not
// attributable. Calls the filter must let through are compared with the
// control too, and the host's clock and hostname must be unchanged.
func TestHardeningSeccompDenials(t *testing.T) {
	always, byArgs := hdDefaultDenials(t)
	hostname, _ := os.Hostname()
	eachUser(t, func(t *testing.T, u user) {
		before := hdTimeOffset()
		var got hdProbes
		hdRunPosture(t, u, nil, &got, "probe")

		var ctl hdProbes
		ctlName := "the host, unsandboxed, as " + u.name
		if hdHasRunFlag(t, "--seccomp") && hdHasRunFlag(t, "--allow-privileged") {
			ctlName = "nsbox --seccomp unconfined --allow-privileged"
			hdRunPosture(t, u, []string{"--seccomp", "unconfined", "--allow-privileged"}, &ctl, "probe")
		} else {
			nobody := u
			if os.Getuid() == 0 {
				nobody = user{name: "rootless", uid: 65534, gid: 65534, switchTo: true}
			}
			hdRunOnHost(t, nobody, &ctl, "probe")
		}

		// Every syscall the profile denies outright has a probe here.
		for name := range always {
			if _, ok := got.Denied[name]; !ok && !hdNotOnArch(name, got.Arch) {
				t.Errorf("the default profile denies %s but testdata/posture has no probe for it: add one", name)
			}
		}
		var notAttributable []string
		for probe, res := range got.Denied {
			var want string
			switch {
			case strings.HasPrefix(probe, "abi:"):
				// Another syscall ABI: the bad-architecture action kills the
				// whole process (pkg/seccomp: SECCOMP_RET_KILL_PROCESS).
				want = "signal:SIGSYS"
			case always[probe] != "":
				want = always[probe]
			case byArgs[hdProbeSyscall(probe)] != "":
				want = byArgs[hdProbeSyscall(probe)]
			default:
				t.Errorf("probe %s: the default profile has no rule for %s", probe, hdProbeSyscall(probe))
				continue
			}
			c := ctl.Denied[probe]
			if res != want {
				t.Errorf("%s inside = %s, want %s from the filter (without the filter: %s)", probe, res, want, c)
				continue
			}
			if c == want {
				notAttributable = append(notAttributable, probe)
			}
		}
		if len(notAttributable) > 0 {
			sort.Strings(notAttributable)
			t.Logf("%s gives the same answer without the filter (%s): the kernel refuses these first, so this run cannot show the filter does: %v",
				ctlName, "capability checks of the initial namespace", notAttributable)
		}
		for probe, res := range got.Allowed {
			if c := ctl.Allowed[probe]; res != c {
				t.Errorf("%s inside = %s, want %s as without the filter (the filter is too broad)", probe, res, c)
			}
		}
		if after := hdTimeOffset(); (after - before).Abs() > 2*time.Second {
			t.Errorf("the host's realtime clock moved by %v relative to CLOCK_BOOTTIME during the probes", after-before)
		}
		if now, _ := os.Hostname(); now != hostname {
			t.Errorf("the host's hostname changed from %q to %q", hostname, now)
		}
	})
}

// hdNotOnArch reports syscalls that do not exist on the probe's architecture.
func hdNotOnArch(name, arch string) bool {
	switch name {
	case "iopl", "ioperm", "modify_ldt", "uselib":
		return arch != "amd64" && arch != "386"
	}
	return false
}

// hdOpenPTY opens a new pseudo-terminal of the host's devpts and returns
// the master and the slave (unlocked; not a controlling terminal of the
// test process).
func hdOpenPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetUint32(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("TIOCGPTN: %v", err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open the pty slave: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	// Non-canonical, so that one injected byte is readable at once; echo
	// stays on, so that it would also show up on the master.
	tio, err := unix.IoctlGetTermios(int(s.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	tio.Lflag &^= unix.ICANON
	tio.Cc[unix.VMIN], tio.Cc[unix.VTIME] = 0, 0
	if err := unix.IoctlSetTermios(int(s.Fd()), unix.TCSETS, tio); err != nil {
		t.Fatal(err)
	}
	return m, s
}

// hdDrain reads what is pending on a tty fd without blocking.
func hdDrain(f *os.File) string {
	fd := int(f.Fd())
	unix.SetNonblock(fd, true)
	defer unix.SetNonblock(fd, false)
	var out []byte
	buf := make([]byte, 4096)
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		n, err := unix.Read(fd, buf)
		if n > 0 {
			out = append(out, buf[:n]...)
			continue
		}
		if err != nil && err != unix.EAGAIN {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return string(out)
}

type hdTiocsti struct {
	IsTTY   bool              `json:"is_tty"`
	Results map[string]string `json:"results"`
	Sid     int               `json:"sid"`
}

// hdRunOnTTY runs argv (nsbox or the posture program) with the pty slave as
// its stdin, in a session of its own; with ctty the slave becomes that
// session's controlling terminal, as a terminal is for a shell's job.
func hdRunOnTTY(t *testing.T, u user, slave *os.File, ctty bool, argv ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + u.home(), "LANG=C.UTF-8", "TERM=xterm"}
	cmd.Stdin = slave
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: ctty, Ctty: 0}
	if u.switchTo {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(u.uid), Gid: uint32(u.gid), Groups: []uint32{}}
	}
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("running %v: %v", argv, err)
	}
	return o.String(), e.String(), code
}

// TestHardeningTIOCSTI puts a real terminal on the command's stdin and has
// it try to push input into that terminal (CVE-2017-5226): with the
// terminal as the controlling terminal of nsbox's session (a user's shell),
// and with a terminal no session holds, which the command may acquire with
// TIOCSCTTY, so that only the filter stands in the way. Nothing may arrive
// in the terminal's input queue. A control run on the host shows that the
// same program does inject where nothing stops it.
func TestHardeningTIOCSTI(t *testing.T) {
	t.Run("control", func(t *testing.T) {
		if os.Getuid() != 0 {
			t.Skip("the control runs the probe on the host as uid 65534")
		}
		nobody := user{name: "rootless", uid: 65534, gid: 65534, switchTo: true}
		master, slave := hdOpenPTY(t)
		out, errOut, code := hdRunOnTTY(t, nobody, slave, true, filepath.Join(hdPosture(t), "posture"), "tiocsti")
		if code != 0 {
			t.Fatalf("posture tiocsti on the host: exit %d: %s", code, errOut)
		}
		var r hdTiocsti
		json.Unmarshal([]byte(out), &r)
		pending := hdDrain(slave)
		hdDrain(master)
		t.Logf("unsandboxed, as the terminal's own session: %v; pending input afterwards: %q", r.Results, pending)
		if r.Results["TIOCSTI"] == "OK" && !strings.Contains(pending, "X") {
			t.Errorf("TIOCSTI succeeded on the host but nothing was pending: this test cannot see an injection")
		}
		if r.Results["TIOCSTI"] != "OK" {
			t.Logf("TIOCSTI is refused on this host even unsandboxed (%s; dev.tty.legacy_tiocsti=0?): the sandboxed runs below still must not inject", r.Results["TIOCSTI"])
		}
	})
	eachUser(t, func(t *testing.T, u user) {
		dir := hdPosture(t)
		for _, ctty := range []bool{true, false} {
			name := "nsbox-holds-the-terminal"
			if !ctty {
				name = "terminal-free-to-acquire"
			}
			t.Run(name, func(t *testing.T) {
				master, slave := hdOpenPTY(t)
				out, errOut, code := hdRunOnTTY(t, u, slave, ctty, nsboxBin(t), "run", "--ro", dir+":"+hdPostureDest, "--", hdPostureDest+"/posture", "tiocsti")
				if code != 0 {
					t.Fatalf("nsbox run posture tiocsti: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
				}
				var r hdTiocsti
				if err := json.Unmarshal([]byte(out), &r); err != nil {
					t.Fatalf("bad JSON %q: %v", out, err)
				}
				pending := hdDrain(slave)
				echoed := hdDrain(master)
				if !r.IsTTY {
					t.Fatalf("the command's stdin is not a terminal inside: the test is void (%+v)", r)
				}
				t.Logf("inside: %v (TIOCSCTTY %s)", r.Results, r.Results["TIOCSCTTY"])
				if strings.ContainsAny(pending, "XY") {
					t.Errorf("input was injected into the terminal: %q pending after the sandbox ended", pending)
				}
				if strings.ContainsAny(echoed, "XY") {
					t.Errorf("the terminal echoed injected input to its master: %q", echoed)
				}
				for _, k := range []string{"TIOCSTI", "TIOCSTI_high_bits"} {
					if r.Results[k] != "EPERM" {
						t.Errorf("%s inside = %s, want EPERM", k, r.Results[k])
					}
				}
			})
		}
	})
}

// TestHardeningSetuidBinary checks that a set-uid-root program, and one with
// file capabilities, grants nothing inside: every mount is nosuid,
// no_new_privs is set, root-less the file's owner is not even mapped, and
// as root SECBIT_NOROOT keeps uid 0 from meaning capabilities. A control run
// on the host shows the same file does make uid 65534 root there.
func TestHardeningSetuidBinary(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to make a set-uid-root file")
	}
	src := filepath.Join(hdPosture(t), "posture")
	// Two places: a directory bound with --ro, and a directory of the host
	// root, which nsbox binds read-only at the same path (/var/tmp).
	bound, err := os.MkdirTemp("", "nsbox-suid-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(bound) })
	hostDir, err := os.MkdirTemp("/var/tmp", "nsbox-suid-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(hostDir) })
	fcap := false
	for _, d := range []string{bound, hostDir} {
		os.Chmod(d, 0o755)
		hdCopyFile(t, src, filepath.Join(d, "posture-suid"), 0o755)
		if err := os.Chown(filepath.Join(d, "posture-suid"), 0, 0); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(d, "posture-suid"), os.ModeSetuid|0o755); err != nil {
			t.Fatal(err)
		}
		hdCopyFile(t, src, filepath.Join(d, "posture-fcap"), 0o755)
		if setcap, err := exec.LookPath("setcap"); err == nil {
			if out, err := exec.Command(setcap, "cap_sys_admin,cap_dac_override,cap_setuid+ep", filepath.Join(d, "posture-fcap")).CombinedOutput(); err == nil {
				fcap = true
			} else {
				t.Logf("setcap: %v %s", err, out)
			}
		}
	}
	// Control: on the host, the set-uid file makes uid 65534 root.
	nobody := user{name: "rootless", uid: 65534, gid: 65534, switchTo: true}
	var ctl hdPostureReport
	hdRunOnHostPath(t, nobody, filepath.Join(hostDir, "posture-suid"), &ctl)
	if len(ctl.Uid) < 2 || ctl.Uid[1] != 0 {
		t.Fatalf("control: the set-uid-root file did not make uid 65534 root on the host (uid %v): this test is void", ctl.Uid)
	}
	eachUser(t, func(t *testing.T, u user) {
		progs := []string{"/suid/posture-suid", hostDir + "/posture-suid"}
		if fcap {
			progs = append(progs, "/suid/posture-fcap", hostDir+"/posture-fcap")
		}
		for _, prog := range progs {
			r := u.run(t, nil, "run", "--ro", bound+":/suid", "--", prog)
			if r.code != 0 {
				t.Errorf("%s inside: exit %d: %s", prog, r.code, r.stderr)
				continue
			}
			var p hdPostureReport
			if err := json.Unmarshal([]byte(r.stdout), &p); err != nil {
				t.Fatalf("%s: %v", prog, err)
			}
			if len(p.Uid) != 4 || p.Uid[1] != u.uid || p.Uid[2] != u.uid {
				t.Errorf("%s as %s: uids (real, effective, saved, fs) = %v, want all %d", prog, u.name, p.Uid, u.uid)
			}
			if want := commandCaps(t, u); p.CapEff != want || p.CapPrm != want {
				t.Errorf("%s as %s gained capabilities: CapPrm %s CapEff %s", prog, u.name, p.CapPrm, p.CapEff)
			}
		}
	})
}

func hdCopyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, mode); err != nil {
		t.Fatal(err)
	}
}

func hdRunOnHostPath(t *testing.T, u user, prog string, v any, args ...string) {
	t.Helper()
	cmd := exec.Command(prog, args...)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	u.asUser(cmd)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s on the host: %v", prog, err)
	}
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("%s on the host: %v", prog, err)
	}
}

// TestHardeningNestedUserns checks that a command cannot create a user
// namespace by default, can with --allow-userns, and that --allow-userns
// lets through only the user namespace: a mount namespace next to it stays
// refused.
func TestHardeningNestedUserns(t *testing.T) {
	if _, err := os.Stat("/usr/bin/unshare"); err != nil {
		t.Skip("needs /usr/bin/unshare")
	}
	eachUser(t, func(t *testing.T, u user) {
		r := u.run(t, nil, "run", "--", "/usr/bin/unshare", "-U", "true")
		if r.code == 0 {
			t.Fatalf("unshare -U succeeded inside by default")
		}
		if !strings.Contains(r.stderr, "Operation not permitted") {
			t.Errorf("unshare -U by default: %q, want Operation not permitted", r.stderr)
		}
		hdRequireRunFlag(t, "--allow-userns")
		r = u.run(t, nil, "run", "--allow-userns", "--", "/usr/bin/unshare", "-U", "true")
		expectCode(t, r, 0)
		r = u.run(t, nil, "run", "--allow-userns", "--", "/usr/bin/unshare", "-U", "-m", "true")
		if r.code == 0 {
			t.Errorf("unshare -U -m succeeded with --allow-userns: only the user namespace may be allowed")
		}
	})
}

// hdProfileCopy copies a seccomp profile where u can read it.
func hdProfileCopy(t *testing.T, u user, src string) string {
	t.Helper()
	dir := u.tempDir(t)
	dst := filepath.Join(dir, filepath.Base(src))
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	u.writeFile(t, dst, string(b), 0o644)
	return dst
}

// TestHardeningDockerProfile loads Docker's own default profile, an
// allowlist, with --seccomp FILE: ordinary commands work, and what Docker
// refuses to a container without capabilities is refused.
func TestHardeningDockerProfile(t *testing.T) {
	hdRequireRunFlag(t, "--seccomp")
	eachUser(t, func(t *testing.T, u user) {
		prof := hdProfileCopy(t, u, "../../pkg/seccomp/testdata/docker-default.json")
		r := u.run(t, nil, "run", "--seccomp", prof, "--", "/bin/sh", "-c", "true")
		expectCode(t, r, 0)
		var p hdPostureReport
		hdRunPosture(t, u, []string{"--seccomp", prof}, &p)
		if p.Seccomp != 2 || p.NoNewPrivs != 1 || p.CapEff != commandCaps(t, u) {
			t.Errorf("under Docker's profile: Seccomp %d, NoNewPrivs %d, CapEff %s", p.Seccomp, p.NoNewPrivs, p.CapEff)
		}
		var got hdProbes
		hdRunPosture(t, u, []string{"--seccomp", prof}, &got, "probe")
		// Docker's default refuses these to a container without
		// CAP_SYS_ADMIN (or at all), and answers clone3 with ENOSYS.
		for probe, want := range map[string]string{
			"keyctl": "EPERM", "add_key": "EPERM", "bpf": "EPERM", "mount": "EPERM", "umount2": "EPERM",
			"unshare(CLONE_NEWUSER|PARENT)": "EPERM", "clone(CLONE_NEWUSER|SIGHAND)": "EPERM",
			"clone3": "ENOSYS", "open_by_handle_at": "EPERM", "kexec_load": "EPERM",
		} {
			if got.Denied[probe] != want {
				t.Errorf("%s under Docker's profile = %s, want %s", probe, got.Denied[probe], want)
			}
		}
		if got.Allowed["getpid"] != "OK" {
			t.Errorf("getpid under Docker's profile: %s", got.Allowed["getpid"])
		}
	})
}

// TestHardeningBadSeccompProfile checks that a profile nsbox cannot use is a
// failure of nsbox (exit 125) before anything starts, with one line naming
// the file and, where there is one, the field at fault.
func TestHardeningBadSeccompProfile(t *testing.T) {
	hdRequireRunFlag(t, "--seccomp")
	eachUser(t, func(t *testing.T, u user) {
		dir := u.tempDir(t)
		cases := []struct {
			name, content string
			mode          os.FileMode
			want          []string
		}{
			{"syntax.json", `{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [`, 0o644, []string{"invalid JSON"}},
			{"type.json", `{"defaultAction": 5}`, 0o644, []string{"defaultAction"}},
			{"unknown-syscall.json", `{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["getpid", "nsbox_no_such_syscall"], "action": "SCMP_ACT_ERRNO"}]}`, 0o644,
				[]string{"syscalls[0].names[1]", "nsbox_no_such_syscall"}},
			{"unknown-action.json", `{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["getpid"], "action": "SCMP_ACT_MAYBE"}]}`, 0o644,
				[]string{"syscalls[0].action", "SCMP_ACT_MAYBE"}},
		}
		if u.uid != 0 {
			// Root reads a mode-000 file anyway.
			cases = append(cases, struct {
				name, content string
				mode          os.FileMode
				want          []string
			}{"unreadable.json", `{"defaultAction": "SCMP_ACT_ALLOW"}`, 0o000, []string{"permission denied"}})
		}
		for _, c := range cases {
			p := filepath.Join(dir, c.name)
			u.writeFile(t, p, c.content, 0o644)
			os.Chmod(p, c.mode)
			r := u.run(t, nil, "run", "--json-status", "fd:1", "--seccomp", p, "--", "/bin/sh", "-c", "echo NSBOX-COMMAND-RAN")
			if r.code != 125 {
				t.Errorf("%s: exit %d, want 125\nstderr: %s", c.name, r.code, r.stderr)
			}
			if strings.Contains(r.stdout, "NSBOX-COMMAND-RAN") || strings.Contains(r.stdout, `"event":"started"`) {
				t.Errorf("%s: the sandbox started: %s", c.name, r.stdout)
			}
			msg := hdErrorLine(r.stderr)
			for _, w := range append([]string{p}, c.want...) {
				if !strings.Contains(msg, w) {
					t.Errorf("%s: error %q does not name %q", c.name, msg, w)
				}
			}
			if strings.Contains(r.stderr, "panic") {
				t.Errorf("%s: %s", c.name, r.stderr)
			}
		}
	})
}

// hdErrorLine is nsbox's error line from stderr, without warnings and notes.
func hdErrorLine(stderr string) string {
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if strings.HasPrefix(l, "nsbox: warning:") || strings.HasPrefix(l, "nsbox: note:") {
			continue
		}
		lines = append(lines, l)
	}
	return strings.Join(lines, "\n")
}

func hdSHA256(t *testing.T, p string) string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

type hdSelfExe struct {
	Pid          int               `json:"pid"`
	Exe          string            `json:"exe"`
	Results      map[string]string `json:"results"`
	OpenBinWrite string            `json:"open_bin_write"`
	Error        string            `json:"error"`
}

// TestHardeningSelfBinary checks that the nsbox binary cannot be changed
// from inside (CVE-2019-5736): with host APIs the binary is visible at
// /run/nsbox/bin/nsbox for `nsbox call`; neither that path nor
// /proc/PID/exe of a running `nsbox call` opens for writing, the worker's
// /proc/1/exe does not open at all, and the host's file is unchanged.
func TestHardeningSelfBinary(t *testing.T) {
	hdRequireRunFlag(t, "--host-api")
	bin := nsboxBin(t)
	before := hdSHA256(t, bin)
	eachUser(t, func(t *testing.T, u user) {
		const inside = "/run/nsbox/bin/nsbox"
		var s hdSelfExe
		hdRunPosture(t, u, []string{"--host-api", "x.y"}, &s, "selfexe", inside)
		if s.Error != "" {
			t.Fatalf("selfexe: %s (%+v)", s.Error, s)
		}
		t.Logf("nsbox call running as pid %d inside, /proc/%d/exe -> %s: %v", s.Pid, s.Pid, s.Exe, s.Results)
		writeRefused := map[string]bool{"EROFS": true, "ETXTBSY": true, "EACCES": true, "EPERM": true}
		if !writeRefused[s.OpenBinWrite] {
			t.Errorf("open(%s, O_WRONLY) inside = %s, want EROFS or ETXTBSY", inside, s.OpenBinWrite)
		}
		for _, k := range []string{"open_wronly", "open_rdwr", "reopen_o_path_wronly"} {
			got := s.Results[k]
			if strings.HasPrefix(got, "O_PATH ") {
				continue // the link did not even open O_PATH
			}
			if !writeRefused[got] {
				t.Errorf("/proc/PID/exe of the running nsbox binary, %s: %s, want EROFS or ETXTBSY", k, got)
			}
		}
		var p hdPostureReport
		hdRunPosture(t, u, []string{"--host-api", "x.y"}, &p)
		ms, err := hdParseMountInfo(p.MountInfo)
		if err != nil {
			t.Fatal(err)
		}
		bound := false
		for _, m := range ms {
			if m.point == inside {
				bound = true
				if !hdHasOpt(m.opts, "ro") || !hdHasOpt(m.opts, "nosuid") {
					t.Errorf("%s is mounted %s, want a read-only, nosuid bind", inside, m.opts)
				}
			}
		}
		if !bound {
			t.Errorf("%s is not a mount point of its own inside: %v", inside, p.MountInfo)
		}
		if got := p.PID1["open_exe"]; got == "OK" {
			t.Errorf("/proc/1/exe (the worker's binary) opens inside")
		}
		if got := p.PID1["open_exe_write"]; got == "OK" {
			t.Errorf("/proc/1/exe opens for writing inside")
		}
		// fd 3 is the hostCall socket; nothing else crosses.
		for fd, f := range p.FDs {
			if fd > 3 && !f.Cloexec {
				t.Errorf("fd %d -> %s inherited with host APIs", fd, f.Target)
			}
		}
	})
	if after := hdSHA256(t, bin); after != before {
		t.Fatalf("the host's nsbox binary %s changed during the test (sha256 %s -> %s)", bin, before, after)
	}
}

// hdHostGlobalFiles are files whose writes change the whole host, not the
// sandbox's namespaces. Opening one for writing (nothing is written) must
// fail inside. /proc/sys/kernel/core_pattern is the worst: a "|program"
// pattern runs that program as root in the host's namespaces when any
// process dumps core.
var hdHostGlobalFiles = []string{
	"/proc/sys/kernel/core_pattern",
	"/proc/sys/kernel/modprobe",
	"/proc/sys/kernel/printk_ratelimit",
	"/proc/sys/kernel/randomize_va_space",
	"/proc/sys/vm/drop_caches",
	"/proc/sys/vm/overcommit_memory",
	"/proc/sys/fs/file-max",
	"/proc/sys/fs/suid_dumpable",
	"/proc/sysrq-trigger",
	"/sys/kernel/uevent_helper",
	"/sys/kernel/mm/transparent_hugepage/enabled",
	"/sys/fs/cgroup/cgroup.procs",
	"/sys/fs/cgroup/unified/cgroup.procs",
}

// TestHardeningHostFilesystem checks the host's files from inside: the
// host-global files of /proc/sys, /proc/sysrq-trigger and /sys do not open
// for writing (their values are compared before and after), nor do the
// host's /etc/passwd and the nsbox binary at its host path; the host's /tmp
// and /run are not visible.
func TestHardeningHostFilesystem(t *testing.T) {
	var files []string
	values := map[string]string{}
	for _, f := range hdHostGlobalFiles {
		if _, err := os.Stat(f); err != nil {
			continue
		}
		files = append(files, f)
		if b, err := os.ReadFile(f); err == nil {
			values[f] = string(b)
		}
	}
	// Markers in the host's /tmp and /run, which the sandbox gets fresh.
	marker, err := os.MkdirTemp("", "nsbox-host-tmp-marker-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(marker)
	os.Chmod(marker, 0o755)
	markers := []string{marker}
	if f, err := os.CreateTemp("/run", "nsbox-host-run-marker-"); err == nil {
		f.Close()
		os.Chmod(f.Name(), 0o644)
		defer os.Remove(f.Name())
		markers = append(markers, f.Name())
	}
	eachUser(t, func(t *testing.T, u user) {
		bin := nsboxBin(t)
		var w map[string]string
		hdRunPosture(t, u, nil, &w, append([]string{"openw", "/etc/passwd", bin}, files...)...)
		for _, f := range append([]string{"/etc/passwd", bin}, files...) {
			if got := w[f]; got == "OK" {
				t.Errorf("%s opens for writing inside as %s: the sandbox can change the host", f, u.name)
			}
		}
		// With --net host, /proc/sys/net is the host's network namespace's.
		const somaxconn = "/proc/sys/net/core/somaxconn"
		var wn map[string]string
		hdRunPosture(t, u, []string{"--net", "host"}, &wn, "openw", somaxconn)
		if wn[somaxconn] == "OK" {
			t.Errorf("%s (the host's, with --net host) opens for writing inside as %s", somaxconn, u.name)
		}
		var r map[string]string
		hdRunPosture(t, u, nil, &r, append([]string{"openr"}, markers...)...)
		for _, m := range markers {
			if got := r[m]; got != "ENOENT" {
				t.Errorf("the host's %s is visible inside: open = %s, want ENOENT", m, got)
			}
		}
	})
	for f, v := range values {
		if !strings.HasPrefix(f, "/proc/sys/") {
			continue // /sys/fs/cgroup/cgroup.procs and the like change by themselves
		}
		if b, err := os.ReadFile(f); err == nil && string(b) != v {
			t.Errorf("host file %s changed during the test: %q -> %q", f, v, b)
		}
	}
}

// TestHardeningWorkerHoldsNoHostFDs looks at the worker (PID 1 of the
// sandbox) from the host while a command runs: it must hold no descriptor
// of a host file the caller left open (here a directory, passed as fd 7).
// Commands do not inherit such fds (TestCallerFDsAreClosed), but the
// worker is a process inside the sandbox's namespaces too: an fd of a host
// directory is a way out of its root (CVE-2024-21626 class) should the
// worker ever be subverted, and worker.go's "close inherited fds" step
// promises that none survives. The worker's threads are logged: the main
// thread, which forks commands, has dropped every capability; the Go
// runtime's other threads keep those of the sandbox's user namespace (see
// docs/security.md).
func TestHardeningWorkerHoldsNoHostFDs(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		dir := u.tempDir(t)
		d, err := os.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		var dirSt unix.Stat_t
		unix.Fstat(int(d.Fd()), &dirSt)
		status := filepath.Join(dir, "status.jsonl")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, nsboxBin(t), "run", "--json-status", status, "--", "/bin/sleep", "3")
		cmd.Dir = "/"
		cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + u.home(), "LANG=C.UTF-8"}
		cmd.ExtraFiles = []*os.File{nil, nil, nil, nil, d} // fd 7 in nsbox
		u.asUser(cmd)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Wait()
		pid := 0
		for deadline := time.Now().Add(20 * time.Second); pid == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			b, _ := os.ReadFile(status)
			for _, l := range strings.Split(string(b), "\n") {
				var ev struct {
					Event string `json:"event"`
					Pid   int    `json:"pid"`
				}
				if json.Unmarshal([]byte(l), &ev) == nil && ev.Event == "started" {
					pid = ev.Pid
				}
			}
		}
		if pid == 0 {
			cmd.Process.Kill()
			t.Fatalf("no started event from nsbox: %s", stderr.String())
		}
		fdDir := fmt.Sprintf("/proc/%d/fd", pid)
		ents, err := os.ReadDir(fdDir)
		if err != nil {
			t.Fatalf("listing the worker's fds: %v", err)
		}
		var all []string
		for _, e := range ents {
			p := filepath.Join(fdDir, e.Name())
			target, _ := os.Readlink(p)
			all = append(all, e.Name()+" -> "+target)
			var st unix.Stat_t
			if unix.Stat(p, &st) == nil && st.Dev == dirSt.Dev && st.Ino == dirSt.Ino {
				t.Errorf("the worker (pid %d) holds fd %s -> %s, the host directory the caller left open", pid, e.Name(), target)
			}
		}
		t.Logf("worker fds: %v", all)
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		for _, task := range tasks {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, task.Name()))
			for _, l := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(l, "CapEff:") {
					t.Logf("worker thread %s: %s", task.Name(), strings.Join(strings.Fields(l), " "))
				}
			}
		}
	})
}

// TestHardeningPrivilegedCannotReachWorker: --allow-privileged lets commands
// keep the capabilities of the sandbox's user namespace. The worker, PID 1,
// runs in that same user namespace and holds the channel to the supervisor
// and whatever descriptors it was started with; the capabilities must not
// reach it (CAP_SYS_PTRACE there would override its non-dumpable flag), or
// "capabilities inside the sandbox" becomes the worker's access, which
// includes host files. The test passes a host directory as fd 7, as a
// careless caller would, and checks it cannot be reached through /proc/1.
func TestHardeningPrivilegedCannotReachWorker(t *testing.T) {
	hdRequireRunFlag(t, "--allow-privileged")
	eachUser(t, func(t *testing.T, u user) {
		hostDir := u.tempDir(t)
		d, err := os.Open(hostDir)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		dir := hdPosture(t)
		r := u.run(t, &runOpts{extraFiles: []*os.File{nil, nil, nil, nil, d}}, "run", "--allow-privileged",
			"--ro", dir+":"+hdPostureDest, "--", hdPostureDest+"/posture")
		if r.code != 0 {
			t.Fatalf("posture with --allow-privileged: exit %d: %s", r.code, r.stderr)
		}
		var p hdPostureReport
		if err := json.Unmarshal([]byte(r.stdout), &p); err != nil {
			t.Fatal(err)
		}
		hdCheckWorkerOpaque(t, &p)
		var w map[string]string
		hdRunPosture(t, u, []string{"--allow-privileged"}, &w, "openw", "/proc/1/mem", "/proc/1/fd/7")
		for f, got := range w {
			if got == "OK" {
				t.Errorf("%s opens for writing inside with --allow-privileged", f)
			}
		}
	})
}

// TestHardeningHiddenSecrets checks --hide, the read deny: a hidden
// directory reads as empty and cannot be written; a hidden file is
// /dev/null (writes to it are accepted and discarded, as /dev/null's are);
// the host's files are unchanged.
func TestHardeningHiddenSecrets(t *testing.T) {
	hdRequireRunFlag(t, "--hide")
	eachUser(t, func(t *testing.T, u user) {
		dir := u.tempDir(t)
		secretDir := filepath.Join(dir, "dot-ssh")
		if err := os.Mkdir(secretDir, 0o700); err != nil {
			t.Fatal(err)
		}
		os.Chown(secretDir, u.uid, u.gid)
		u.writeFile(t, filepath.Join(secretDir, "id_ed25519"), "PRIVATE-KEY-MATERIAL\n", 0o600)
		envFile := filepath.Join(dir, ".env")
		u.writeFile(t, envFile, "API_TOKEN=TOPSECRET\n", 0o600)
		r := u.sh(t, nil, []string{"--rw", dir, "--hide", secretDir, "--hide", envFile}, fmt.Sprintf(`
ls -A %[1]s; cat %[1]s/id_ed25519 2>/dev/null; cat %[2]s
echo x > %[1]s/new 2>/dev/null && echo WROTE-DIR
echo SHOULD-VANISH >> %[2]s 2>/dev/null; cat %[2]s
true`, secretDir, envFile))
		expectCode(t, r, 0)
		for _, leak := range []string{"PRIVATE-KEY-MATERIAL", "TOPSECRET", "id_ed25519", "WROTE-DIR", "SHOULD-VANISH"} {
			if strings.Contains(r.stdout, leak) {
				t.Errorf("--hide leaked or allowed %q: %q", leak, r.stdout)
			}
		}
		if b, _ := os.ReadFile(envFile); string(b) != "API_TOKEN=TOPSECRET\n" {
			t.Errorf("the hidden file changed on the host: %q", b)
		}
		if _, err := os.Stat(filepath.Join(secretDir, "new")); err == nil {
			t.Errorf("a file was created in the hidden directory on the host")
		}
	})
}

// TestHardeningTmpfsBoundedByMemoryLimit: with --memory, the sandbox's
// writable tmpfs (/dev/shm, /tmp, --tmpfs) hold at most the memory limit,
// in bytes and in inodes. tmpfs pages are not counted by RLIMIT_DATA, so
// where limits fall back to rlimits an unbounded /dev/shm (half of the
// host's RAM by default) was a way around --memory. Under cgroups the group
// is charged for them too, so the limit may end the command first (137).
func TestHardeningTmpfsBoundedByMemoryLimit(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		r := u.sh(t, nil, []string{"--json-status", "fd:1", "--memory", "64M", "--tmpfs", "/scratch"}, `
for d in /dev/shm /tmp /scratch; do
  head -c 100M /dev/zero 2>/run/err > $d/x
  echo "write $d rc=$? size=$(stat -c %s $d/x) $(cat /run/err)"
  rm -f $d/x
done
i=0
while [ $i -lt 40000 ] && true 2>/dev/null > /dev/shm/f$i; do i=$((i+1)); done
echo "files=$i"`)
		mode, _ := limitStatus(t, r.stdout)
		for _, d := range []string{"/dev/shm", "/tmp", "/scratch"} {
			if strings.Contains(r.stdout, "write "+d+" rc=0") || strings.Contains(r.stdout, "write "+d+" rc=1 size=104857600") {
				t.Errorf("%s took 100 MiB under --memory 64M (%s limits): %s", d, mode, r.stdout)
			}
		}
		switch {
		case r.code == 0:
			for _, d := range []string{"/dev/shm", "/tmp", "/scratch"} {
				if !regexp.MustCompile(`(?m)^write ` + regexp.QuoteMeta(d) + ` rc=1 size=67108864 .*No space left on device$`).MatchString(r.stdout) {
					t.Errorf("writing 100 MiB to %s did not stop at 64 MiB with ENOSPC (%s limits): %s", d, mode, r.stdout)
				}
			}
			// One inode per 4 KiB of the bound, the tmpfs root being one.
			if !strings.Contains(r.stdout, "files=16383\n") {
				t.Errorf("the inodes of /dev/shm are not bounded by the memory limit: %s", r.stdout)
			}
		case r.code == 137 && mode != "rlimit" && strings.Contains(r.stderr, "memory limit 64 MiB reached"):
			// The cgroup charged the tmpfs pages and ended the command.
		default:
			t.Fatalf("exit %d (%s limits)\nstdout: %s\nstderr: %s", r.code, mode, r.stdout, r.stderr)
		}
	})
}

// TestHardeningHideRaceFailsClosed: a hidden file renamed between the
// policy's walk and the building of the root (another process sharing the
// workspace can do that) is never shown unhidden: the build fails closed,
// and nsbox resolves the policy again (a note says so) and builds anew,
// now hiding the file at its new place. The rename is made the moment the
// policy's .env walk is done with the directory (inotify: its listing, then
// its close), which lands it in that window; the file, or its directory, is
// renamed to a name the hide rules still match. A rename that comes later
// finds the hide in place, and the hide moves with the file.
func TestHardeningHideRaceFailsClosed(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		for _, c := range []struct{ file, from, to, read string }{
			{".env", "a/.env", "a/.env.moved", "a/.env.moved"},
			{".env", "a", "moved", "moved/.env"},
			// Hidden (.env*) and protected (a nested .envrc) both: the
			// protect made a placeholder where the file had been, the
			// hide covered that, and the file ran visible at its new
			// name, until a hidden path was no longer protected too.
			{".envrc", "a/.envrc", "a/.envrc.moved", "a/.envrc.moved"},
		} {
			raced := false
			for try := 0; try < 10 && !raced; try++ {
				raced = hdHideRace(t, u, c.file, c.from, c.to, c.read)
			}
			if !raced {
				t.Errorf("rename %s %s: the race was never hit", c.from, c.to)
			}
		}
	})
}

// hdHideRace runs one race of TestHardeningHideRaceFailsClosed and reports
// whether the rename hit the build.
func hdHideRace(t *testing.T, u user, file, from, to, read string) bool {
	t.Helper()
	ws := u.tempDir(t)
	u.mkdirs(t, filepath.Join(ws, "a"))
	u.writeFile(t, filepath.Join(ws, "a", file), "API_KEY=nsbox-it-raced\n", 0o600)
	in, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		t.Skipf("inotify: %v", err)
	}
	if _, err := unix.InotifyAddWatch(in, filepath.Join(ws, "a"), unix.IN_ACCESS|unix.IN_CLOSE_NOWRITE|unix.IN_ONLYDIR); err != nil {
		unix.Close(in)
		t.Fatal(err)
	}
	renamed := make(chan error, 1)
	go func() {
		defer unix.Close(in)
		buf := make([]byte, 4096)
		listed := false
		for {
			n, err := unix.Read(in, buf)
			if err != nil {
				renamed <- err
				return
			}
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
				off += unix.SizeofInotifyEvent + int(ev.Len)
				if ev.Mask&unix.IN_ACCESS != 0 {
					listed = true
				}
				if listed && ev.Mask&unix.IN_CLOSE_NOWRITE != 0 {
					renamed <- os.Rename(filepath.Join(ws, from), filepath.Join(ws, to))
					return
				}
			}
		}
	}()
	r := u.sh(t, &runOpts{dir: ws}, nil, `cat `+read+` 2>/dev/null; echo ran`)
	if err := <-renamed; err != nil {
		t.Fatal(err)
	}
	if strings.Contains(r.stdout, "nsbox-it-raced") {
		t.Fatalf("rename %s %s: the %s was visible unhidden: stdout %q stderr %q", from, to, file, r.stdout, r.stderr)
	}
	expectCode(t, r, 0)
	if !strings.Contains(r.stderr, "resolving the policy again") {
		t.Logf("rename %s %s: came after the hide", from, to)
		return false
	}
	// Whichever step of the build met the rename first named it: the
	// hide, or a bind that pins its directory.
	if !strings.Contains(r.stderr, "gone or moved now") && !strings.Contains(r.stderr, "no such file or directory") {
		t.Fatalf("rename %s %s: the note does not say what changed: %q", from, to, r.stderr)
	}
	t.Logf("rename %s %s: %s", from, to, strings.TrimSpace(r.stderr))
	return true
}
