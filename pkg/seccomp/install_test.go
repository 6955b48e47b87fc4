package seccomp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// These tests install filters for real, in a child process: the test binary
// re-executed with helperEnv set (TestMain), so that the test process itself
// never runs under a filter. The child installs the filter, makes the probe
// calls and prints the results as JSON.

const (
	helperEnv  = "NSBOX_SECCOMP_TEST_HELPER" // mode
	filterEnv  = "NSBOX_SECCOMP_TEST_FILTER" // path of Filter.Bytes()
	probesEnv  = "NSBOX_SECCOMP_TEST_PROBES" // JSON []probe
	countEnv   = "NSBOX_SECCOMP_TEST_COUNT"
	probePath  = "/nonexistent/nsbox-seccomp-probe"
	markerErrn = 200 // an errno no probe returns by itself
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helperMain(mode))
	}
	os.Exit(m.Run())
}

// probe is one raw syscall. Arguments are chosen so that the call is
// harmless even when the filter lets it through and the test runs as root:
// invalid descriptors, NULL pointers, bad magic numbers, invalid flag
// combinations. PtrArg, if >= 0, replaces that argument with a pointer to a
// path that does not exist.
type probe struct {
	Name   string
	Nr     uintptr
	Args   [6]uint64
	PtrArg int
}

type probeResult struct {
	Name  string
	Ret   uint64
	Errno int
}

const bad = ^uint64(0) // -1: an invalid descriptor, pid or id

// dangerousArgs gives each DangerousSet syscall harmless arguments.
var dangerousArgs = map[string]struct {
	args [6]uint64
	ptr  int
}{
	"keyctl":            {[6]uint64{0xffff}, -1},              // unknown operation
	"add_key":           {[6]uint64{}, -1},                    // NULL type: EFAULT
	"request_key":       {[6]uint64{}, -1},                    // NULL type: EFAULT
	"bpf":               {[6]uint64{0xffff}, -1},              // unknown command
	"perf_event_open":   {[6]uint64{0, 0, bad, bad}, -1},      // NULL attr
	"userfaultfd":       {[6]uint64{0xffffffff}, -1},          // unknown flags
	"io_uring_setup":    {[6]uint64{0, 0}, -1},                // 0 entries
	"io_uring_enter":    {[6]uint64{bad}, -1},                 // bad fd
	"io_uring_register": {[6]uint64{bad}, -1},                 // bad fd
	"kexec_load":        {[6]uint64{0, 0, 0, 0xffffffff}, -1}, // unknown flags
	"kexec_file_load":   {[6]uint64{bad, bad, 0, 0, 0xffffffff}, -1},
	"init_module":       {[6]uint64{0, 0, 0}, -1}, // empty image
	"finit_module":      {[6]uint64{bad, 0, 0}, -1},
	"delete_module":     {[6]uint64{}, -1},                 // NULL name
	"mount":             {[6]uint64{}, -1},                 // NULL target
	"umount2":           {[6]uint64{0, 0}, 0},              // missing path
	"pivot_root":        {[6]uint64{}, -1},                 // NULL paths
	"chroot":            {[6]uint64{}, 0},                  // missing path
	"fsopen":            {[6]uint64{}, -1},                 // NULL name
	"fsconfig":          {[6]uint64{bad}, -1},              // bad fd
	"fsmount":           {[6]uint64{bad}, -1},              // bad fd
	"fspick":            {[6]uint64{bad}, -1},              // NULL path
	"move_mount":        {[6]uint64{bad, 0, bad, 0}, -1},   // bad fds
	"open_tree":         {[6]uint64{bad}, -1},              // NULL path
	"open_tree_attr":    {[6]uint64{bad}, -1},              // NULL path
	"mount_setattr":     {[6]uint64{bad}, -1},              // bad fd
	"swapon":            {[6]uint64{}, 0},                  // missing path
	"swapoff":           {[6]uint64{}, 0},                  // missing path
	"reboot":            {[6]uint64{}, -1},                 // bad magic
	"acct":              {[6]uint64{}, 0},                  // missing path, never NULL (that turns accounting off)
	"quotactl":          {[6]uint64{0xffffffff}, -1},       // unknown command
	"quotactl_fd":       {[6]uint64{uint64(bad)}, -1},      // bad fd
	"syslog":            {[6]uint64{0xffff}, -1},           // unknown action
	"vhangup":           {[6]uint64{}, -1},                 // the helper has no controlling tty (setsid)
	"settimeofday":      {[6]uint64{0, 0}, -1},             // NULL, NULL: a no-op
	"clock_settime":     {[6]uint64{0xffff}, -1},           // unknown clock
	"clock_adjtime":     {[6]uint64{0xffff}, -1},           // unknown clock
	"adjtimex":          {[6]uint64{}, -1},                 // NULL
	"ptrace":            {[6]uint64{0xffff, bad}, -1},      // unknown request
	"process_vm_readv":  {[6]uint64{0, 0, 0, 0, 0, 1}, -1}, // flags must be 0
	"process_vm_writev": {[6]uint64{0, 0, 0, 0, 0, 1}, -1},
	"pidfd_getfd":       {[6]uint64{bad, bad}, -1},         // bad fd
	"process_madvise":   {[6]uint64{bad}, -1},              // bad fd
	"kcmp":              {[6]uint64{0, 0, 0xffff}, -1},     // unknown type
	"setns":             {[6]uint64{bad}, -1},              // bad fd
	"clone3":            {[6]uint64{0, 0}, -1},             // size 0
	"open_by_handle_at": {[6]uint64{bad}, -1},              // NULL handle
	"name_to_handle_at": {[6]uint64{bad}, -1},              // NULL path
	"lookup_dcookie":    {[6]uint64{}, -1},                 // removed from the kernel anyway
	"iopl":              {[6]uint64{4}, -1},                // level > 3
	"ioperm":            {[6]uint64{0xffffffff, 1, 1}, -1}, // range overflow
	"modify_ldt":        {[6]uint64{0xff}, -1},             // unknown function
	"uselib":            {[6]uint64{}, 0},                  // missing path
}

type expect int

const (
	expDenied  expect = iota // refused by the filter
	expAllowed               // reaches the kernel
	expWorks                 // reaches the kernel and succeeds
)

type probeCase struct {
	probe
	want expect
}

func mkProbe(t testing.TB, name string, want expect, ptr int, args ...uint64) (probeCase, bool) {
	nr, ok := nativeNr(t, name)
	if !ok {
		return probeCase{}, false
	}
	p := probeCase{probe: probe{Name: name, Nr: uintptr(nr), PtrArg: ptr}, want: want}
	copy(p.Args[:], args)
	return p, true
}

// defaultProbes covers DangerousSet, the argument-dependent rules and a few
// calls that must keep working.
func defaultProbes(t testing.TB, allowUserns bool) []probeCase {
	var ps []probeCase
	add := func(p probeCase, ok bool) {
		if ok {
			ps = append(ps, p)
		}
	}
	for _, name := range DangerousSet() {
		a, ok := dangerousArgs[name]
		if !ok {
			t.Fatalf("no harmless arguments for %s", name)
		}
		add(mkProbe(t, name, expDenied, a.ptr, a.args[:]...))
	}
	// Namespace flags. Through clone() they are combined with CLONE_THREAD
	// without CLONE_SIGHAND, which the kernel rejects (EINVAL) before doing
	// anything: a probe the filter lets through cannot create a process.
	for fname, flag := range newFlags {
		want := expDenied
		if allowUserns && flag == unix.CLONE_NEWUSER {
			want = expAllowed
		}
		if flag != unix.CLONE_NEWTIME {
			p, ok := mkProbe(t, "clone", want, -1, flag|unix.CLONE_THREAD)
			p.Name = "clone(" + fname + ")"
			add(p, ok)
			p, ok = mkProbe(t, "clone", want, -1, flag|unix.CLONE_THREAD|0xffffffff00000000)
			p.Name = "clone(" + fname + "|high bits)"
			add(p, ok)
		}
		// unshare in the helper: if let through it only affects the helper,
		// which exits right after.
		p, ok := mkProbe(t, "unshare", want, -1, flag)
		p.Name = "unshare(" + fname + ")"
		add(p, ok)
	}
	for _, c := range []struct {
		name string
		req  uint64
		want expect
	}{
		{"TIOCSTI", unix.TIOCSTI, expDenied},
		{"TIOCSTI|high bits", 0xffffffff00000000 | unix.TIOCSTI, expDenied},
		{"TIOCLINUX", unix.TIOCLINUX, expDenied},
		{"TIOCLINUX|high bits", 0x100000000 | unix.TIOCLINUX, expDenied},
		{"TIOCSETD", unix.TIOCSETD, expDenied},
		{"TCGETS", unix.TCGETS, expAllowed},
	} {
		p, ok := mkProbe(t, "ioctl", c.want, -1, bad, c.req) // bad fd: EBADF if let through
		p.Name = "ioctl(" + c.name + ")"
		add(p, ok)
	}
	for _, c := range []struct {
		arg  uint64
		want expect
	}{
		{0xffffffff, expWorks}, {0x0400000, expDenied}, {0x0040000, expDenied},
		{0x100400000, expDenied}, {8, expWorks}, {0, expWorks},
	} {
		p, ok := mkProbe(t, "personality", c.want, -1, c.arg)
		p.Name = fmt.Sprintf("personality(%#x)", c.arg)
		add(p, ok)
	}
	add(mkProbe(t, "getpid", expWorks, -1))
	add(mkProbe(t, "write", expWorks, 1, 2, 0, 0)) // write(2, buf, 0)
	add(mkProbe(t, "uname", expAllowed, -1))       // NULL: EFAULT
	// Newer than any name the filter knows: ENOSYS from the stub.
	if runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64" {
		ps = append(ps, probeCase{probe: probe{Name: "syscall 1000", Nr: 1000, PtrArg: -1}, want: expDenied})
	}
	return ps
}

// markDenials returns a copy of p whose EPERM denials return markerErrn
// instead, so that a probe's errno proves the filter (not the kernel's own
// permission check, which also says EPERM) refused it.
func markDenials(p *Profile) *Profile {
	q := *p
	q.Syscalls = append([]Rule(nil), p.Syscalls...)
	for i := range q.Syscalls {
		r := &q.Syscalls[i]
		if e := ruleEffect(r.Action, r.ErrnoRet); e.action == ActErrno && e.data == errEPERM {
			m := uint(markerErrn)
			r.ErrnoRet = &m
		}
	}
	if e := ruleEffect(q.DefaultAction, q.DefaultErrnoRet); e.action == ActErrno && e.data == errEPERM {
		m := uint(markerErrn)
		q.DefaultErrnoRet = &m
	}
	return &q
}

// runHelper runs the test binary in helper mode and returns its stdout.
func runHelper(t testing.TB, mode string, f *Filter, extraEnv ...string) ([]byte, error) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "filter")
	if f != nil {
		if err := os.WriteFile(path, f.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, filterEnv+"="+path)
	cmd.Env = append(cmd.Env, extraEnv...)
	// No controlling terminal: TIOCSTI and vhangup probes cannot touch the
	// terminal running the tests even if a filter failed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil && stderr.Len() > 0 {
		t.Logf("helper stderr: %s", stderr.String())
	}
	return out, err
}

func runProbes(t *testing.T, f *Filter, cases []probeCase) map[string]probeResult {
	t.Helper()
	probes := make([]probe, len(cases))
	for i, c := range cases {
		probes[i] = c.probe
	}
	js, err := json.Marshal(probes)
	if err != nil {
		t.Fatal(err)
	}
	out, err := runHelper(t, "probe", f, probesEnv+"="+string(js))
	if err != nil {
		t.Fatalf("helper: %v", err)
	}
	var res []probeResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("helper output %q: %v", out, err)
	}
	m := map[string]probeResult{}
	for _, r := range res {
		m[r.Name] = r
	}
	return m
}

func TestShippedProfilesInKernel(t *testing.T) {
	for name, p := range shippedProfiles(t) {
		for _, o := range []Options{{}, {AllowUserns: true}} {
			t.Run(fmt.Sprintf("%s/userns=%v", filepath.Base(name), o.AllowUserns), func(t *testing.T) {
				cases := defaultProbes(t, o.AllowUserns)
				// As shipped: every denial is EPERM or ENOSYS.
				f, err := Compile(p, o)
				if err != nil {
					t.Fatal(err)
				}
				res := runProbes(t, f, cases)
				for _, c := range cases {
					r, ok := res[c.Name]
					if !ok {
						t.Errorf("%s: no result", c.Name)
						continue
					}
					e := unix.Errno(r.Errno)
					switch c.want {
					case expDenied:
						if e != unix.EPERM && e != unix.ENOSYS {
							t.Errorf("%s: errno %d (%v), want EPERM or ENOSYS", c.Name, r.Errno, e)
						}
					case expWorks:
						if e != 0 {
							t.Errorf("%s: errno %v, want success", c.Name, e)
						}
					}
				}
				// Marked: denials say markerErrn, so they provably come from
				// the filter; allowed calls never do.
				fm, err := Compile(markDenials(p), o)
				if err != nil {
					t.Fatal(err)
				}
				res = runProbes(t, fm, cases)
				for _, c := range cases {
					r := res[c.Name]
					e := unix.Errno(r.Errno)
					fromFilter := r.Errno == markerErrn ||
						e == unix.ENOSYS && (c.Name == "clone3" || strings.HasPrefix(c.Name, "syscall "))
					if c.want == expDenied && !fromFilter {
						t.Errorf("marked: %s: errno %d (%v) did not come from the filter", c.Name, r.Errno, e)
					}
					if c.want != expDenied && fromFilter {
						t.Errorf("marked: %s: refused by the filter (errno %d)", c.Name, r.Errno)
					}
				}
				if res["getpid"].Ret == 0 {
					t.Errorf("getpid returned 0")
				}
			})
		}
	}
}

// The harness must be able to fail: under a filter that allows everything,
// no probe may look refused by the filter. (As an unprivileged user the
// kernel itself answers EPERM to most of these calls, which is why
// TestShippedProfilesInKernel also runs the marked profile.)
func TestProbeHarnessDetectsMissingFilter(t *testing.T) {
	p, err := Parse([]byte(`{"defaultAction": "SCMP_ACT_ALLOW"}`), "allow-all.json")
	if err != nil {
		t.Fatal(err)
	}
	f, err := Compile(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	cases := defaultProbes(t, false)
	res := runProbes(t, f, cases)
	for _, c := range cases {
		r := res[c.Name]
		if strings.HasPrefix(c.Name, "syscall ") {
			continue // ENOSYS from the kernel and from the stub look alike
		}
		if r.Errno == markerErrn || c.Name == "clone3" && unix.Errno(r.Errno) == unix.ENOSYS {
			t.Errorf("%s: looks refused without a filter rule (errno %d)", c.Name, r.Errno)
		}
		if c.want == expWorks && r.Errno != 0 {
			t.Errorf("%s: errno %v without a filter", c.Name, unix.Errno(r.Errno))
		}
	}
}

func TestX32Killed(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("x32 is an x86_64 ABI")
	}
	f := compileDefault(t, Options{})
	out, err := runHelper(t, "x32", f)
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("helper was not killed: err %v, output %q", err, out)
	}
	ws := ee.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != unix.SIGSYS {
		t.Fatalf("helper ended with %v, want killed by SIGSYS", ws)
	}
}

type threadState struct {
	TID        string
	Seccomp    string
	NoNewPrivs string
}

func TestInstallAllThreads(t *testing.T) {
	f := compileDefault(t, Options{})
	out, err := runHelper(t, "tsync", f)
	if err != nil {
		t.Fatalf("helper: %v (%s)", err, out)
	}
	var res struct {
		Before, After []threadState
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	if len(res.After) < 5 {
		t.Fatalf("only %d threads; the test needs several", len(res.After))
	}
	for _, th := range res.Before {
		if th.Seccomp != "0" {
			t.Errorf("before Install: thread %s Seccomp %s", th.TID, th.Seccomp)
		}
	}
	for _, th := range res.After {
		// 2 = SECCOMP_MODE_FILTER; no_new_privs is copied by TSYNC.
		if th.Seccomp != "2" || th.NoNewPrivs != "1" {
			t.Errorf("after Install: thread %s Seccomp %s NoNewPrivs %s", th.TID, th.Seccomp, th.NoNewPrivs)
		}
	}
}

func TestInstallInvalid(t *testing.T) {
	var f *Filter
	if err := f.Install(); !errors.Is(err, ErrInstall) {
		t.Fatalf("nil filter: %v", err)
	}
	if err := (&Filter{}).Install(); !errors.Is(err, ErrInstall) {
		t.Fatalf("empty filter: %v", err)
	}
}

// ---- helper side ----

func helperMain(mode string) int {
	runtime.LockOSThread() // no_new_privs and seccomp act on this thread first
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "helper: "+format+"\n", args...)
		return 3
	}
	var f *Filter
	if path := os.Getenv(filterEnv); path != "" {
		if b, err := os.ReadFile(path); err == nil {
			if f, err = FilterFromBytes(b); err != nil {
				return fail("%v", err)
			}
		}
	}
	switch mode {
	case "probe":
		var probes []probe
		if err := json.Unmarshal([]byte(os.Getenv(probesEnv)), &probes); err != nil {
			return fail("%v", err)
		}
		path, err := unix.BytePtrFromString(probePath)
		if err != nil {
			return fail("%v", err)
		}
		if err := f.Install(); err != nil {
			return fail("%v", err)
		}
		res := make([]probeResult, 0, len(probes))
		for _, p := range probes {
			a := p.Args
			if p.PtrArg >= 0 {
				a[p.PtrArg] = uint64(uintptr(unsafe.Pointer(path)))
			}
			r, _, e := unix.Syscall6(p.Nr, uintptr(a[0]), uintptr(a[1]), uintptr(a[2]), uintptr(a[3]), uintptr(a[4]), uintptr(a[5]))
			res = append(res, probeResult{Name: p.Name, Ret: uint64(r), Errno: int(e)})
		}
		runtime.KeepAlive(path)
		if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
			return fail("%v", err)
		}
		return 0
	case "x32":
		if err := f.Install(); err != nil {
			return fail("%v", err)
		}
		unix.RawSyscall(unix.SYS_GETPID|x32SyscallBit, 0, 0, 0)
		return fail("x32 getpid returned")
	case "tsync":
		// Park goroutines on their own OS threads so the process has
		// threads other than the one calling Install.
		block := make(chan struct{})
		ready := make(chan struct{})
		for i := 0; i < 4; i++ {
			go func() {
				runtime.LockOSThread()
				ready <- struct{}{}
				<-block
			}()
		}
		for i := 0; i < 4; i++ {
			<-ready
		}
		var res struct{ Before, After []threadState }
		res.Before = threadStates()
		if err := f.Install(); err != nil {
			return fail("%v", err)
		}
		res.After = threadStates()
		close(block)
		if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
			return fail("%v", err)
		}
		return 0
	case "bench-install":
		n := 1
		fmt.Sscan(os.Getenv(countEnv), &n)
		start := time.Now()
		for i := 0; i < n; i++ {
			if err := f.Install(); err != nil {
				return fail("install %d: %v", i, err)
			}
		}
		fmt.Println(time.Since(start).Nanoseconds())
		return 0
	case "bench-getpid":
		n := 1
		fmt.Sscan(os.Getenv(countEnv), &n)
		measure := func() int64 {
			start := time.Now()
			for i := 0; i < n; i++ {
				unix.RawSyscall(unix.SYS_GETPID, 0, 0, 0)
			}
			return time.Since(start).Nanoseconds()
		}
		before := measure()
		if f != nil {
			if err := f.Install(); err != nil {
				return fail("%v", err)
			}
		}
		after := measure()
		fmt.Println(before, after)
		return 0
	}
	return fail("unknown mode %q", mode)
}

func threadStates() []threadState {
	tasks, _ := filepath.Glob("/proc/self/task/*/status")
	var out []threadState
	for _, path := range tasks {
		data, err := os.ReadFile(path)
		if err != nil {
			continue // the thread exited
		}
		th := threadState{TID: filepath.Base(filepath.Dir(path))}
		for _, line := range strings.Split(string(data), "\n") {
			k, v, _ := strings.Cut(line, ":")
			switch k {
			case "Seccomp":
				th.Seccomp = strings.TrimSpace(v)
			case "NoNewPrivs":
				th.NoNewPrivs = strings.TrimSpace(v)
			}
		}
		out = append(out, th)
	}
	return out
}
