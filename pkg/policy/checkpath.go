package policy

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

// Access is what a sandbox built from a policy can do with a path.
type Access string

// The kinds of Access.
const (
	// AccessReadWrite: the sandbox sees the host's file and its writes
	// reach it.
	AccessReadWrite Access = "read-write"
	// AccessReadOnly: the sandbox sees the host's file and cannot change
	// it.
	AccessReadOnly Access = "read-only"
	// AccessHidden: the path is there but reads as empty (/dev/null or an
	// empty directory over it): a secret the policy hides.
	AccessHidden Access = "hidden"
	// AccessInvisible: the host's file is not seen at all; the sandbox has
	// its own empty directory there (a private /tmp), or nothing.
	AccessInvisible Access = "invisible"
)

// Rule is the part of the policy that decided a path's Access.
type Rule struct {
	// Kind is the mount kind (bind, tmpfs, hide, protect), or "root" for
	// the read-only host root and "none" when nothing covers the path.
	Kind string `json:"kind"`
	// Dest is where the rule applies inside; Source the host path of a
	// bind.
	Dest   string `json:"dest,omitempty"`
	Source string `json:"source,omitempty"`
	// Why is the plan's explanation (which profile or flag said so).
	Why string `json:"why"`
}

func (r Rule) String() string {
	switch {
	case r.Source != "" && r.Source != r.Dest:
		return fmt.Sprintf("%s %s on %s: %s", r.Kind, r.Source, r.Dest, r.Why)
	case r.Dest != "":
		return fmt.Sprintf("%s %s: %s", r.Kind, r.Dest, r.Why)
	}
	return r.Why
}

// ErrRelativePath is returned by CheckPath for a path that is not absolute.
var ErrRelativePath = errors.New("the path must be absolute")

// privateTop are the top-level directories the sandbox always has its own
// of, never the host's (pkg/mounts builds them before the policy's mounts).
var privateTop = map[string]string{
	"/proc": "a fresh proc of the sandbox's PID namespace",
	"/dev":  "the sandbox's minimal /dev",
	"/tmp":  "the sandbox's private /tmp",
	"/run":  "the sandbox's private /run",
}

// CheckPath says what the sandbox of this policy can do with the path p,
// as seen inside (for the binds nsbox makes, the same as on the host), and
// which rule decided: the last mount of the policy that covers p (mounts
// apply in order, each on top of the ones before), else the base root.
// It reads the resolved policy only: a path created after the resolution
// under a hidden or protected pattern may be decided differently by the
// next resolution.
func (r *Result) CheckPath(p string) (Access, Rule, error) {
	if !filepath.IsAbs(p) {
		return "", Rule{}, fmt.Errorf("%q: %w", p, ErrRelativePath)
	}
	p = filepath.Clean(p)
	access, rule := r.base(p)
	for _, m := range r.Policy.Mounts {
		if !covers(m.Dest, p) {
			continue
		}
		rule = Rule{Kind: string(m.Kind), Dest: m.Dest, Source: m.Source, Why: r.why(m)}
		switch m.Kind {
		case sandbox.MountBind:
			access = AccessReadWrite
			if m.ReadOnly {
				access = AccessReadOnly
			}
			if m.Source != "" && m.Source != m.Dest {
				// Bound from elsewhere: what p names inside is the
				// host's Source/rel, not the host's p.
				rule.Why += fmt.Sprintf(" (inside, %s is the host's %s)", p, filepath.Join(m.Source, strings.TrimPrefix(p, m.Dest)))
			}
		case sandbox.MountHide:
			access = AccessHidden
		case sandbox.MountProtect:
			access = AccessReadOnly
		case sandbox.MountTmpfs:
			access = AccessInvisible
		default:
			access = AccessInvisible
		}
	}
	return access, rule, nil
}

// base is p's access before the policy's mounts: the read-only host root
// (or HostDirs), less the directories the sandbox always has its own of.
func (r *Result) base(p string) (Access, Rule) {
	top := "/" + strings.SplitN(strings.TrimPrefix(p, "/"), "/", 2)[0]
	if why, ok := privateTop[top]; ok {
		return AccessInvisible, Rule{Kind: "tmpfs", Dest: top, Why: why}
	}
	if r.Policy.HostDirs == nil {
		if p == "/" {
			return AccessReadOnly, Rule{Kind: "root", Dest: "/", Why: "the new root: an empty read-only tmpfs holding the host's top-level entries"}
		}
		return AccessReadOnly, Rule{Kind: "root", Dest: top, Why: "the host root, every top-level entry bound read-only"}
	}
	for _, d := range r.Policy.HostDirs {
		if covers(d, p) {
			return AccessReadOnly, Rule{Kind: "bind", Dest: d, Source: d, Why: "a system directory of the policy's host_dirs, read-only"}
		}
	}
	return AccessInvisible, Rule{Kind: "none", Why: "not in the policy's host_dirs, and no mount of the policy covers it"}
}

// why is the plan's explanation of mount m.
func (r *Result) why(m sandbox.Mount) string {
	for _, e := range r.Plan {
		if e.Kind == m.Kind && e.Dest == m.Dest && e.Source == m.Source {
			return e.Why
		}
	}
	return "a mount of the policy"
}

// covers reports whether p is dir or below it.
func covers(dir, p string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}
