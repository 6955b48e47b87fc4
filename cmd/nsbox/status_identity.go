package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/nsbox/nsbox/pkg/namespaces"
	"github.com/nsbox/nsbox/pkg/policy/backend"
	"github.com/nsbox/nsbox/pkg/sandbox"
)

// identityChecks are the status rows of the sandbox's identity: which id
// map a run here gets, and (for root) whether the current directory's
// filesystem takes the idmapped mount a bind needs.
func identityChecks() []backend.Check {
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
