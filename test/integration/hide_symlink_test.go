package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHideEnvSymlinkHidesItsTarget: a workspace .env that is a symlink to
// a file of another name (in the workspace, or outside it) had its secret
// readable inside, through the link and at the target's own path: the
// hide matched only regular files. The file the link leads to is hidden
// now; the host's files are untouched.
func TestHideEnvSymlinkHidesItsTarget(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		shared := u.tempDir(t)
		u.mkdirAs(t, filepath.Join(ws, "conf"))
		u.writeFile(t, filepath.Join(ws, "conf", "prod-values"), "SECRET_IN=1\n", 0o600)
		u.writeFile(t, filepath.Join(shared, "env"), "SECRET_OUT=1\n", 0o600)
		for link, target := range map[string]string{".env": "conf/prod-values", ".env.shared": filepath.Join(shared, "env")} {
			if err := os.Symlink(target, filepath.Join(ws, link)); err != nil {
				t.Fatal(err)
			}
			os.Lchown(filepath.Join(ws, link), u.uid, u.gid)
		}
		r := u.sh(t, &runOpts{dir: ws}, nil, "cat .env .env.shared conf/prod-values "+filepath.Join(shared, "env")+" 2>&1; true")
		expectCode(t, r, 0)
		if strings.Contains(r.stdout, "SECRET") {
			t.Fatalf("a secret behind a symlinked .env is readable inside:\n%s", r.stdout)
		}
		for _, p := range []string{filepath.Join(ws, "conf", "prod-values"), filepath.Join(shared, "env")} {
			if b, err := os.ReadFile(p); err != nil || !strings.Contains(string(b), "SECRET") {
				t.Fatalf("%s changed on the host: %q %v", p, b, err)
			}
		}
	})
}
