package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReview70BtrfsSnapshotRefused
//
// Finding (HIGH, on btrfs): BTRFS_IOC_SNAP_CREATE(_V2) on a writable
// directory, given an fd of a subvolume the caller owns, copies every
// file of the subvolume, the ones hidden by a mount or by Landlock
// included (the kernel checks only the subvolume's owner): a root caller
// on a btrfs root copied /etc/shadow into the workspace, under both
// backends. Both, and their destroying twins, are refused now (EPERM)
// before they reach a file system. On another file system the ioctl
// answers ENOTTY, so the filter's EPERM is what the test tells apart.
func TestReview70BtrfsSnapshotRefused(t *testing.T) {
	reviewRequirePython(t)
	probe := `import errno, fcntl, os
d = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
for name, req in (("SNAP_CREATE", 0x50009401), ("SNAP_CREATE_V2", 0x50009417), ("SNAP_DESTROY", 0x5000940f), ("SNAP_DESTROY_V2", 0x5000943f)):
    arg = bytearray(4096)
    arg[0:8] = d.to_bytes(8, "little")
    try:
        fcntl.ioctl(d, req, arg)
        print(name, "0")
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, e.errno))
print("done")
`
	eachBackend(t, func(t *testing.T, backend string, u user) {
		ws := u.tempDir(t)
		r := u.run(t, &runOpts{dir: ws}, "run", "--backend", backend, "--workspace", ws, "--", reviewPython, "-c", probe)
		t.Logf("code %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		if !strings.Contains(r.stdout, "done") {
			t.Fatalf("the probe did not run (exit %d)", r.code)
		}
		for _, name := range []string{"SNAP_CREATE", "SNAP_CREATE_V2", "SNAP_DESTROY", "SNAP_DESTROY_V2"} {
			if !strings.Contains(r.stdout, name+" EPERM\n") {
				t.Errorf("BTRFS_IOC_%s reached the file system instead of being refused (EPERM)", name)
			}
		}
	})
}

// TestReview70AbsentHideNotSteeredByLink
//
// Finding (MEDIUM): a hidden path missing at start is denied by the
// landlock backend (review 67) at its first missing component, which was
// taken through symlinks and past a file in the way: a sandbox that made
// `lib` a link to a host file (libc.so.6 in the review) had every later
// landlock run with `--hide lib/prod.key` deny that file. Now the name
// is denied only where it is what it says.
func TestReview70AbsentHideNotSteeredByLink(t *testing.T) {
	for _, u := range users() {
		u := u
		t.Run(u.name, func(t *testing.T) {
			requireLandlock(t, u)
			ws := u.tempDir(t)
			data := filepath.Join(filepath.Dir(ws), "data")
			if err := os.MkdirAll(data, 0o755); err != nil {
				t.Fatal(err)
			}
			host := filepath.Join(data, "needed.so")
			if err := os.WriteFile(host, []byte("HOST-FILE-70\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			// What an earlier sandbox left in the workspace.
			if err := os.Symlink(host, filepath.Join(ws, "lib")); err != nil {
				t.Fatal(err)
			}
			r := u.run(t, &runOpts{dir: ws}, "run", "--backend", "landlock", "--workspace", ws, "--ro", data, "--hide", "lib/prod.key", "--", "cat", host)
			if !strings.Contains(r.stdout, "HOST-FILE-70") {
				t.Errorf("a host file a workspace link points at was denied by a hide of a missing path below the link (exit %d): %s", r.code, r.stderr)
			}
		})
	}
}

// TestReview70StatusIdentityBackendNone: with backend none the status's
// identity row described the namespace sandbox ("never host root").
func TestReview70StatusIdentityBackendNone(t *testing.T) {
	for _, u := range users() {
		u := u
		t.Run(u.name, func(t *testing.T) {
			st := u.run(t, &runOpts{dir: u.tempDir(t)}, "status", "--backend", "none", "--json")
			var rep struct {
				Checks []struct{ Name, Value string } `json:"checks"`
			}
			if err := json.Unmarshal([]byte(st.stdout), &rep); err != nil {
				t.Fatalf("status --json: %v\n%s", err, st.stdout)
			}
			for _, c := range rep.Checks {
				if c.Name == "identity" && c.Value != "your own (no sandbox)" {
					t.Errorf("status identity with backend none: %q", c.Value)
				}
			}
		})
	}
}
