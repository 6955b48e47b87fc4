package policy

import (
	"slices"
	"testing"
)

// trailer.<token>.cmd (and the older .command) is a shell command git runs
// on `git interpret-trailers --trailer` and `git commit --trailer`
// (verified with git 2.39.5: trailer.sign.cmd=./t.sh ran ./t.sh from the
// work tree). core.gitProxy and remote.<name>.uploadpack/receivepack (local
// remotes) are run too. gitCommand does not list them, so a repository
// config naming a workspace script leaves that script writable.
func TestReviewGitTrailerCmdIsACommand(t *testing.T) {
	vars := parseGitConfig([]byte("[trailer \"sign\"]\n\tcmd = ./t.sh\n\tcommand = ./u.sh\n[core]\n\tgitProxy = ./p.sh\n" +
		"[remote \"o\"]\n\tuploadpack = ./up.sh\n\treceivepack = ./rp.sh\n"))
	var got []string
	for _, v := range vars {
		for _, p := range commandPointers(v, "/w", "/home/u", nil) {
			got = append(got, p.path)
		}
	}
	for _, want := range []string{"/w/t.sh", "/w/u.sh", "/w/p.sh", "/w/up.sh", "/w/rp.sh"} {
		if !slices.Contains(got, want) {
			t.Errorf("%s not protected; got %q", want, got)
		}
	}
}

// git -c and wrappers pass config through GIT_CONFIG_PARAMETERS
// ('core.hooksPath'='h' ...), which git 2.39 reads alongside
// GIT_CONFIG_COUNT. gitEnvConfig ignores it, so a relative hooksPath or
// command named there is left writable in the workspace.
func TestReviewGitConfigParametersEnv(t *testing.T) {
	env := map[string]string{"GIT_CONFIG_PARAMETERS": "'core.hooksPath'='h' 'core.fsmonitor'='./fsm'"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	got := renderGitConfig(gitEnvConfig(lookup))
	if !slices.Contains(got, "core.hookspath=h") || !slices.Contains(got, "core.fsmonitor=./fsm") {
		t.Errorf("GIT_CONFIG_PARAMETERS not read: %q", got)
	}
}
