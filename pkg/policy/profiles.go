package policy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/nsbox/nsbox/profiles"
)

// DefaultProfile is used when neither --profile nor the config file names
// one.
const DefaultProfile = "workspace"

// maxExtendDepth bounds an extend chain (a cycle is reported before).
const maxExtendDepth = 16

// isProfileName reports whether s names a profile: a letter or digit, then
// at most 63 of letters, digits, _ . - (^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$).
// No slash, so a name never walks out of the profile directory.
func isProfileName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		if !alnum && (i == 0 || c != '_' && c != '.' && c != '-') {
			return false
		}
	}
	return true
}

// isPathRef tells a profile file path from a profile name.
func isPathRef(ref string) bool {
	return strings.Contains(ref, "/") || strings.HasSuffix(ref, ".toml")
}

// Loader finds profiles by name: $XDG_CONFIG_HOME/nsbox/profiles/NAME.toml
// first, then the built-in ones embedded in the binary.
type Loader struct {
	// UserDir holds the user's profiles ("" for none).
	UserDir string
	// Cwd resolves a relative profile path.
	Cwd string
}

// NewLoader returns the loader for h.
func NewLoader(h Host) Loader {
	l := Loader{Cwd: h.Cwd}
	if d := h.ConfigDir(); d != "" {
		l.UserDir = filepath.Join(d, "profiles")
	}
	return l
}

// ProfileInfo describes one available profile.
type ProfileInfo struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Source is the file ("(built-in) NAME.toml" for embedded ones).
	Source string `json:"source"`
	// Overrides is set for a user profile that replaces a built-in one.
	Overrides bool `json:"overrides,omitempty"`
	// Error is set when the profile does not load.
	Error string `json:"error,omitempty"`
}

func builtinName(name string) string { return "(built-in) " + name + ".toml" }

// builtinNames lists the embedded profiles.
func builtinNames() []string {
	ents, _ := fs.ReadDir(profiles.Policies, ".")
	var out []string
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), ".toml"); ok {
			out = append(out, n)
		}
	}
	return out
}

// List returns every profile, user and built-in, sorted by name.
func (ld Loader) List() []ProfileInfo {
	byName := map[string]*ProfileInfo{}
	for _, n := range builtinNames() {
		info := &ProfileInfo{Name: n, Source: builtinName(n)}
		if l, err := ld.loadBuiltin(n); err != nil {
			info.Error = err.Error()
		} else {
			info.Description = l.Config.Description
		}
		byName[n] = info
	}
	if ld.UserDir != "" {
		ents, _ := os.ReadDir(ld.UserDir)
		for _, e := range ents {
			n, ok := strings.CutSuffix(e.Name(), ".toml")
			if !ok || !isProfileName(n) {
				continue
			}
			p := filepath.Join(ld.UserDir, e.Name())
			info := &ProfileInfo{Name: n, Source: p, Overrides: byName[n] != nil}
			if l, err := LoadLayer(p, KindProfile); err != nil {
				info.Error = err.Error()
			} else {
				info.Description = l.Config.Description
			}
			byName[n] = info
		}
	}
	var out []ProfileInfo
	for _, i := range byName {
		out = append(out, *i)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	return out
}

func (ld Loader) loadBuiltin(name string) (*Layer, error) {
	data, err := profiles.Policies.ReadFile(name + ".toml")
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrProfileNotFound, name)
	}
	l, err := ParseLayer(data, builtinName(name), KindProfile)
	if err != nil {
		return nil, err
	}
	l.Profile = name
	return l, nil
}

// find loads the profile called name; skipUser skips the user's directory
// (a user profile that extends its own name means the built-in one).
func (ld Loader) find(name string, skipUser bool) (*Layer, string, error) {
	if !isProfileName(name) {
		return nil, "", fmt.Errorf("%w: %q is not a profile name (letters, digits, - _ .) or a file path", ErrProfileNotFound, name)
	}
	if ld.UserDir != "" && !skipUser {
		p := filepath.Join(ld.UserDir, name+".toml")
		if _, err := os.Stat(p); err == nil {
			l, err := LoadLayer(p, KindProfile)
			if err != nil {
				return nil, "", err
			}
			l.Profile = name
			return l, "user:" + name, nil
		}
	}
	l, err := ld.loadBuiltin(name)
	if err != nil {
		if errors.Is(err, ErrProfileNotFound) {
			where := "built-in profiles"
			if ld.UserDir != "" {
				where = ld.UserDir + " or the built-in profiles"
			}
			return nil, "", fmt.Errorf("%w: no profile %q in %s (nsbox profiles list shows them)", ErrProfileNotFound, name, where)
		}
		return nil, "", err
	}
	return l, "builtin:" + name, nil
}

// loadRef loads a profile by name or path; base resolves a relative path.
func (ld Loader) loadRef(ref, base string, skipUser bool) (*Layer, string, error) {
	if !isPathRef(ref) {
		return ld.find(ref, skipUser)
	}
	p := ref
	if strings.HasPrefix(p, "~/") {
		return nil, "", fmt.Errorf("%w: %q: write the profile path without ~", ErrProfileNotFound, ref)
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(base, p)
	}
	p = filepath.Clean(p)
	l, err := LoadLayer(p, KindProfile)
	if err != nil {
		return nil, "", err
	}
	l.Profile = strings.TrimSuffix(filepath.Base(p), ".toml")
	return l, "file:" + p, nil
}

// Chain loads the profile ref (a name or a file path) and everything it
// extends, base first. A cycle is an *Error wrapping ErrCycle that names
// the file, line and key of the extend that closes it.
func (ld Loader) Chain(ref string) ([]*Layer, error) {
	var chain []*Layer
	var ids []string
	var names []string
	l, id, err := ld.loadRef(ref, ld.Cwd, false)
	if err != nil {
		return nil, wrapNotFound(err, nil, "")
	}
	for {
		chain = append(chain, l)
		ids = append(ids, id)
		names = append(names, l.Profile)
		ext := l.Config.Extend
		if ext == "" {
			break
		}
		if len(chain) >= maxExtendDepth {
			return nil, errorf(l, "extend", nil, "profiles extend each other more than %d deep", maxExtendDepth)
		}
		// A user profile extending its own name builds on the built-in
		// profile it overrides.
		skipUser := strings.HasPrefix(id, "user:") && ext == l.Profile
		base := ld.Cwd
		if strings.HasPrefix(id, "file:") || strings.HasPrefix(id, "user:") {
			base = filepath.Dir(l.Name)
		}
		next, nid, err := ld.loadRef(ext, base, skipUser)
		if err != nil {
			return nil, wrapNotFound(err, l, "extend")
		}
		for _, seen := range ids {
			if seen == nid {
				return nil, errorf(l, "extend", ErrCycle, "cycle: %s -> %s", strings.Join(names, " -> "), next.Profile)
			}
		}
		l, id = next, nid
	}
	// Base first: lower precedence first.
	for i, j := 0, len(chain)-1; i < j; i, j = i+1, j-1 {
		chain[i], chain[j] = chain[j], chain[i]
	}
	return chain, nil
}

func wrapNotFound(err error, from *Layer, key string) error {
	var pe *Error
	if errors.As(err, &pe) {
		return err
	}
	if from == nil {
		return &Error{Msg: err.Error(), Err: err}
	}
	return errorf(from, key, err, "%s", err.Error())
}
