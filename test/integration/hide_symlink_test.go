package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHideEnvSymlinkHidesItsTarget: a workspace .env that is a symlink to
// a file of another name in the workspace had its secret readable inside,
// through the link and at the target's own path: the hide matched only
// regular files. The file the link leads to is hidden now, when it lies in
// a writable directory of the run; a link to a file elsewhere (which a
// sandbox can plant: ".env.sh -> /bin/sh") hides nothing there. The
// host's files are untouched.
func TestHideEnvSymlinkHidesItsTarget(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		u.mkdirAs(t, filepath.Join(ws, "conf"))
		u.writeFile(t, filepath.Join(ws, "conf", "prod-values"), "SECRET_IN=1\n", 0o600)
		for link, target := range map[string]string{".env": "conf/prod-values", ".env.sh": "/etc/os-release"} {
			if err := os.Symlink(target, filepath.Join(ws, link)); err != nil {
				t.Fatal(err)
			}
			os.Lchown(filepath.Join(ws, link), u.uid, u.gid)
		}
		r := u.sh(t, &runOpts{dir: ws}, nil, "cat .env conf/prod-values /etc/os-release 2>&1; true")
		expectCode(t, r, 0)
		if strings.Contains(r.stdout, "SECRET") {
			t.Fatalf("a secret behind a symlinked .env is readable inside:\n%s", r.stdout)
		}
		if !strings.Contains(r.stdout, "ID=") {
			t.Fatalf("a file outside the writable directories was hidden because a .env link in the workspace names it:\n%s", r.stdout)
		}
		if b, err := os.ReadFile(filepath.Join(ws, "conf", "prod-values")); err != nil || !strings.Contains(string(b), "SECRET") {
			t.Fatalf("the target changed on the host: %q %v", b, err)
		}
	})
}
