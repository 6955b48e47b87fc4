package integration

import (
	"path/filepath"
	"strings"
	"testing"
)

// Review 33: the Landlock backend's metadata gate, second round
// (pkg/notify/meta.go, pkg/sandbox/landlock_meta.go, after review 32's
// fixes). Each test below fails on the code it was written against and
// passes once the weakness it names is fixed. The probes run as root and
// as uid 65534 unless said otherwise.

// TestReview33TouchDevNull
//
// Severity: LOW (correctness: a regression review 32's device-node fix
// brought; scripts under `set -e` stop).
//
// Weakness: decideMeta answers EPERM for every metadata call on a
// character or block device, "now" times included. utimensat(path, NULL)
// (touch) needs no ownership, only write permission (utimensat(2)), so
// `touch /dev/null` works for every user on the host and in the namespace
// backend (checked by hand: exit 0 there), but fails in a Landlock
// session: "touch: setting times of '/dev/null': Operation not permitted".
// Scripts do it (touch "${LOG:-/dev/null}", a Makefile whose stamp file
// is set to /dev/null to turn it off), and so does any tool that touches
// an output path the user pointed at /dev/null.
//
// Attack (none: a regression): touch /dev/null; python3 os.utime on it.
//
// Fix: for a device node, let a call that asks for "now" (times NULL, or
// both UTIME_NOW, and no owner or mode change) be made as the target with
// no capability, as the kernel decides it (write permission is enough),
// or answer it with success and no change; keep EPERM for explicit times,
// modes and owners (review 32's /dev/full).
func TestReview33TouchDevNull(t *testing.T) {
	for _, u := range users() {
		u := u
		t.Run(u.name, func(t *testing.T) {
			requireLandlock(t, u)
			ws := u.tempDir(t)
			script := strings.Join([]string{
				`touch /dev/null && echo TOUCH_DEVNULL_OK`,
				`python3 -c 'import os; os.utime("/dev/null")' && echo UTIME_DEVNULL_OK`,
				`echo done`,
			}, "\n")
			r := u.sh(t, &runOpts{dir: ws}, []string{"--backend", "landlock", "--workspace", ws}, script)
			t.Logf("probes:\n%s%s", r.stdout, r.stderr)
			if !strings.Contains(r.stdout, "done") {
				t.Fatalf("the probe script did not run (exit %d): %s", r.code, r.stderr)
			}
			for _, ok := range []string{"TOUCH_DEVNULL_OK", "UTIME_DEVNULL_OK"} {
				if !strings.Contains(r.stdout, ok) {
					t.Errorf("%s missing: touching /dev/null (\"now\", which write permission allows) failed in the sandbox, as it does not on the host or in the namespace backend", ok)
				}
			}
		})
	}
}

// TestReview33NonDumpableEFAULT
//
// Severity: LOW (correctness; root-less callers only).
//
// Weakness: the gate reads a path call's arguments from the target's
// memory (process_vm_readv) and takes a call by fd with pidfd_getfd, both
// of which need ptrace access to the target. A root-less supervisor has no
// CAP_SYS_PTRACE, so once a command is not dumpable (prctl(PR_SET_DUMPABLE,
// 0), as ssh-agent, gpg-agent and other key holders do, or having exec'd a
// program it may run but not read) every chmod, chown and utime of it
// fails, in the workspace too: path calls with EFAULT ("Bad address", an
// errno that says the program passed a bad pointer, which it did not), by
// fd with EPERM. The namespace backend and the host make them.
//
// Attack (none: a regression): in the workspace, a process that made
// itself non-dumpable runs chmod("f", 0600) and utime("f").
//
// Fix: at the least never answer EFAULT for a memory read the kernel
// refused for permission (EPERM/ESRCH from process_vm_readv): answer EPERM
// and list "a command that is not dumpable cannot change modes or times"
// in LandlockGaps; better, keep the commands dumpable (refuse
// PR_SET_DUMPABLE 0 in commandFilterLandlock with EPERM, which the
// programs above take as "not available" and go on).
func TestReview33NonDumpableEFAULT(t *testing.T) {
	for _, u := range users() {
		u := u
		if u.uid == 0 {
			continue // a root supervisor reads with CAP_SYS_PTRACE
		}
		t.Run(u.name, func(t *testing.T) {
			requireLandlock(t, u)
			ws := u.tempDir(t)
			u.mkdirs(t, filepath.Join(ws, "sub"))
			script := `cd sub && python3 -c '
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
open("f", "w").close()
os.chmod("f", 0o640); print("DUMPABLE_CHMOD_OK")
if libc.prctl(4, 0, 0, 0, 0) != 0:   # PR_SET_DUMPABLE
    print("prctl refused")
print("dumpable now:", libc.prctl(3, 0, 0, 0, 0))
for name, fn in (("ND_CHMOD", lambda: os.chmod("f", 0o600)), ("ND_UTIME", lambda: os.utime("f", (978307200, 978307200)))):
    try:
        fn(); print(name + "_OK")
    except OSError as e:
        print(name, "failed:", e.errno, e.strerror)
'; echo done`
			r := u.sh(t, &runOpts{dir: ws}, []string{"--backend", "landlock", "--workspace", ws}, script)
			t.Logf("probes:\n%s%s", r.stdout, r.stderr)
			if !strings.Contains(r.stdout, "done") || !strings.Contains(r.stdout, "DUMPABLE_CHMOD_OK") {
				t.Fatalf("the probe script did not run (exit %d): %s", r.code, r.stderr)
			}
			if strings.Contains(r.stdout, "Bad address") {
				t.Errorf("a non-dumpable command's chmod/utime of a workspace file failed with EFAULT (the gate could not read its memory)")
			}
			for _, ok := range []string{"ND_CHMOD_OK", "ND_UTIME_OK"} {
				if !strings.Contains(r.stdout, ok) && !strings.Contains(r.stdout, "prctl refused") {
					t.Errorf("%s missing: a non-dumpable command could not change its own workspace file", ok)
				}
			}
		})
	}
}
