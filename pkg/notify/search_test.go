package notify

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// The gate's lookup is the target's (UnixGate.lookup): search permission
// on every directory of the path (path_resolution(7)), with the target's
// own capabilities where its user namespace maps the directory's owner
// and group (capabilities(7)), whether the supervisor takes the target's
// ids (AsTarget) or checks the mode bits itself (a supervisor that does
// not switch ids).

// TestGateSearchIsTheTargets: in a writable place, three directories of
// mode 0700 each hold a socket of mode 0777: one owned by a uid the
// sandbox maps (host 100005), one by a uid it does not (4242), one by the
// caller itself. The sandbox maps 100000-165535. Its root (host 100000,
// every capability in its namespace) reaches the first and its own, as
// the kernel lets it (CAP_DAC_READ_SEARCH over mapped inodes), not the
// second; its uid 1000 (host 101000, no capability) reaches only its own.
func TestGateSearchIsTheTargets(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("directories of other owners and a mapped child need root")
	}
	rw, _ := places(t)
	os.Chmod(rw, 0o755)
	dir := func(name string, owner int) string {
		d := filepath.Join(rw, name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(d, "s.sock")
		hostServer(t, p)
		os.Chmod(p, 0o777)
		if err := os.Chown(d, owner, owner); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mapped, unmapped := dir("mapped", 100005), dir("unmapped", 4242)
	rootOwn, userOwn := dir("root-own", 100000), dir("user-own", 101000)
	m := []syscall.SysProcIDMap{{ContainerID: 0, HostID: 100000, Size: 65536}}
	for _, asTarget := range []bool{true, false} {
		for _, who := range []struct {
			name string
			uid  uint32
			want map[string]string
		}{
			{"root", 0, map[string]string{mapped: "ok", unmapped: "EACCES", rootOwn: "ok", userOwn: "ok"}},
			{"uid1000", 1000, map[string]string{mapped: "EACCES", unmapped: "EACCES", rootOwn: "EACCES", userOwn: "ok"}},
		} {
			t.Run(fmt.Sprintf("AsTarget=%v/%s", asTarget, who.name), func(t *testing.T) {
				if asTarget {
					requireAsTarget(t)
				}
				attr := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER, UidMappings: m, GidMappings: m,
					Credential: &syscall.Credential{Uid: who.uid, Gid: who.uid}}
				res, lines := runChildAttr(t, "connect", []string{mapped, unmapped, rootOwn, userOwn}, GateConfig{Writable: []string{rw}}, Options{AsTarget: asTarget}, attr)
				for p, w := range who.want {
					if res[p] != w {
						t.Errorf("%s: got %q, want %q (the kernel's answer to the caller itself)\n%q", p, res[p], w, lines)
					}
				}
			})
		}
	}
}
