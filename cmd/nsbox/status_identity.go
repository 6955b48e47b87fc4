package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/nsbox/nsbox/pkg/namespaces"
	"github.com/nsbox/nsbox/pkg/policy/backend"
	"github.com/nsbox/nsbox/pkg/sandbox"
)

// landlockIdentity is the identity row of the Landlock backend, which
// has no user namespace: commands run with the caller's own host ids, and
// a root caller's as host root without capabilities (review 67: the row
// said "never host root" whatever the backend).
func landlockIdentity() backend.Check {
	uid, gid := os.Geteuid(), os.Getegid()
	if uid == 0 {
		return backend.Check{Name: "identity", Value: "host root (landlock)",
			Detail: "no user namespace: commands run as host uid 0 with every capability dropped, and read every file root owns by its owner bits, but for the system secrets nsbox denies (/etc/shadow, SSH host keys, TLS private keys)",
			Fix:    "run nsbox as a non-root user (a container's USER, or runAsNonRoot in a pod), or allow user namespaces for the native backend (its root owns nothing on the host)"}
	}
	return backend.Check{Name: "identity", OK: true, Value: "your own ids (landlock)",
		Detail: fmt.Sprintf("no user namespace: commands run as uid %d, gid %d, as you do; chown to another id and setgroups fail inside", uid, gid)}
}

// identityChecks are the status rows of the sandbox's identity: which id
// map a run here gets, and (for root) whether the current directory's
// filesystem takes the idmapped mount a bind needs.
func identityChecks(backendName string) []backend.Check {
	switch backendName {
	case "landlock":
		return []backend.Check{landlockIdentity()}
	case "none":
		// No sandbox: the commands are the caller (review 70: the row
		// said "never host root" here too).
		return []backend.Check{{Name: "identity", Value: "your own (no sandbox)",
			Detail: fmt.Sprintf("backend none: commands run as uid %d, gid %d, with your capabilities, outside any sandbox", os.Geteuid(), os.Getegid())}}
	}
	id, err := sandbox.CurrentIdentity(sandbox.Policy{})
	if err != nil {
		return []backend.Check{{Name: "identity", Value: "error", Detail: err.Error(),
			Fix: "correct /etc/subuid and /etc/subgid (" + sandbox.EnvSubUID + " and " + sandbox.EnvSubGID + " point nsbox at other files, for tests)"}}
	}
	c := backend.Check{Name: "identity", OK: true}
	switch {
	case id.Mode == string(namespaces.ModeFull) && id.IdmappedBinds:
		c.Value = "full range (root)"
		c.Detail = fmt.Sprintf("65,536 uids and gids inside; the sandbox's root is host uid %d, gid %d (a range that owns nothing), never host root; binds (workspace, --rw, --ro) are idmapped so files land owned by their on-disk ids; setgroups allowed", id.HostUID, id.HostGID)
	case id.Mode == string(namespaces.ModeFull):
		c.Value = "full range (newuidmap)"
		c.Detail = fmt.Sprintf("65,536 uids and gids inside from /etc/subuid and /etc/subgid (newuidmap/newgidmap); you are uid %d inside as outside; setgroups allowed", id.UID)
	default:
		c.Value = "single id"
		c.Detail = fmt.Sprintf("only your own uid %d and gid %d are mapped: chown to another id, setgroups and tar's owner restore fail inside", id.UID, id.GID)
		if id.Reason != "" {
			c.Detail += " (" + id.Reason + ")"
			c.Fix = "install the uidmap package and give your user a range: sudo usermod --add-subuids 100000-165535 --add-subgids 100000-165535 $USER"
		}
	}
	checks := []backend.Check{c}
	if h := sandbox.IdentityHolder(); h.State != "unused" {
		checks = append(checks, holderCheck(h))
	}
	if os.Geteuid() == 0 {
		m := backend.Check{Name: "idmapped mounts", OK: true, Value: "supported"}
		dir, _ := os.Getwd()
		if err := sandbox.IdmapSupport(dir); err != nil {
			m.OK = false
			m.Value = "unsupported"
			m.Detail = fmt.Sprintf("%s: %v: a writable bind there fails", dir, err)
			m.Fix = "keep workspaces on ext4, xfs, btrfs or tmpfs (Linux 6.3+), or run with --allow-single-id (the sandbox then runs as host root)"
			if !errors.Is(err, sandbox.ErrIdmapUnsupported) {
				m.Value = "error"
			}
		} else {
			m.Detail = fmt.Sprintf("%s accepts idmapped mounts (mount_setattr MOUNT_ATTR_IDMAP)", dir)
		}
		checks = append(checks, m)
	}
	return checks
}

// holderCheck is the status row of the identity holder (a root-less full
// range's): whether starts are made in its user namespace, without
// newuidmap and newgidmap.
func holderCheck(h sandbox.HolderStatus) backend.Check {
	c := backend.Check{Name: "identity holder", OK: true, Value: h.State}
	idle := fmt.Sprintf("it leaves after %s without a start (%s=SECONDS)", h.Idle, sandbox.EnvIDHolderIdle)
	switch h.State {
	case "running":
		c.Detail = fmt.Sprintf("pid %d, socket %s: sandboxes are made in its user namespace, their maps written without newuidmap/newgidmap; %s; %s=off turns it off", h.Pid, h.Path, idle, sandbox.EnvIDHolder)
	case "none":
		c.Detail = fmt.Sprintf("the next start runs newuidmap/newgidmap and starts one at %s for the starts after it; %s; %s=off turns it off", h.Path, idle, sandbox.EnvIDHolder)
	case "unsuitable":
		c.Detail = fmt.Sprintf("pid %d maps other ids (%s): starts run newuidmap/newgidmap and the next one replaces it", h.Pid, h.Why)
	case "blocked":
		c.Detail = fmt.Sprintf("%s: every start runs newuidmap/newgidmap; remove it, or set XDG_RUNTIME_DIR to a directory of yours (mode 0700)", h.Why)
	case "off":
		c.Detail = fmt.Sprintf("%s=off: every start runs newuidmap and newgidmap (two set-uid programs, ~3 ms here)", sandbox.EnvIDHolder)
	}
	return c
}
