package integration

// Review 57: command lines of the user's git config whose file that
// really runs commandFiles (pkg/policy/gitconfig.go) still misses. Same
// harness as review 55: a global config (GIT_CONFIG_GLOBAL) names the
// program; the sandbox tries to rewrite it; the host's next git status
// runs core.fsmonitor.

import (
	"path/filepath"
	"strings"
	"testing"
)

func review57Fsmonitor(t *testing.T, u user, fsmonitor, script string) {
	t.Helper()
	base, ws, env := review55Setup(t, u, "")
	u.writeFile(t, filepath.Join(ws, script), "#!/bin/sh\nexit 1\n", 0o755)
	review55Host(t, u, ws, env, "git config core.fsmonitor "+shellQuote(fsmonitor))
	marker := filepath.Join(base, "pwned")
	r := review55Sandbox(t, u, ws, env, `(printf '#!/bin/sh\ntouch `+marker+`\nexit 1\n' > `+script+`) 2>/dev/null && echo FSMON-WRITTEN`)
	review55Host(t, u, ws, env, "git status >/dev/null 2>&1")
	if strings.Contains(r.stdout, "FSMON-WRITTEN") || exists(marker) {
		t.Fatalf("core.fsmonitor = %s: %s was writable (stdout %q); host `git status` ran it: marker exists=%v", fsmonitor, script, r.stdout, exists(marker))
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// TestReview57BashLcCodeProtected
//
// Finding (MEDIUM): `bash -lc 'CODE'` (and sh -ec, bash -euc): only a
// lone "-c" is read as sh's code flag, so CODE is taken as a script path
// ("tools/fsmonitor.sh --x", which names nothing), and the program it
// runs stays writable.
func TestReview57BashLcCodeProtected(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		review57Fsmonitor(t, u, "bash -lc 'tools/fsmonitor.sh --x'", "tools/fsmonitor.sh")
	})
}

// TestReview57CdThenProgramProtected
//
// Finding (MEDIUM): `cd DIR && ./prog` runs DIR/prog; commandFiles takes
// ./prog from the top (a placeholder there) and leaves DIR/prog writable.
func TestReview57CdThenProgramProtected(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		review57Fsmonitor(t, u, "cd tools && ./fsmonitor.sh", "tools/fsmonitor.sh")
	})
}

// TestReview57ToplevelSubstitutionProtected
//
// Finding (MEDIUM): `"$(git rev-parse --show-toplevel)"/tools/x` gives a
// relative word with the substitution in it; the pointer is
// <top>/$(git rev-parse --show-toplevel)/tools/x (a placeholder directory
// of that name in the repository), and <top>/tools/x stays writable.
func TestReview57ToplevelSubstitutionProtected(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		review57Fsmonitor(t, u, `"$(git rev-parse --show-toplevel)"/tools/fsmonitor.sh`, "tools/fsmonitor.sh")
	})
}

// TestReview57ControlPlainScriptProtected: the harness reaches nsbox's
// reading of the config (passes on the current code).
func TestReview57ControlPlainScriptProtected(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		review57Fsmonitor(t, u, "sh -c 'tools/fsmonitor.sh --x'", "tools/fsmonitor.sh")
	})
}
