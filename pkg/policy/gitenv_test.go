package policy

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// The configs the caller's environment gives git (GIT_CONFIG_GLOBAL,
// GIT_CONFIG_SYSTEM, GIT_CONFIG_KEY_n) point git to files as the usual
// ones do: a git run later from the same shell reads them, so what they
// name in the workspace is protected too.
func TestProtectGitEnvConfig(t *testing.T) {
	h := testHost(t)
	ws := h.Cwd
	write(t, filepath.Join(ws, ".git", "HEAD"), "ref: refs/heads/main\n")
	global := filepath.Join(h.Home, "elsewhere", "gitconfig")
	write(t, global, "[core]\n\thooksPath = global-hooks\n[alias]\n\tfmt = !./tools/fmt.sh\n")
	write(t, filepath.Join(ws, "tools", "fmt.sh"), "#!/bin/sh\n")
	write(t, filepath.Join(ws, "tools", "crypt"), "#!/bin/sh\n")
	env := map[string]string{
		"PATH": "/usr/bin:/bin", "HOME": h.Home,
		"GIT_CONFIG_GLOBAL": global,
		"GIT_CONFIG_COUNT":  "2",
		"GIT_CONFIG_KEY_0":  "include.path", "GIT_CONFIG_VALUE_0": filepath.Join(ws, "env.gitconfig"),
		"GIT_CONFIG_KEY_1": "filter.Crypt.smudge", "GIT_CONFIG_VALUE_1": "./tools/crypt",
	}
	h.LookupEnv = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	res := mustLoad(t, h, Request{ConfigFile: "-"})
	for _, d := range []string{"global-hooks", "tools/fmt.sh", "env.gitconfig", "tools/crypt"} {
		if !hasMount(res.Policy, "protect", filepath.Join(ws, d)) {
			t.Errorf("%s not protected: %+v", d, res.Policy.Mounts)
		}
	}
}

func TestGitEnvConfig(t *testing.T) {
	env := map[string]string{"GIT_CONFIG_COUNT": "2", "GIT_CONFIG_KEY_0": "Core.HooksPath", "GIT_CONFIG_VALUE_0": "h",
		"GIT_CONFIG_KEY_1": "includeIf.gitdir:/W/.path", "GIT_CONFIG_VALUE_1": "/i"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	got := renderGitConfig(gitEnvConfig(lookup))
	if want := []string{"core.hookspath=h", "includeif.gitdir:/W/.path=/i"}; !slices.Equal(got, want) {
		t.Errorf("%q, want %q", got, want)
	}
	// git refuses the lot when one is missing or malformed.
	for _, bad := range []map[string]string{
		{"GIT_CONFIG_COUNT": "2", "GIT_CONFIG_KEY_0": "core.x", "GIT_CONFIG_VALUE_0": "v"},
		{"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "nodot", "GIT_CONFIG_VALUE_0": "v"},
		{"GIT_CONFIG_COUNT": "x"},
	} {
		env = bad
		if v := gitEnvConfig(lookup); v != nil {
			t.Errorf("%v: %v", bad, v)
		}
	}
}

// GIT_CONFIG_PARAMETERS is read as the installed git reads it (`git
// config --list` shows what the environment gives); skipped without git.
func TestGitConfigParametersAgreesWithGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed: nothing to compare with")
	}
	dir := t.TempDir()
	for _, params := range []string{
		`'core.hooksPath'='h' 'core.fsmonitor'='./fsm'`,
		`'alias.x=!./x.sh' 'Core.Pager'`,
		`'includeIf.gitdir:/W/.path'='/i' 'filter.Crypt.smudge'='./it'\''s'`,
		`'trailer.sign.cmd'='./t\!.sh'   'core.bare'=`,
	} {
		cmd := exec.Command("git", "config", "--list", "--null")
		cmd.Dir = dir
		cmd.Env = []string{"HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1", "PATH=" + os.Getenv("PATH"), "GIT_CONFIG_PARAMETERS=" + params}
		b, err := cmd.Output()
		if err != nil {
			t.Errorf("%s: git refuses it: %v", params, err)
			continue
		}
		var git []string
		for _, e := range bytes.Split(b, []byte{0}) {
			if len(e) > 0 {
				name, value, has := bytes.Cut(e, []byte{'\n'})
				if has {
					git = append(git, string(name)+"="+string(value))
				} else {
					git = append(git, string(name))
				}
			}
		}
		vars, ok := gitConfigParameters(params)
		if !ok || !agreesWithGit(git, vars) {
			t.Errorf("%s:\n git reads %q\n we read   %q (%v)", params, git, renderGitConfig(vars), ok)
		}
	}
	for _, bogus := range []string{`'unterminated`, `'a.b'x`, `'a.b'='v'x`, `a.b=v`} {
		if _, ok := gitConfigParameters(bogus); ok {
			t.Errorf("%s read, which git calls bogus", bogus)
		}
	}
}
