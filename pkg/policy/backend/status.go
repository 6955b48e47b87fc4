package backend

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nsbox/nsbox/pkg/cgroups"
	"github.com/nsbox/nsbox/pkg/sandbox"
	"github.com/nsbox/nsbox/pkg/seccomp"
	"golang.org/x/sys/unix"
)

// Check is one mechanism: whether it works here and, if not, why and which
// knob fixes it.
type Check struct {
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	// Value is what was found ("cgroup1", "ABI 6", "2.5.4").
	Value string `json:"value"`
	// Detail explains, in particular why it does not work.
	Detail string `json:"detail,omitempty"`
	// Fix is the exact setting or command that would make it work.
	Fix string `json:"fix,omitempty"`
}

// Report is what `nsbox status` shows.
type Report struct {
	// Backend is the backend runs use here under Mode ("" when none can).
	Backend string `json:"backend"`
	Mode    string `json:"mode"`
	// Fallback is backend_fallback from the config.
	Fallback bool `json:"fallback"`
	// BackendError says why no backend can run (Backend == "").
	BackendError string  `json:"backendError,omitempty"`
	UID          int     `json:"uid"`
	Checks       []Check `json:"checks"`
	// Limits is how a test sandbox's limits were enforced.
	Limits *sandbox.LimitInfo `json:"limits,omitempty"`
	// NotIsolated lists what Backend leaves shared with the host, for a
	// backend weaker than native (landlock).
	NotIsolated []string `json:"notIsolated,omitempty"`
}

// Inspect examines the host. It starts one test sandbox (a few tens of
// milliseconds) so that what it reports is what runs get.
func Inspect(ctx context.Context, mode string, fallback bool) Report {
	r := Report{Mode: mode, Fallback: fallback, UID: os.Getuid()}
	if c, err := Choose(mode, fallback, true); err != nil {
		r.BackendError = err.Error()
	} else {
		r.Backend = c.Backend.Name()
		if g, ok := c.Backend.(Gaps); ok {
			r.NotIsolated = g.NotIsolated()
		}
	}
	userns := checkUserns()
	r.Checks = append(r.Checks, userns)
	probe := runProbe(ctx)
	proc := checkProc(probe)
	r.Checks = append(r.Checks, proc)
	r.Checks = append(r.Checks, probe.check, checkContainer(userns, proc, probe.check))
	cg, lim := checkCgroups(probe)
	r.Checks = append(r.Checks, cg, checkCgroupAttach(cgroups.Mode(cg.Value)))
	r.Limits = lim
	r.Checks = append(r.Checks, checkSeccomp(probe), checkLandlock(), checkPidfd(), checkClone3())
	return r
}

func readTrim(path string) (string, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}

// selfSeccomp returns the Seccomp: field of /proc/self/status (0, 1, 2).
func selfSeccomp() string {
	return statusField("/proc/self/status", "Seccomp")
}

func statusField(path, key string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return statusFieldOf(b, key)
}

func statusFieldOf(b []byte, key string) string {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// appArmorLabel is this process's AppArmor confinement ("unconfined",
// "nsbox (enforce)", or "" without AppArmor).
func appArmorLabel() string {
	for _, p := range []string{"/proc/self/attr/apparmor/current", "/proc/self/attr/current"} {
		if v, ok := readTrim(p); ok && v != "" {
			return strings.TrimRight(v, "\x00")
		}
	}
	return ""
}

func checkUserns() Check {
	c := Check{Name: "user namespaces"}
	uid := os.Getuid()
	var facts []string
	max, okMax := readTrim("/proc/sys/user/max_user_namespaces")
	if okMax {
		facts = append(facts, "user.max_user_namespaces="+max)
	}
	clone, okClone := readTrim("/proc/sys/kernel/unprivileged_userns_clone")
	if okClone {
		facts = append(facts, "kernel.unprivileged_userns_clone="+clone)
	}
	aa, okAA := readTrim("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
	label := appArmorLabel()
	if okAA {
		facts = append(facts, "kernel.apparmor_restrict_unprivileged_userns="+aa+" (this process: "+label+")")
	}
	sc := selfSeccomp()
	if sc == "2" {
		facts = append(facts, "this process runs under a seccomp filter (Seccomp: 2)")
	}
	c.Value = strings.Join(facts, ", ")
	err := sandbox.Available()
	if errors.Is(err, sandbox.ErrProcRefused) {
		err = nil // the namespaces were created; /proc is its own check
	}
	c.OK = err == nil
	switch {
	case okMax && max == "0":
		c.OK = false
		c.Detail = "user namespaces are disabled: user.max_user_namespaces is 0"
		c.Fix = "sudo sysctl -w user.max_user_namespaces=15000 (persist it in /etc/sysctl.d/)"
	case okClone && clone == "0" && uid != 0:
		c.Detail = "this Debian-patched kernel forbids unprivileged user namespaces (kernel.unprivileged_userns_clone=0)"
		c.Fix = "sudo sysctl -w kernel.unprivileged_userns_clone=1"
	case okAA && aa == "1" && uid != 0 && (label == "unconfined" || label == ""):
		c.OK = false
		c.Detail = "AppArmor restricts unprivileged user namespaces (Ubuntu 23.10 and later) and nsbox runs unconfined: namespaces are created without capabilities, so mounts fail"
		c.Fix = "sudo make install (installs contrib/apparmor/nsbox for /usr/local/bin/nsbox and loads it with apparmor_parser -r), or sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"
	case err != nil && sc == "2":
		c.Detail = "the seccomp filter this process runs under (a container runtime's default profile) refuses to create namespaces: " + err.Error()
		c.Fix = knobSeccomp.spell(runtimeHint())
	case err != nil:
		c.Detail = err.Error()
	default:
		c.Detail = "a test child created user, pid, mount, net, ipc and uts namespaces"
	}
	return c
}

// probeResult is a test sandbox: started, one command run in it.
type probeResult struct {
	check  Check
	err    error
	status []byte // /proc/self/status of a command inside
	limits *sandbox.LimitInfo
}

// runProbe starts a small sandbox with limits, as a run would, and reads
// /proc/self/status from inside.
func runProbe(ctx context.Context) probeResult {
	pr := probeResult{check: Check{Name: "sandbox"}}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	p := sandbox.Policy{Limits: sandbox.Limits{Memory: 256 << 20, Pids: 256}}
	s, err := sandbox.Start(ctx, p)
	if err != nil {
		pr.err = err
		pr.check.Detail = "a test sandbox did not start: " + err.Error()
		return pr
	}
	defer s.Close()
	li := s.Limits()
	pr.limits = &li
	res, err := s.Exec(ctx, sandbox.Command{Argv: []string{"/bin/cat", "/proc/self/status"}})
	if err != nil {
		pr.check.OK = true
		pr.check.Value = "starts"
		pr.check.Detail = "a test sandbox started, but /bin/cat could not run in it: " + err.Error()
		return pr
	}
	pr.status = res.Stdout
	pr.check.OK = true
	pr.check.Value = "works"
	pr.check.Detail = fmt.Sprintf("a test sandbox started and ran a command in %s", res.Duration.Round(time.Millisecond))
	return pr
}

// procOvermounts lists mounts below /proc that would make the kernel refuse
// a fresh proc mount in a user namespace (fs/namespace.c
// mount_too_revealing: every submount must sit on an empty directory).
func procOvermounts() []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			continue
		}
		mp := unescape(f[4])
		if !strings.HasPrefix(mp, "/proc/") {
			continue
		}
		// binfmt_misc sits on an empty directory that procfs provides for
		// it; the kernel allows that one.
		if mp == "/proc/sys/fs/binfmt_misc" {
			continue
		}
		out = append(out, mp)
	}
	return out
}

func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func checkProc(pr probeResult) Check {
	c := Check{Name: "fresh /proc"}
	over := procOvermounts()
	switch {
	case pr.err == nil:
		c.OK, c.Value = true, "mountable"
		c.Detail = "the test sandbox mounted a /proc of its own"
		if len(over) > 0 {
			c.Detail += fmt.Sprintf(" (the host's /proc has submounts: %s)", strings.Join(over, ", "))
		}
	case len(over) > 0:
		c.Value = "masked"
		c.Detail = fmt.Sprintf("the host's /proc is partly covered (%s), as an outer container does: the kernel refuses a new proc mount in a user namespace then", strings.Join(over, ", "))
		c.Fix = knobProc.spell(runtimeHint())
	default:
		c.Value = "unknown"
		c.Detail = "the test sandbox did not start, see sandbox"
	}
	return c
}

func checkCgroups(pr probeResult) (Check, *sandbox.LimitInfo) {
	d := cgroups.Detect()
	c := Check{Name: "cgroups", Value: string(d.Mode)}
	version := d.Version
	if version == "" {
		version = "none mounted"
	}
	switch d.Mode {
	case cgroups.ModeRlimit:
		c.Detail = fmt.Sprintf("cgroup hierarchy: %s; limits for uid %d are rlimits (memory as address space, processes per user, no CPU bandwidth)", version, os.Getuid())
	default:
		c.OK = true
		c.Detail = fmt.Sprintf("cgroup hierarchy: %s; limits for uid %d are enforced by %s", version, os.Getuid(), d.Mode)
	}
	if d.Reason != "" {
		c.Detail += "; " + d.Reason
	}
	c.Fix = d.Knob
	if pr.limits != nil {
		if pr.limits.Mode != string(d.Mode) {
			c.Detail += fmt.Sprintf("; the test sandbox used %s", pr.limits.Mode)
		}
		var parts []string
		for _, k := range []string{"memory", "pids", "cpu"} {
			if v, ok := pr.limits.Enforcement[k]; ok {
				parts = append(parts, k+": "+v)
			}
		}
		if len(parts) > 0 {
			c.Detail += "; test sandbox: " + strings.Join(parts, ", ")
		}
	}
	return c, pr.limits
}

func checkSeccomp(pr probeResult) Check {
	c := Check{Name: "seccomp", Value: "libseccomp " + seccomp.Version()}
	mode := statusFieldOf(pr.status, "Seccomp")
	switch {
	case mode == "2":
		c.OK = true
		c.Detail = "commands in the test sandbox ran under a seccomp filter"
	case pr.status == nil:
		c.Detail = "not checked: the test sandbox did not run a command"
	default:
		c.Detail = "commands in the test sandbox ran without a seccomp filter (Seccomp: " + mode + "): this build of the sandbox does not install one yet"
	}
	if nnp := statusFieldOf(pr.status, "NoNewPrivs"); nnp != "" && nnp != "1" {
		c.Detail += "; no_new_privs is not set"
	}
	return c
}

func checkLandlock() Check {
	c := Check{Name: "landlock"}
	abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	switch {
	case errno == 0:
		c.OK, c.Value = true, fmt.Sprintf("ABI %d", abi)
		c.Detail = "the landlock backend can run here (file system rules"
		if abi >= 4 {
			c.Detail += ", TCP bind/connect rules"
		} else {
			c.Detail += fmt.Sprintf("; no TCP rules before ABI 4, seccomp refuses sockets alone")
		}
		if abi >= 6 {
			c.Detail += ", abstract unix socket and signal scopes); the native backend adds the scopes as a second layer"
		} else {
			c.Detail += fmt.Sprintf("; no abstract unix socket or signal scopes before ABI 6, so neither backend has them)")
		}
	case errors.Is(errno, unix.ENOSYS):
		c.Value, c.Detail = "absent", "this kernel has no Landlock (before 5.13, or built without CONFIG_SECURITY_LANDLOCK)"
		c.Fix = "a kernel built with CONFIG_SECURITY_LANDLOCK=y"
	case errors.Is(errno, unix.EOPNOTSUPP):
		c.Value, c.Detail = "disabled", "Landlock is built in but not enabled at boot"
		c.Fix = "add landlock to the lsm= kernel parameter (e.g. lsm=landlock,lockdown,yama,apparmor,bpf)"
	default:
		c.Value, c.Detail = "error", errno.Error()
	}
	return c
}

func checkPidfd() Check {
	c := Check{Name: "pidfd"}
	fd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		c.Value = "absent"
		c.Detail = "pidfd_open failed (" + err.Error() + "): kernels before 5.3 have no pidfds; nsbox then kills by pid and cgroup"
		c.Fix = "a kernel of 5.3 or later"
		return c
	}
	unix.Close(fd)
	c.OK, c.Value, c.Detail = true, "available", "pidfd_open works: signals cannot hit a recycled pid"
	return c
}

func kernelVersion() (int, int, string) {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return 0, 0, ""
	}
	rel := unix.ByteSliceToString(u.Release[:])
	var major, minor int
	fmt.Sscanf(rel, "%d.%d", &major, &minor)
	return major, minor, rel
}

func checkClone3() Check {
	c := Check{Name: "clone3 into cgroup"}
	major, minor, rel := kernelVersion()
	newEnough := major > 5 || (major == 5 && minor >= 7)
	// nsbox does not need CLONE_INTO_CGROUP: the worker (PID 1) stays
	// outside the limited group, and each command moves itself in through
	// a cgroup.procs (v2) or tasks (v1) fd before exec. The line says
	// whether the kernel could, for completeness.
	c.OK = true
	if newEnough {
		c.Value = "available"
		c.Detail = "kernel " + rel + " supports CLONE_INTO_CGROUP; nsbox does not need it: commands join their group by a cgroup.procs (v2) or tasks (v1) fd before exec, and the worker stays outside the limits"
	} else {
		c.Value = "not available"
		c.Detail = "kernel " + rel + " is older than 5.7; nsbox does not need it: commands join their group by a cgroup.procs (v2) or tasks (v1) fd before exec"
	}
	return c
}
