package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The Landlock backend's metadata gate (issue 20): Landlock has no right
// for a file's mode or times, so nsbox's supervisor makes chmod(2) and
// utimensat(2) for commands, and only on files Landlock lets them write.
// What the host finds after the run: its own files as they were, the
// workspace's as the command left them.

func mtimeOf(t *testing.T, p string) time.Time {
	t.Helper()
	st, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.ModTime()
}

func TestLandlockMetadataGate(t *testing.T) {
	for _, u := range users() {
		u := u
		t.Run(u.name, func(t *testing.T) {
			requireLandlock(t, u)
			ws := u.tempDir(t)
			base := filepath.Dir(ws)
			u.mkdirs(t, filepath.Join(ws, "sub"), filepath.Join(ws, ".git"))
			gitConfig := filepath.Join(ws, ".git", "config")
			u.writeFile(t, gitConfig, "[core]\n", 0o644)
			tool := filepath.Join(ws, "sub", "tool")
			u.writeFile(t, tool, "#!/bin/sh\n", 0o644)
			// Outside the workspace: a read-only file and a hidden secret,
			// both the caller's own.
			rc := filepath.Join(base, "profile")
			u.writeFile(t, rc, "# rc\n", 0o644)
			secret := filepath.Join(base, "id_rsa")
			u.writeFile(t, secret, "PRIVATE KEY\n", 0o600)
			old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
			for _, p := range []string{rc, secret} {
				if err := os.Chtimes(p, old, old); err != nil {
					t.Fatal(err)
				}
			}
			script := strings.Join([]string{
				`chmod 0644 ` + secret + ` 2>/dev/null && echo CHMOD_SECRET`,
				`chmod 0755 ` + rc + ` 2>/dev/null && echo CHMOD_RC`,
				`chmod 0600 .git/config 2>/dev/null && echo CHMOD_GIT_CONFIG`,
				`touch -d 2001-01-01 ` + rc + ` 2>/dev/null && echo TOUCH_RC`,
				`touch ` + secret + ` 2>/dev/null && echo TOUCH_SECRET`,
				`ln -s ` + rc + ` sub/link && chmod 0700 sub/link 2>/dev/null && echo CHMOD_THROUGH_LINK`,
				`touch -h -d 2002-02-02 sub/link && echo TOUCH_LINK_OK`,
				// What builds and archives do stays: in the workspace
				// and in the private TMPDIR.
				`chmod 0755 sub/tool && touch -d 2003-03-03 sub/tool && echo WS_OK`,
				`: >"$TMPDIR/t" && chmod 0700 "$TMPDIR/t" && touch -d 2004-04-04 "$TMPDIR/t" && echo TMP_OK`,
				`cd sub && chmod 0750 ../sub && echo RELATIVE_OK`,
				`echo done`,
			}, "\n")
			status := filepath.Join(u.tempDir(t), "status.json")
			r := u.sh(t, &runOpts{dir: ws}, []string{"--backend", "landlock", "--workspace", ws, "--hide", secret, "--json-status", status}, script)
			t.Logf("probes:\n%s%s", r.stdout, r.stderr)
			if !strings.Contains(r.stdout, "done") {
				t.Fatalf("the probe script did not run (exit %d): %s", r.code, r.stderr)
			}
			for _, ok := range []string{"TOUCH_LINK_OK", "WS_OK", "TMP_OK", "RELATIVE_OK"} {
				if !strings.Contains(r.stdout, ok) {
					t.Errorf("%s missing: a change in a writable place was refused", ok)
				}
			}
			for _, bad := range []string{"CHMOD_SECRET", "CHMOD_RC", "CHMOD_GIT_CONFIG", "TOUCH_RC", "TOUCH_SECRET", "CHMOD_THROUGH_LINK"} {
				if strings.Contains(r.stdout, bad) {
					t.Errorf("%s: a change outside the writable places passed", bad)
				}
			}
			for _, c := range []struct {
				path string
				mode os.FileMode
			}{{secret, 0o600}, {rc, 0o644}, {gitConfig, 0o644}, {tool, 0o755}, {filepath.Join(ws, "sub"), 0o750}} {
				if got := review25Mode(t, c.path); got != c.mode {
					t.Errorf("%s: mode %#o after the run, want %#o", c.path, got, c.mode)
				}
			}
			for _, p := range []string{rc, secret} {
				if got := mtimeOf(t, p); !got.Equal(old) {
					t.Errorf("%s: time %v after the run, want %v", p, got, old)
				}
			}
			if got := mtimeOf(t, tool); got.Year() != 2003 {
				t.Errorf("%s: time %v, want the command's 2003", tool, got)
			}
			gaps := notIsolated(startedEvent(t, status))
			if !strings.Contains(gaps, "only on files Landlock lets them write") {
				t.Errorf("the run's status does not name the metadata gate:\n%s", gaps)
			}
		})
	}
}

// TestLandlockMetadataGateReports: a refused change is a violation event
// of the run's status (the first per path), as a refused connect is.
func TestLandlockMetadataGateReports(t *testing.T) {
	for _, u := range users() {
		u := u
		t.Run(u.name, func(t *testing.T) {
			requireLandlock(t, u)
			ws := u.tempDir(t)
			rc := filepath.Join(filepath.Dir(ws), "rc")
			u.writeFile(t, rc, "# rc\n", 0o644)
			r := u.sh(t, &runOpts{dir: ws}, []string{"--backend", "landlock", "--workspace", ws, "--json-status", "fd:2"},
				`chmod 0700 `+rc+` 2>/dev/null; chmod 0700 `+rc+` 2>/dev/null; echo done`)
			if !strings.Contains(r.stdout, "done") {
				t.Fatalf("the script did not run (exit %d): %s", r.code, r.stderr)
			}
			var got []map[string]any
			for _, v := range violationLines(t, r.stderr) {
				if v["kind"] == "file_metadata" {
					got = append(got, v)
				}
			}
			if len(got) != 1 || got[0]["path"] != rc {
				t.Errorf("metadata violations %v, want one naming %s (the first per path)\n%s", got, rc, r.stderr)
			}
		})
	}
}
