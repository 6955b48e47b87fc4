package integration

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Review 17: identity and the identity holder (docs/security.md,
// "Identity").

// capEff returns the CapEff line of /proc/self/status as printed by a
// program run on the host.
func capEffOf(status string) string {
	for _, l := range strings.Split(status, "\n") {
		if strings.HasPrefix(l, "CapEff:") {
			return strings.TrimSpace(strings.TrimPrefix(l, "CapEff:"))
		}
	}
	return ""
}

// honouredOnHost says whether a security.capability value grants
// something to a process of the initial user namespace that execs the
// file: a v2 value (no root id: root of the filesystem's namespace, the
// host's), or a v3 value whose root id is 0.
func honouredOnHost(v []byte) bool {
	if len(v) < 4 {
		return false
	}
	magic := binary.LittleEndian.Uint32(v[0:4]) & 0xFF000000
	switch magic {
	case 0x02000000:
		return true
	case 0x03000000:
		return len(v) >= 24 && binary.LittleEndian.Uint32(v[20:24]) == 0
	}
	return false
}

// HIGH. A root-started sandbox with --allow-privileged mints a file
// capability that the HOST honours.
//
// Attack: code in a root caller's sandbox run with --allow-privileged
// (documented as "capabilities of the sandbox's user namespace, never of
// the host") copies a binary into its workspace and gives it a file
// capability: `setcap cap_dac_read_search+ep ./cat`. It holds
// CAP_SETFCAP in its namespace, and the workspace is an idmapped bind
// that maps the sandbox's root to host uid 0, so the kernel
// (cap_convert_nscap) translates the capability's root id through the
// idmap and stores it with root id 0: a capability every process of the
// host gets when it execs the file. Any local user then runs ./cat
// /etc/shadow; with cap_setuid, ./python becomes host root. The setuid
// filter (TestIdentityNoSetIDFiles) is thus sidestepped: a file
// capability is the same thing in another form, and --allow-privileged's
// list of what it gives up says nothing of it.
//
// Observed: the copy carries a security.capability the host honours, and
// uid 65534 execs it with CapEff 0000000000000004 and reads /etc/shadow.
//
// Should: no file in a bind may carry a capability the host honours:
// CAP_SETFCAP (like CAP_FSETID) kept out of even --allow-privileged's
// set for idmapped binds, or setxattr/fsetxattr/lsetxattr of
// security.capability refused by the command filter.
func TestReview17PrivilegedSandboxMintsHostFileCapability(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("only root-started sandboxes idmap their binds onto host root")
	}
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3 to set the xattr with")
	}
	u := users()[0]
	requireSandbox(t, u)
	ws := u.tempDir(t)
	if err := os.Chmod(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	// A v2 security.capability: effective, permitted CAP_DAC_READ_SEARCH
	// (bit 2), the form setcap(8) writes.
	r := u.sh(t, &runOpts{dir: ws}, []string{"--allow-privileged", "--rw", ws}, `cp /bin/cat ./cat && /usr/bin/python3 - <<'EOF'
import errno, os, struct
try:
    os.setxattr("cat", "security.capability", struct.pack("<IIIII", 0x02000001, 1 << 2, 0, 0, 0))
    print("setxattr ok")
except OSError as e:
    print("setxattr", errno.errorcode[e.errno])
EOF`)
	expectCode(t, r, 0)
	bin := filepath.Join(ws, "cat")
	buf := make([]byte, 64)
	n, err := unix.Getxattr(bin, "security.capability", buf)
	if err != nil {
		return // refused inside: what should happen
	}
	v := buf[:n]
	if honouredOnHost(v) {
		// Show what it means: an unprivileged host user execs it.
		cmd := exec.Command(bin, "/proc/self/status")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
		out, _ := cmd.Output()
		t.Errorf("the sandbox left %s with security.capability %x, which the host honours (root id 0): uid 65534 execs it with CapEff %s (inside: %s)",
			bin, v, capEffOf(string(out)), strings.TrimSpace(r.stdout))
	}
}

// MEDIUM. A root-started sandbox under --seccomp FILE (Docker's own
// default profile) leaves a set-uid-root binary in its workspace.
//
// Attack: the set-id rule ("No set-uid or set-group-ID files") lives in
// the default profile only, and --seccomp FILE replaces it with nothing
// of nsbox's. For a root caller every writable bind is idmapped, so the
// sandbox's root writes files owned by host root: `cp /bin/sh x && chmod
// 4755 x` in the workspace, and any local user later runs `./x -p` as
// host root. Docker's default profile (the one --seccomp is documented
// with, TestHardeningDockerProfile) allows chmod with any mode, and
// nothing warns. The root range exists so that a root-started sandbox is
// "never host root"; this gives host root to every local user.
//
// Observed: chmod 4755 succeeds and the workspace holds a -rwsr-xr-x
// file owned by uid 0 on the host.
//
// Should: the set-id mode rules belong to the command filter nsbox
// installs whatever the profile (as it already does for openat2), at
// least for root callers whose binds map the sandbox's root to host root;
// or such a run is refused/warned like --seccomp unconfined.
func TestReview17CustomProfileLeavesSetuidRootFile(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("only a root-started sandbox writes files owned by host root")
	}
	hdRequireRunFlag(t, "--seccomp")
	u := users()[0]
	requireSandbox(t, u)
	prof := hdProfileCopy(t, u, "../../pkg/seccomp/testdata/docker-default.json")
	ws := u.tempDir(t)
	r := u.sh(t, &runOpts{dir: ws}, []string{"--seccomp", prof, "--rw", ws}, `cp /bin/true x; chmod 4755 x 2>/dev/null; echo chmod=$?`)
	expectCode(t, r, 0)
	st, err := os.Stat(filepath.Join(ws, "x"))
	if err != nil {
		t.Fatal(err)
	}
	s := st.Sys().(*syscall.Stat_t)
	if st.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
		t.Errorf("under --seccomp %s the sandbox left %s with mode %v owned by host uid %d (%s): a set-uid binary of host root's for every local user",
			filepath.Base(prof), filepath.Join(ws, "x"), st.Mode(), s.Uid, strings.TrimSpace(r.stdout))
	}
}
