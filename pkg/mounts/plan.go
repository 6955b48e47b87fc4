// Package mounts builds the root filesystem of a sandbox: an ordered mount
// plan, carried out inside a new mount namespace, ending in pivot_root. Every
// destination path is hostile: it is resolved by fd inside the new root
// (openat2 RESOLVE_IN_ROOT) and every mount is attached by fd with the new
// mount API, so a symlink can never redirect a mount outside the sandbox.
// It imports no other nsbox package.
package mounts

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// Kind is what a Mount puts at its destination.
type Kind string

const (
	// Bind mounts a host path (Source) at Dest.
	Bind Kind = "bind"
	// Tmpfs mounts an empty, writable tmpfs at Dest.
	Tmpfs Kind = "tmpfs"
	// Hide makes Dest unreadable: an empty read-only tmpfs over a directory,
	// /dev/null over a file. It fails closed: a Dest that is missing when
	// the root is built, or that is reached through a symlink below the
	// mount that shows it, is an error (the policy saw it, so something
	// moved it since), unless Optional is set, which skips a missing Dest
	// (a symlink on the way stays an error).
	Hide Kind = "hide"
	// Protect keeps Dest read-only inside a writable tree, including when it
	// does not exist yet: a read-only bind of itself, or an empty read-only
	// placeholder so that it cannot be created.
	Protect Kind = "protect"
)

// Mount is one entry of the plan, applied in order after the base root.
type Mount struct {
	Kind     Kind   `json:"kind"`
	Source   string `json:"source,omitempty"`
	Dest     string `json:"dest"`
	ReadOnly bool   `json:"readonly,omitempty"`
	// Size bounds a tmpfs in bytes (0: Plan.TmpfsMax if set, else the
	// kernel default, half of RAM).
	Size int64 `json:"size,omitempty"`
	// Optional binds whose source is missing, and Optional hides whose
	// Dest is missing, are skipped, not an error.
	Optional bool `json:"optional,omitempty"`
	// Dir tells Protect whether a missing Dest is a directory.
	Dir bool `json:"dir,omitempty"`
	// NoFollow: Protect mounts over Dest's last component itself, a
	// symlink on the way to a protected path, without following it, so
	// that it cannot be removed or renamed (EBUSY) and a directory of the
	// sandbox's own put in its place. It must still be there.
	NoFollow bool `json:"nofollow,omitempty"`
}

// Plan is the whole root filesystem of a sandbox.
type Plan struct {
	// HostDirs lists the host paths bound read-only at the same place; nil
	// binds every top-level entry of the host root (bwrap's --ro-bind / /,
	// but on a fresh tmpfs so that new top-level directories can exist).
	HostDirs []string `json:"hostDirs,omitempty"`
	// TmpSize bounds the private /tmp (0: TmpfsMax if set, else the
	// kernel default, half of RAM).
	TmpSize int64 `json:"tmpSize,omitempty"`
	// TmpfsMax, when > 0, bounds every tmpfs the sandbox can write (/tmp,
	// /dev/shm, /dev, /run and the Tmpfs entries of Mounts): each gets at
	// most TmpfsMax bytes (its own size when smaller) and one inode per
	// 4 KiB of that size (at least 1024). tmpfs pages and inodes are
	// kernel memory that RLIMIT_DATA and RLIMIT_AS do not count, so when
	// the memory limit falls back to rlimits this is what bounds the
	// memory a sandbox can pin through its file systems. Set it to the
	// memory limit. The bound is per file system, not shared among them.
	TmpfsMax int64 `json:"tmpfsMax,omitempty"`
	// Mounts are applied in order after /, /proc, /dev, /tmp and /run.
	Mounts []Mount `json:"mounts,omitempty"`
	// SelfDest, when set, receives a read-only bind of the running binary
	// (for the in-sandbox `nsbox call` client).
	SelfDest string `json:"selfDest,omitempty"`

	// Made is filled by Build: the Protect destinations it created, empty,
	// because they were missing (placeholders; not the user's files).
	Made []string `json:"-"`
	// OuterProc binds the /proc this process sees, read-only, instead of
	// mounting a fresh one: for a kernel that refuses a fresh /proc under
	// an outer container's masked one. The sandbox then sees the outer
	// PID namespace's processes (their command lines; environ, fds and
	// memory only where ptrace rules allow, which the Landlock domain of
	// the scopes step refuses for processes outside the sandbox).
	OuterProc bool `json:"outerProc,omitempty"`
	// ProcFallback binds the outer /proc (and sets OuterProc) when the
	// kernel refuses a fresh one with EPERM, instead of failing.
	ProcFallback bool `json:"procFallback,omitempty"`
	// Premade maps an index of Mounts (a Bind) to a detached mount that
	// the supervisor made for it (an idmapped bind, IdmappedBind), attached
	// instead of a clone of Source. Build owns and closes the fds. Not
	// part of the JSON: fds travel beside it.
	Premade map[int]int `json:"-"`
	// Owner, when set, owns every tmpfs the plan makes and every file or
	// directory it creates as a mount point: the sandbox's own uid and gid
	// inside. Build may run before the worker has taken those ids (a root
	// caller's worker builds as host root, which can walk root-only host
	// directories to hide what is in them); what it creates must still
	// belong to the sandbox, and an idmapped bind refuses (EOVERFLOW) a
	// creator whose ids it does not map.
	Owner *Owner `json:"owner,omitempty"`
}

// Owner is a uid and gid of the sandbox's user namespace.
type Owner struct {
	UID uint32 `json:"uid"`
	GID uint32 `json:"gid"`
}

// Error is a failed step of the plan. Its message names what was mounted
// where, for users: "mount /home/u/p on /home/u/p: no such file or directory".
type Error struct {
	Step   string
	Source string
	Dest   string
	Err    error
}

func (e *Error) Error() string {
	switch {
	case e.Source != "" && e.Dest != "":
		return fmt.Sprintf("%s %s on %s: %s", e.Step, e.Source, e.Dest, errText(e.Err))
	case e.Dest != "":
		return fmt.Sprintf("%s %s: %s", e.Step, e.Dest, errText(e.Err))
	}
	return fmt.Sprintf("%s: %s", e.Step, errText(e.Err))
}

func (e *Error) Unwrap() error { return e.Err }

func errText(err error) string {
	if err == nil {
		return "failed"
	}
	return err.Error()
}

// ErrInvalid reports a plan that is wrong before anything is mounted.
var ErrInvalid = errors.New("invalid mount plan")

// reserved are destinations the base root owns; user mounts may go below
// them (a bind into /tmp/x is fine) but not replace them.
var reserved = map[string]bool{"/": true, "/proc": true, "/dev": true}

// Validate checks the plan without touching the system.
func (p *Plan) Validate() error {
	for i, m := range p.Mounts {
		field := fmt.Sprintf("mounts[%d]", i)
		if err := checkPath(m.Dest); err != nil {
			return fmt.Errorf("%w: %s.dest: %v", ErrInvalid, field, err)
		}
		if reserved[path.Clean(m.Dest)] {
			return fmt.Errorf("%w: %s.dest: %s cannot be replaced", ErrInvalid, field, m.Dest)
		}
		switch m.Kind {
		case Bind:
			if err := checkPath(m.Source); err != nil {
				return fmt.Errorf("%w: %s.source: %v", ErrInvalid, field, err)
			}
		case Tmpfs, Hide, Protect:
		default:
			return fmt.Errorf("%w: %s.kind: unknown kind %q", ErrInvalid, field, m.Kind)
		}
	}
	if p.TmpSize < 0 || p.TmpfsMax < 0 {
		return fmt.Errorf("%w: tmpSize and tmpfsMax cannot be negative", ErrInvalid)
	}
	for i, d := range p.HostDirs {
		if err := checkPath(d); err != nil {
			return fmt.Errorf("%w: hostDirs[%d]: %v", ErrInvalid, i, err)
		}
	}
	return nil
}

func checkPath(p string) error {
	switch {
	case p == "":
		return errors.New("empty path")
	case strings.ContainsRune(p, 0):
		return errors.New("path contains a NUL byte")
	case !path.IsAbs(p):
		return fmt.Errorf("path %q is not absolute", p)
	}
	return nil
}
