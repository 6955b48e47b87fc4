package policy

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

// UnixSockets is the [unix_sockets] table: host unix sockets a sandbox may
// reach. By default none: connects and sends to path sockets outside the
// sandbox's own writable places are refused (sandbox.UnixSocketPolicy).
type UnixSockets struct {
	// Allow lists host socket paths let through: "$SSH_AUTH_SOCK",
	// "$XDG_RUNTIME_DIR/podman/podman.sock". Variables are nsbox's own
	// ($HOME, $XDG_RUNTIME_DIR...) and, here only, any variable of the
	// caller's environment: a socket's path is usually published in one.
	// "!PATH" removes an entry a lower layer added.
	Allow []string `toml:"allow" json:"allow,omitempty"`
}

// privatePlaces are fresh inside every sandbox: a host socket there is
// not visible unless it is bound in.
var privatePlaces = []string{"/tmp", "/run", "/dev/shm"}

// unixSockets resolves unix_sockets.allow. An entry whose variable is unset
// is left out with a warning (the socket stays refused: fail closed). An
// allowed socket in a place that is private inside (/tmp, /run) is bound
// in read-only at the same path, or it could not be reached at all.
func (r *resolver) unixSockets() error {
	var out []string
	for _, e := range r.m.unixAllow {
		p, ok := r.expandSocket(e.v, e.at)
		if !ok {
			continue
		}
		out = append(out, filepath.Clean(r.absolute(p)))
	}
	out = dedupStrings(out)
	r.res.Policy.UnixSockets.Allow = out
	for _, p := range out {
		for _, d := range privatePlaces {
			if strings.HasPrefix(p, d+"/") {
				r.res.Policy.Mounts = append(r.res.Policy.Mounts, sandbox.Mount{
					Kind: sandbox.MountBind, Source: p, Dest: p, ReadOnly: true, Optional: true,
				})
				break
			}
		}
	}
	return nil
}

// expandSocket expands nsbox's variables and, after them, the caller's
// environment.
func (r *resolver) expandSocket(s string, at origin) (string, bool) {
	var missing string
	v := os.Expand(s, func(name string) string {
		if val, ok := r.vars[name]; ok && val != "" {
			return val
		}
		if r.h.LookupEnv != nil {
			if val, ok := r.h.LookupEnv(name); ok && val != "" {
				return val
			}
		}
		if missing == "" {
			missing = name
		}
		return ""
	})
	if missing != "" {
		r.warn(at.warn(false, "$%s is not set; the socket entry %q is left out (the socket stays refused)", missing, s))
		return "", false
	}
	if v == "" {
		return "", false
	}
	return v, true
}
