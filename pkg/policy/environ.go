package policy

// The sandbox's environment: what of the caller's crosses, and what the
// plan adds to it.

import (
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

// env builds the policy's environment (the resolver's "env" step).
func (r *resolver) env() error {
	var env []string
	lookup := r.h.LookupEnv
	// Invariant: the policy's environment is always complete (never nil),
	// so nothing of the caller's environment crosses unless listed.
	if !r.m.envClear.set || r.m.envClear.v {
		env = sandbox.BaseEnv(func(k string) string { v, _ := lookup(k); return v })
	} else {
		env = append(env, r.h.Environ()...)
		r.warn(r.m.envClear.at.warn(false, "the caller's whole environment, secrets included, is visible inside"))
	}
	for _, p := range r.m.envPass {
		if v, ok := lookup(p.v); ok {
			env = append(env, p.v+"="+v)
		}
	}
	keys := make([]string, 0, len(r.m.envSet))
	for k := range r.m.envSet {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+r.m.envSet[k].v)
	}
	env = dedupEnv(env)
	if r.gitPlaceholder() {
		env = goBuildVCSOff(env)
	}
	r.res.Policy.Env = env
	return nil
}

// gitPlaceholder says whether a build would meet an empty directory put
// in place of a missing .git (the protect entry "$NSBOX_RW/.git/":
// nothing inside can create a repository there for the host's git to
// trust), where no repository's builds would lose their VCS stamps
// (vcs.revision, vcs.modified: what says a binary came from a tree the
// agent changed). With a workspace, only the workspace's placeholder
// counts: a repository workspace keeps its stamps beside an extra --rw
// directory without one, whose build asks for -buildvcs=false in cmd/go's
// own message (found by review). Without a workspace (a run from /, the
// strict profile), it counts when every writable directory got one: then
// none is a repository (found by review: `--profile strict --rw .` could
// not build); a repository --rw directory keeps its stamps as a
// repository workspace does (found by a second review). Backend none
// makes no placeholder.
func (r *resolver) gitPlaceholder() bool {
	if r.m.backend.v == BackendNone {
		return false
	}
	// Compared as strings only: nothing is opened by these names.
	planned := func(dir string) bool {
		want := filepath.Join(dir, ".git")
		return slices.ContainsFunc(r.res.Placeholders, func(p Placeholder) bool { return p.Dir && p.Path == want })
	}
	if r.res.Workspace != "" {
		return planned(r.res.Workspace)
	}
	for _, root := range r.rwRoots {
		if !planned(root) {
			return false
		}
	}
	return len(r.rwRoots) > 0
}

// goBuildVCSOff adds -buildvcs=false to GOFLAGS, unless GOFLAGS already
// says -buildvcs. `go build` takes any directory named .git for a
// repository (cmd/go/internal/vcs isVCSRoot) and then fails on the
// placeholder ("error obtaining VCS status: exit status 128"), which git
// itself skips as not a repository. The binary only loses its VCS stamp,
// which a directory without a repository would not have had either. An
// environment GOFLAGS replaces one set with `go env -w`: pass GOFLAGS
// (env.pass) to keep it.
func goBuildVCSOff(env []string) []string {
	const off = "-buildvcs=false"
	for i, kv := range env {
		v, ok := strings.CutPrefix(kv, "GOFLAGS=")
		if !ok {
			continue
		}
		for _, f := range strings.Fields(v) {
			if f == "-buildvcs" || strings.HasPrefix(f, "-buildvcs=") || f == "--buildvcs" || strings.HasPrefix(f, "--buildvcs=") {
				return env
			}
		}
		out := append([]string(nil), env...)
		out[i] = "GOFLAGS=" + strings.TrimSpace(strings.TrimSpace(v)+" "+off)
		return out
	}
	return append(env[:len(env):len(env)], "GOFLAGS="+off)
}

// dedupEnv keeps the last value of each key, at the place of the first.
func dedupEnv(env []string) []string {
	idx := map[string]int{}
	out := []string{}
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if strings.ContainsRune(kv, 0) || k == "" {
			continue
		}
		if i, ok := idx[k]; ok {
			out[i] = kv
			continue
		}
		idx[k] = len(out)
		out = append(out, kv)
	}
	return out
}
