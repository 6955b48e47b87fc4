package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestCheckPath: nsbox check-path names each kind of path under the
// workspace profile, and what it says matches what a sandbox of the same
// policy does (issue 19, item 8).
func TestCheckPath(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		// Under /tmp the workspace is invisible with --profile strict; a
		// directory of its own keeps the rw bind below visible.
		u.writeFile(t, filepath.Join(ws, "main.go"), "package main\n", 0o644)
		u.writeFile(t, filepath.Join(ws, ".env"), "TOKEN=x\n", 0o644)
		other := u.tempDir(t)
		u.writeFile(t, filepath.Join(other, "x"), "host file\n", 0o644)
		r := u.run(t, &runOpts{dir: ws}, "check-path", "--json", "--workspace", ws,
			filepath.Join(ws, "main.go"), filepath.Join(ws, ".env"), filepath.Join(ws, ".git", "config"), "/etc/passwd", filepath.Join(other, "x"), "rel.txt")
		if r.code != 0 {
			t.Fatalf("check-path: exit %d: %s", r.code, r.stderr)
		}
		var got []struct {
			Path   string `json:"path"`
			Access string `json:"access"`
			Rule   struct {
				Kind string `json:"kind"`
				Why  string `json:"why"`
			} `json:"rule"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || len(got) != 6 {
			t.Fatalf("output %v: %s", err, r.stdout)
		}
		want := []string{"read-write", "hidden", "read-only", "read-only", "invisible", "read-write"}
		for i, g := range got {
			if g.Access != want[i] || g.Rule.Why == "" {
				t.Errorf("%s: %s (%s: %s), want %s", g.Path, g.Access, g.Rule.Kind, g.Rule.Why, want[i])
			}
		}
		if got[5].Path != filepath.Join(ws, "rel.txt") {
			t.Errorf("relative path resolved to %s", got[5].Path)
		}

		// What it says holds inside a sandbox of the same policy.
		r = u.run(t, &runOpts{dir: ws}, "run", "--workspace", ws, "--", "sh", "-c",
			"echo new > main.go && echo ok1; cat .env | wc -c; echo x > /etc/nsbox-probe 2>/dev/null || echo ok3; ls "+other+" 2>/dev/null | wc -l")
		if r.stdout != "ok1\n0\nok3\n0\n" {
			t.Errorf("inside the sandbox: %q (stderr %s)", r.stdout, r.stderr)
		}
		if b, _ := os.ReadFile(filepath.Join(ws, "main.go")); string(b) != "new\n" {
			t.Errorf("read-write file not written: %q", b)
		}
		if r := u.run(t, nil, "check-path", "--workspace", ws); r.code == 0 {
			t.Error("check-path without a path succeeded")
		}
	})
}
