package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Review 35: the Landlock backend's metadata gate in containers (commit
// 694374a: without pidfd_getfd and process_vm_readv the gate reads a
// command's fds and memory through /proc/TID/fd, fdinfo and mem;
// MetaSupported no longer needs pidfd_getfd, so the gate now runs in a
// container runtime's default profile). The test below fails on the code
// it was written against and passes once the weakness it names is fixed.
// Every file it touches is made for the test.

// TestReview35RootWithoutPtraceNonDumpable
//
// Severity: LOW-MEDIUM (availability, a regression of review 33's class
// in exactly the environment 694374a enables the gate for: a command's
// every chmod, fchmod and touch of its own workspace files fails).
//
// Weakness: the commands' filter refuses prctl(PR_SET_DUMPABLE, 0) only
// for a root-less supervisor (landlock_filter.go: metaRootless when
// os.Geteuid() != 0), on the ground that a root supervisor reads a
// non-dumpable command anyway with CAP_SYS_PTRACE (stickyCaps). A root
// nsbox in a container has no CAP_SYS_PTRACE: containerd's, moby's and
// Kubernetes' default capability sets leave it out (and the default
// seccomp profile refuses pidfd_getfd and process_vm_readv, hence the
// fallback). There /proc/TID/mem and /proc/TID/fd/N of a command that made
// itself non-dumpable (ssh-agent, gpg-agent, any program hardening
// itself with prctl) are refused to the supervisor (ptrace access: not
// dumpable and no CAP_SYS_PTRACE), and its chmod and utime calls in the
// workspace fail with EPERM, its fchmod with EACCES (the fd open's EACCES
// passed on, not even the documented EPERM). On the host (root with
// CAP_SYS_PTRACE) the same probe passes: the control subtest.
//
// Regression: as root in a container (here: nsbox started with
// CAP_SYS_PTRACE dropped from its bounding set, `setpriv --bounding-set
// -sys_ptrace`, as a container's root lacks it), a python probe calls
// prctl(PR_SET_DUMPABLE, 0), then chmod, fchmod and utime of a workspace
// file: all three fail.
//
// Fix: choose metaRootless (refuse PR_SET_DUMPABLE 0) from what the
// supervisor may do, not from its euid: whenever the supervisor's
// permitted set lacks CAP_SYS_PTRACE (or, simplest, always: the gate
// needs a dumpable command whenever it cannot override the check), and
// answer a refused fd open with EPERM as memErrno does.
func TestReview35RootWithoutPtraceNonDumpable(t *testing.T) {
	u := users()[0]
	if u.uid != 0 {
		t.Skip("needs root (a root supervisor without CAP_SYS_PTRACE)")
	}
	requireLandlock(t, u)
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("no setpriv to drop CAP_SYS_PTRACE")
	}
	probe := `
import os, ctypes
print("PROBE_RAN")
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(4, 0, 0, 0, 0) != 0:
    print("PRCTL_REFUSED")
for name, f in (("CHMOD", lambda: os.chmod("f", 0o600)),
                ("FCHMOD", lambda: os.fchmod(os.open("f", os.O_RDONLY), 0o640)),
                ("UTIME", lambda: os.utime("f", (978307200, 978307200)))):
    try:
        f(); print(name + "_OK")
    except OSError as e:
        print(name, "failed:", e.strerror)
`
	for _, noPtrace := range []bool{false, true} {
		name := "host-root"
		if noPtrace {
			name = "root-without-CAP_SYS_PTRACE"
		}
		t.Run(name, func(t *testing.T) {
			ws := u.tempDir(t)
			u.mkdirs(t, filepath.Join(ws, "sub"))
			u.writeFile(t, filepath.Join(ws, "sub", "f"), "x\n", 0o644)
			args := []string{"run", "--backend", "landlock", "--workspace", ws, "--", "/bin/sh", "-c", "cd sub && python3 -c '" + probe + "'; echo done"}
			var r result
			if noPtrace {
				r = u.runAs(t, &runOpts{dir: ws}, "setpriv", append([]string{"--bounding-set", "-sys_ptrace", "--inh-caps=-all", "--", nsboxBin(t)}, args...)...)
			} else {
				r = u.run(t, &runOpts{dir: ws}, args...)
			}
			t.Logf("probe:\n%s%s", r.stdout, r.stderr)
			if !strings.Contains(r.stdout, "done") || !strings.Contains(r.stdout, "PROBE_RAN") {
				t.Fatalf("the probe did not run (exit %d): %s", r.code, r.stderr)
			}
			if strings.Contains(r.stdout, "PRCTL_REFUSED") {
				return // refused as for a root-less supervisor: the fix
			}
			for _, ok := range []string{"CHMOD_OK", "FCHMOD_OK", "UTIME_OK"} {
				if !strings.Contains(r.stdout, ok) {
					t.Errorf("%s missing: a non-dumpable command's change of its own workspace file failed (the gate cannot read it without CAP_SYS_PTRACE, and prctl(PR_SET_DUMPABLE, 0) was not refused)", ok)
				}
			}
			st, err := os.Stat(filepath.Join(ws, "sub", "f"))
			if err == nil && st.ModTime().Unix() != 978307200 {
				t.Errorf("sub/f's time %v, want 2001-01-01 (the utime was not made)", st.ModTime())
			}
		})
	}
}
