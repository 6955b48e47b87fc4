package landlock

import (
	"errors"
	"fmt"
	"os"
	"path"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// Grant gives Access to a path and everything beneath it, as a bind mount
// of a policy does; a later Grant of the same path replaces an earlier one,
// and a Grant beneath another one decides for its own subtree, wider or
// narrower (0 hides it).
type Grant struct {
	Path   string
	Access AccessFS
}

// Expansion is a list of grants turned into Landlock rules, and what of the
// grants Landlock could not express exactly.
type Expansion struct {
	Rules []PathRule
	// Frozen are directories whose own entries can no longer be created,
	// removed or renamed although their grant allowed it: each holds (or
	// leads to) a narrower grant.
	Frozen []string
	// Listable are narrower grants whose entry names stay listable
	// (read_dir) because a directory above them is readable.
	Listable []string
}

// MaxRules bounds the rules of one Expansion: a directory split into its
// entries costs one rule per entry.
const MaxRules = 20000

// ErrTooManyRules: the grants split directories with too many entries.
var ErrTooManyRules = errors.New("landlock: too many rules")

type node struct {
	children map[string]*node
	explicit bool
	access   AccessFS
}

// Expand turns grants into path rules. Landlock rights are a union along a
// path: a rule on a directory grants its rights to everything beneath it,
// and nothing beneath can take them away. So a grant narrower than one
// above it (a hidden ~/.ssh under a readable /, a protected .git under a
// writable workspace) is expressed by not granting the directories on the
// way to it, keeping only read_dir on them (so that they can still be
// listed), and granting each of their other entries, as found on disk now,
// the wider rights instead. What that costs is reported in Frozen and
// Listable; an entry created in such a directory later gets read_dir only.
// Symlinks found on the way are not granted: access through one is decided
// at its target.
func Expand(grants []Grant) (Expansion, error) {
	root := &node{children: map[string]*node{}}
	for _, g := range grants {
		p := path.Clean(g.Path)
		if !path.IsAbs(p) {
			return Expansion{}, fmt.Errorf("landlock: grant path %q is not absolute", g.Path)
		}
		n := root
		for _, c := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
			if c == "" {
				continue
			}
			ch := n.children[c]
			if ch == nil {
				ch = &node{children: map[string]*node{}}
				n.children[c] = ch
			}
			n = ch
		}
		n.explicit, n.access = true, g.Access
	}
	var e Expansion
	err := e.emit(root, "/", 0, 0)
	return e, err
}

// narrower reports whether a grant beneath n takes away any of eff.
func narrower(n *node, eff AccessFS) bool {
	for _, c := range n.children {
		if c.explicit && eff&^c.access != 0 {
			return true
		}
		ce := eff
		if c.explicit {
			ce = c.access
		}
		if narrower(c, ce) {
			return true
		}
	}
	return false
}

func (e *Expansion) add(p string, a AccessFS) error {
	if len(e.Rules) >= MaxRules {
		return fmt.Errorf("%w: more than %d (a directory on the way to a hidden or protected path has too many entries)", ErrTooManyRules, MaxRules)
	}
	e.Rules = append(e.Rules, PathRule{Path: p, Access: a})
	return nil
}

// emit writes the rules of n (at p) whose inherited grant is eff, given
// that rules above already grant covered.
func (e *Expansion) emit(n *node, p string, eff, covered AccessFS) error {
	if n.explicit {
		eff = n.access
	}
	names := sortedKeys(n.children)
	if !narrower(n, eff) {
		if eff&^covered != 0 {
			if err := e.add(p, eff); err != nil {
				return err
			}
			covered |= eff
		}
		for _, name := range names {
			if err := e.emit(n.children[name], path.Join(p, name), eff, covered); err != nil {
				return err
			}
		}
		return nil
	}
	// Split: this directory keeps only read_dir; its entries that lead to
	// no grant get eff each.
	if eff&ReadDir != 0 && covered&ReadDir == 0 {
		if err := e.add(p, ReadDir); err != nil {
			return err
		}
		covered |= ReadDir
	}
	if eff&^(ReadDir|ReadFile|Execute) != 0 {
		e.Frozen = append(e.Frozen, p)
	}
	if covered&ReadDir != 0 {
		for _, name := range names {
			if c := n.children[name]; c.explicit && c.access&ReadDir == 0 {
				e.Listable = append(e.Listable, path.Join(p, name))
			}
		}
	}
	if eff != 0 {
		entries, err := readDirNoFollow(p)
		if err != nil && !errors.Is(err, unix.ENOENT) {
			return &PathError{Path: p, Err: err}
		}
		for _, ent := range entries {
			if _, onWay := n.children[ent.name]; onWay || ent.symlink {
				continue
			}
			if err := e.add(path.Join(p, ent.name), eff); err != nil {
				return err
			}
		}
	}
	for _, name := range names {
		if err := e.emit(n.children[name], path.Join(p, name), eff, covered); err != nil {
			return err
		}
	}
	return nil
}

type dirent struct {
	name    string
	symlink bool
}

// readDirNoFollow lists a directory opened without following symlinks.
func readDirNoFollow(p string) ([]dirent, error) {
	fd, err := unix.Openat2(unix.AT_FDCWD, p, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		if errors.Is(err, unix.ENOTDIR) {
			return nil, nil
		}
		return nil, err
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	list, err := f.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	out := make([]dirent, 0, len(list))
	for _, d := range list {
		out = append(out, dirent{name: d.Name(), symlink: d.Type()&os.ModeSymlink != 0})
	}
	return out, nil
}

func sortedKeys(m map[string]*node) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
