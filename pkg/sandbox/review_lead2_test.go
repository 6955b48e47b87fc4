package sandbox

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Review of 1fde825 (cacheenv.go): PrivateCacheEnv is documented as "the
// environment a sandbox of policy p starts its commands with", and
// `--dry-run` prints it (cmd/nsbox/policyflags.go passes "$TMPDIR" for the
// Landlock backend). withPrivateCache decides with path relations against
// the policy's mounts, and "$TMPDIR/.cache" is a relative path that no
// mount is ever related to: with the Landlock backend and a grant of the
// host's /tmp (--rw /tmp, --ro /tmp, a workspace at /tmp) the dry run shows
// XDG_CACHE_HOME=$TMPDIR/.cache while prepareLandlock, which passes the
// real TMPDIR below /tmp, leaves it unset (so `go build` fails on the
// read-only $HOME there). Checked by hand with the built binary:
// `nsbox run --backend landlock --rw /tmp --dry-run` prints the variable,
// `nsbox run --backend landlock --rw /tmp -- env` has none.
func TestReviewLead2DryRunCacheEnvMatchesLandlockRun(t *testing.T) {
	for _, m := range []Mount{
		{Kind: MountBind, Source: "/tmp", Dest: "/tmp"},
		{Kind: MountBind, Source: "/tmp", Dest: "/tmp", ReadOnly: true},
	} {
		p := Policy{Env: []string{"PATH=/bin", "HOME=/home/u"}, Mounts: []Mount{m}}
		// The TMPDIR prepareLandlock makes when the caller's TMPDIR is
		// unset: below the host's /tmp (privateTmpDir).
		real := filepath.Join("/tmp", "nsbox-1000", landlockTmpPrefix+"1.2.3-4")
		// What prepareLandlock calls, and what the dry run shows.
		_, run := lookup(withPrivateCacheIn(p.env(), p.Mounts, real), CacheEnvKey)
		dry, shown := lookup(PrivateCacheEnv(p, true), CacheEnvKey)
		if shown != run || !run {
			t.Errorf("mount %+v: the dry run shows XDG_CACHE_HOME=%q (set %v), a Landlock run below %s sets it: %v (cacheenv.go related on the literal \"$TMPDIR/.cache\")", m, dry, shown, real, run)
		}
	}
}

func lookup(env []string, k string) (string, bool) {
	i := slices.IndexFunc(env, func(kv string) bool { return strings.HasPrefix(kv, k+"=") })
	if i < 0 {
		return "", false
	}
	return env[i][len(k)+1:], true
}
