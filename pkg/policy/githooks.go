package policy

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// Hook managers: a repository's hooks are protected, but the common
// managers keep what a hook runs in the work tree, where a sandbox could
// change it for git to run at the next commit:
//
//   - husky (9 and later) points core.hooksPath to .husky/_, whose stubs
//     run .husky/HOOK: the whole .husky directory is protected;
//   - pre-commit's hooks run what .pre-commit-config.yaml (or the file
//     their --config names) lists, a "repo: local" entry any command;
//   - lefthook's hooks run what its config files list, and the scripts of
//     .lefthook/ and .lefthook-local/: those that exist are protected,
//     with the local config beside each (a placeholder when missing) and
//     what its "extends" lists; one of its other config names that the
//     run makes is quarantined when it ends (audited);
//   - overcommit's hooks run what .overcommit.yml lists (a placeholder
//     when missing) and the Ruby hooks of .git-hooks/;
//   - rusty-hook's hooks run what .rusty-hook.toml or rusty-hook.toml
//     lists (the first a placeholder when neither exists).
//
// A hook may run anything else of the work tree (`npm test` runs the
// tests the sandbox edits); those are the project's code, not its
// configuration, and stay writable.

// gitHookNames are the hooks git runs (githooks(5)).
var gitHookNames = []string{
	"applypatch-msg", "pre-applypatch", "post-applypatch", "pre-commit", "pre-merge-commit",
	"prepare-commit-msg", "commit-msg", "post-commit", "pre-rebase", "post-checkout", "post-merge",
	"pre-push", "pre-receive", "update", "proc-receive", "post-receive", "post-update",
	"reference-transaction", "push-to-checkout", "pre-auto-gc", "post-rewrite", "sendemail-validate",
	"fsmonitor-watchman", "post-index-change",
}

// preCommitConfig finds the config a pre-commit hook names.
var preCommitConfig = regexp.MustCompile(`--config[= ]([^\s"')]+)`)

// lefthookFiles are the configs and script directories lefthook reads
// from a work tree's top.
var lefthookFiles = func() []string {
	var out []string
	for _, base := range []string{"lefthook", ".lefthook", "lefthook-local", ".lefthook-local", ".config/lefthook", ".config/lefthook-local"} {
		for _, ext := range []string{"yml", "yaml", "json", "jsonc", "toml"} {
			out = append(out, base+"."+ext)
		}
	}
	return append(out, ".lefthook/", ".lefthook-local/")
}()

// hookManagerPointers returns what the hooks in dir run from workTree
// when a hook manager installed them: held is to be read-only (a
// placeholder where missing), audited is what does not exist and would be
// read if a run made it (quarantined then, createdaudit.go). Hooks inside
// a writable root are read by fd below it (readConfigFile), bounded.
func hookManagerPointers(dir, workTree string, roots []string) (held, audited []gitPointer) {
	var out []gitPointer
	if filepath.Base(dir) == "_" && (readConfigFile(filepath.Join(dir, "h"), roots) != nil || readConfigFile(filepath.Join(dir, "husky.sh"), roots) != nil) {
		out = append(out, gitPointer{path: filepath.Dir(dir), dir: true})
	}
	preCommit, lefthook, overcommit, rustyHook := map[string]bool{}, false, false, false
	for _, name := range gitHookNames {
		hook := string(readConfigFile(filepath.Join(dir, name), roots))
		if strings.Contains(hook, "pre-commit") && strings.Contains(hook, "hook-impl") {
			cfg := ".pre-commit-config.yaml"
			if m := preCommitConfig.FindStringSubmatch(hook); m != nil {
				cfg = m[1]
			}
			preCommit[cfg] = true
		}
		lefthook = lefthook || strings.Contains(hook, "lefthook")
		overcommit = overcommit || strings.Contains(hook, "overcommit")
		rustyHook = rustyHook || strings.Contains(hook, "rusty-hook")
	}
	if overcommit {
		out = append(out, gitPointer{path: filepath.Join(workTree, ".overcommit.yml")})
		if p := filepath.Join(workTree, ".git-hooks"); present(p, roots) {
			out = append(out, gitPointer{path: p, dir: true})
		}
	}
	if rustyHook {
		held := false
		for _, name := range []string{".rusty-hook.toml", "rusty-hook.toml"} {
			if p := filepath.Join(workTree, name); present(p, roots) {
				out = append(out, gitPointer{path: p})
				held = true
			}
		}
		if !held {
			out = append(out, gitPointer{path: filepath.Join(workTree, ".rusty-hook.toml")})
		}
	}
	for _, cfg := range slices.Sorted(maps.Keys(preCommit)) { // the mounts in a stable order
		if !filepath.IsAbs(cfg) {
			cfg = filepath.Join(workTree, cfg)
		}
		out = append(out, gitPointer{path: filepath.Clean(cfg)})
	}
	if lefthook {
		for _, f := range lefthookFiles {
			p := filepath.Join(workTree, strings.TrimSuffix(f, "/"))
			if !present(p, roots) {
				continue
			}
			out = append(out, gitPointer{path: p, dir: strings.HasSuffix(f, "/")})
			if strings.HasSuffix(f, "/") {
				continue
			}
			// Invariant: lefthook merges a local config
			// (lefthook-local.EXT beside lefthook.EXT) into the one its
			// hooks run, and follows extends: both stay read-only, the
			// local one even when missing (a placeholder), or the
			// sandbox wrote a command the host's next git commit ran
			// (review).
			dir, base := filepath.Split(p)
			if name, ext, ok := strings.Cut(base, "."+strings.TrimPrefix(filepath.Ext(base), ".")); ok && !strings.HasSuffix(name, "-local") && ext == "" {
				out = append(out, gitPointer{path: filepath.Join(dir, name+"-local"+filepath.Ext(base))})
			}
			for _, x := range lefthookExtends(readConfigFile(p, roots)) {
				if !filepath.IsAbs(x) {
					x = filepath.Join(workTree, x)
				}
				out = append(out, gitPointer{path: filepath.Clean(x)})
			}
		}
		// Invariant: a lefthook config the run makes under any of its
		// other names does not reach the host's next commit. lefthook
		// loads the first of its thirty names that exists, extension
		// by extension (lefthook.yml before .config/lefthook.yml before
		// lefthook.yaml ...), and merges the first local one: a new
		// lefthook.yml beside an existing .lefthook.toml replaces it,
		// and a new .lefthook-local.yaml is merged in (review). The
		// missing names are audited, not held by thirty placeholders:
		// what the run makes under one is quarantined when it ends.
		for _, f := range lefthookFiles {
			p := filepath.Join(workTree, strings.TrimSuffix(f, "/"))
			if !slices.ContainsFunc(out, func(g gitPointer) bool { return g.path == p }) && !present(p, roots) {
				audited = append(audited, gitPointer{path: p, dir: strings.HasSuffix(f, "/")})
			}
		}
	}
	return out, audited
}

// lefthookExtends are the files a lefthook YAML config's top-level
// "extends:" names, as a block list ("  - ci/common.yml") or a flow one
// ("extends: [a.yml, b.yml]"), quotes removed. A reading of the common
// forms, not a YAML parser: what it misses stays writable, what it
// misreads is at worst protected.
func lefthookExtends(b []byte) []string {
	var out []string
	clean := func(v string) {
		v = strings.Trim(strings.TrimSpace(v), `"'`)
		if v != "" {
			out = append(out, v)
		}
	}
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimRight(line, "\r")
		if rest, ok := strings.CutPrefix(line, "extends:"); ok {
			in = true
			if rest = strings.TrimSpace(rest); strings.HasPrefix(rest, "[") {
				for _, v := range strings.Split(strings.Trim(rest, "[]"), ",") {
					clean(v)
				}
				in = false
			} else if rest != "" {
				clean(rest)
				in = false
			}
			continue
		}
		if !in {
			continue
		}
		t := strings.TrimSpace(line)
		switch {
		case t == "" || strings.HasPrefix(t, "#"):
		case strings.HasPrefix(t, "- "):
			clean(strings.TrimPrefix(t, "- "))
		default:
			in = false
		}
	}
	return out
}

// present says whether p exists: inside a writable root looked up by fd
// below it, never through a symlink (a path there is the sandbox's to
// shape: see readConfigFile); elsewhere with lstat.
func present(p string, roots []string) bool {
	root, rel, ok := beneathWritable(p, roots)
	if !ok {
		return false
	}
	if root == "" {
		_, err := os.Lstat(p)
		return err == nil
	}
	fd, err := openBeneathRoot(root, rel, unix.O_PATH|unix.O_NOFOLLOW)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}
