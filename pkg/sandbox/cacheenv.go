package sandbox

import (
	"path"
	"strings"

	"github.com/nsbox/nsbox/pkg/mounts"
)

// CacheEnvKey is the variable that points the tools a command runs (go
// build, pip, pnpm, yarn 1, ruff, and every other program that follows
// the XDG base directory spec) at a cache directory.
const CacheEnvKey = "XDG_CACHE_HOME"

// withPrivateCache adds XDG_CACHE_HOME=TMP/.cache to env, where tmp is the
// sandbox's private temporary directory (its /tmp tmpfs, or a Landlock
// session's TMPDIR), unless the caller already chose a cache:
//   - env sets XDG_CACHE_HOME (env.set, env.pass, Command.Env);
//   - a writable mount of the policy is at, above or below $HOME/.cache
//     (a cache directory bound read-write on purpose);
//   - tmp/.cache is not on the private tmpfs (a host directory bound
//     over tmp: the cache would be written to the host).
//
// Why: $HOME stays the host's, read-only, and is unreadable when the
// caller is root (the sandbox's root is not the host's, so /root, mode
// 0700, belongs to nobody inside). Tools that keep a cache under
// $HOME/.cache then fail outright (`go build`: "mkdir /root/.cache:
// permission denied") unless pointed elsewhere. The directory named here
// is written only inside the sandbox and disappears with it.
//
// Invariant: never the host's own cache. A cache the host's tools read
// later (~/.cache/go-build, ~/go/pkg/mod) must never be writable from a
// sandbox by default: a sandbox could plant a build output or a module's
// source that the host's next build links without checking it again
// (docs/security.md, "Caches the host trusts").
func withPrivateCache(env []string, ms []Mount, tmp string) []string {
	return cacheEnv(env, ms, tmp, true)
}

// withPrivateCacheIn is withPrivateCache for the Landlock backend, whose
// private directory dir (the session's TMPDIR, made by nsbox in the
// caller's own 0700 directory) no mount can cover: the policy's binds are
// Landlock rules there, and a grant of the host's /tmp leaves the TMPDIR
// nsbox's own (found by review: such a grant dropped the cache).
func withPrivateCacheIn(env []string, ms []Mount, dir string) []string {
	return cacheEnv(env, ms, dir, false)
}

// cacheEnv is withPrivateCache; tmpMounted says whether a bind at or above
// tmp/.cache would cover it (a mount namespace's /tmp).
func cacheEnv(env []string, ms []Mount, tmp string, tmpMounted bool) []string {
	home := ""
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case CacheEnvKey:
			return env
		case "HOME":
			home = v
		}
	}
	cache := path.Join(tmp, ".cache")
	for _, m := range ms {
		switch {
		case tmpMounted && m.Kind == mounts.Bind && related(m.Dest, cache):
			return env
		case home != "" && path.IsAbs(home) && related(m.Dest, path.Join(home, ".cache")) &&
			((m.Kind == mounts.Bind && !m.ReadOnly) || m.Kind == mounts.Tmpfs):
			return env
		}
	}
	return append(env[:len(env):len(env)], CacheEnvKey+"="+cache)
}

// related says whether a and b (clean absolute paths inside the sandbox)
// are the same path or one is an ancestor of the other.
func related(a, b string) bool {
	a, b = path.Clean(a), path.Clean(b)
	return a == b || a == "/" || b == "/" || strings.HasPrefix(b, a+"/") || strings.HasPrefix(a, b+"/")
}

// PrivateCacheEnv is the environment a sandbox of policy p starts its
// commands with, as far as the cache goes: p's environment plus
// XDG_CACHE_HOME in the private /tmp (see withPrivateCache). With the
// Landlock backend (landlock set) the private directory is a TMPDIR made
// at start, shown as "$TMPDIR"; the decision is the one the run makes,
// which depends on no property of that directory's path.
func PrivateCacheEnv(p Policy, landlock bool) []string {
	if landlock {
		return withPrivateCacheIn(p.env(), p.Mounts, "$TMPDIR")
	}
	return withPrivateCache(p.env(), p.Mounts, "/tmp")
}
