package policy

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Host is what a policy is resolved against: the caller's directories and
// environment. HostFromEnv fills it from the running process.
type Host struct {
	// Cwd is the caller's working directory ($CWD), absolute.
	Cwd string
	// Home is $HOME, or the user database's home directory when $HOME is
	// unset ("" when neither is known).
	Home string
	// TmpDir is $TMPDIR (default /tmp).
	TmpDir string
	// RuntimeDir is $XDG_RUNTIME_DIR ("" when unset).
	RuntimeDir string
	// ConfigHome is $XDG_CONFIG_HOME (default ~/.config).
	ConfigHome string
	// DataHome is $XDG_DATA_HOME (default ~/.local/share).
	DataHome string
	// LookupEnv reads the caller's environment (env.pass); nil: none.
	LookupEnv func(string) (string, bool)
	// Environ is the caller's whole environment (env.clear = false).
	Environ func() []string
	// SessionsDir is the directory of the user's nsbox sessions' sockets
	// ($NSBOX_SESSIONS; "" when unknown): hidden and read-only in every
	// sandbox, as the data directory is, and with it OtherSessionsDirs,
	// where sessions started from another environment keep theirs.
	SessionsDir       string
	OtherSessionsDirs []string
	// KnownHostAPIs are the "api.method" names host API patterns such as
	// "memory.*" expand to.
	KnownHostAPIs []string
	// UserHome is the user database's home directory of the effective
	// uid, whatever $HOME says ("" when unknown): the default config
	// directory below it is trusted, and protected, in every run.
	UserHome string
}

// HostFromEnv describes the running process.
func HostFromEnv() (Host, error) {
	wd, err := os.Getwd()
	if err != nil {
		return Host{}, fmt.Errorf("cannot read the current directory: %w", err)
	}
	h := Host{
		Cwd:        wd,
		Home:       homeDir(),
		TmpDir:     os.Getenv("TMPDIR"),
		RuntimeDir: os.Getenv("XDG_RUNTIME_DIR"),
		ConfigHome: os.Getenv("XDG_CONFIG_HOME"),
		DataHome:   os.Getenv("XDG_DATA_HOME"),
		LookupEnv:  os.LookupEnv,
		Environ:    os.Environ,
	}
	if u, err := user.LookupId(strconv.Itoa(os.Geteuid())); err == nil && filepath.IsAbs(u.HomeDir) {
		h.UserHome = u.HomeDir
	}
	return h.withDefaults(), nil
}

// homeDir is $HOME, or, when it is unset or not absolute (env -i, some
// service managers), the home directory of the user database entry of the
// effective uid: the credentials hidden and the startup files protected
// under "~" must not silently disappear with the variable, nor the home
// directory become the workspace unnoticed.
func homeDir() string {
	if h := os.Getenv("HOME"); filepath.IsAbs(h) {
		return h
	}
	if u, err := user.LookupId(strconv.Itoa(os.Geteuid())); err == nil && filepath.IsAbs(u.HomeDir) {
		return u.HomeDir
	}
	return ""
}

func (h Host) withDefaults() Host {
	if h.TmpDir == "" {
		h.TmpDir = "/tmp"
	}
	// XDG base directories must be absolute; a relative value is ignored
	// (XDG Base Directory Specification).
	if !filepath.IsAbs(h.ConfigHome) {
		h.ConfigHome = ""
		if h.Home != "" {
			h.ConfigHome = filepath.Join(h.Home, ".config")
		}
	}
	if !filepath.IsAbs(h.DataHome) {
		h.DataHome = ""
		if h.Home != "" {
			h.DataHome = filepath.Join(h.Home, ".local", "share")
		}
	}
	if h.RuntimeDir != "" && !filepath.IsAbs(h.RuntimeDir) {
		h.RuntimeDir = ""
	}
	if h.LookupEnv == nil {
		h.LookupEnv = func(string) (string, bool) { return "", false }
	}
	if h.Environ == nil {
		h.Environ = func() []string { return nil }
	}
	return h
}

// ConfigDir is nsbox's own configuration directory
// ($XDG_CONFIG_HOME/nsbox), "" when neither it nor $HOME is known.
func (h Host) ConfigDir() string {
	if h.ConfigHome == "" {
		return ""
	}
	return filepath.Join(h.ConfigHome, "nsbox")
}

// DataDir is nsbox's data directory ($XDG_DATA_HOME/nsbox), where the host
// APIs keep their stores; "" when unknown.
func (h Host) DataDir() string {
	if h.DataHome == "" {
		return ""
	}
	return filepath.Join(h.DataHome, "nsbox")
}

// Variables are the names a path may use.
var Variables = []string{"CWD", "HOME", "TMPDIR", "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "NSBOX_WORKSPACE", "NSBOX_RW", "NSBOX_CONFIG", "NSBOX_DATA", "NSBOX_SESSIONS"}

// vars are the values of Variables for one resolution ("" = unset).
type vars map[string]string

func (h Host) vars(workspace string) vars {
	return vars{
		"CWD":             h.Cwd,
		"HOME":            h.Home,
		"TMPDIR":          h.TmpDir,
		"XDG_RUNTIME_DIR": h.RuntimeDir,
		"XDG_CONFIG_HOME": h.ConfigHome,
		"NSBOX_WORKSPACE": workspace,
		"XDG_DATA_HOME":   h.DataHome,
		"NSBOX_CONFIG":    h.ConfigDir(),
		"NSBOX_DATA":      h.DataDir(),
		"NSBOX_SESSIONS":  h.SessionsDir,
	}
}

// ExpandPath expands the variables of a path nsbox itself opens (--audit,
// --data-dir, --json-status) as the policy's paths are expanded, and makes
// it absolute against h.Cwd. The file nsbox opens and the entry that
// protects it inside must be one path, expanded in one place (found by
// review: "--audit $HOME/audit.log", given without a shell, was protected
// at the home directory's audit.log and written at ./$HOME/audit.log,
// which a sandbox had made in the workspace). A variable nsbox does not
// know, or one unset here, is an error naming it (ErrUnknownVariable).
// The result goes into an entry through LiteralPath.
func (h Host) ExpandPath(s string) (string, error) {
	h = h.withDefaults()
	v, err := expand(s, h.vars(""))
	var skip *errSkip
	switch {
	case errors.As(err, &skip) && skip.unknown:
		return "", fmt.Errorf("%w: $%s is not a variable nsbox knows (known: $%s); write $$ for a literal $", ErrUnknownVariable, skip.name, strings.Join(sortedVars(), ", $"))
	case errors.As(err, &skip):
		return "", fmt.Errorf("%w: $%s is not set here", ErrUnknownVariable, skip.name)
	case err != nil:
		return "", err
	}
	if !filepath.IsAbs(v) {
		v = filepath.Join(h.Cwd, v)
	}
	return filepath.Clean(v), nil
}

// LiteralPath is the hide or protect entry for p, a path already expanded
// (ExpandPath): its "$" are written "$$", so that the entry names p itself
// and not what its "$" would expand to.
func LiteralPath(p string) string { return strings.ReplaceAll(p, "$", "$$") }

// errSkip is an entry to leave out: it uses a variable with no value.
type errSkip struct {
	name    string
	unknown bool // not a variable nsbox knows (vs. known but unset)
}

func (e *errSkip) Error() string {
	if e.unknown {
		return fmt.Sprintf("unknown variable $%s (known: $%s)", e.name, strings.Join(sortedVars(), ", $"))
	}
	return fmt.Sprintf("$%s is not set; entry skipped", e.name)
}

func sortedVars() []string {
	v := append([]string(nil), Variables...)
	sort.Strings(v)
	return v
}

// errBadVar is malformed variable syntax: an error, not a warning.
var errBadVar = errors.New("bad variable")

func isVarStart(c byte) bool {
	return c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z'
}

func isVarChar(c byte) bool { return isVarStart(c) || c >= '0' && c <= '9' }

// checkVars reports malformed variable syntax without expanding anything.
func checkVars(s string) error {
	_, err := expand(s, nil)
	var skip *errSkip
	if errors.As(err, &skip) {
		return nil
	}
	return err
}

// expand replaces ~, $NAME and ${NAME} in s; "$$" is a literal "$". A
// variable that is unknown or unset is an *errSkip (expandAt makes an
// unknown one an error and leaves an entry with an unset one out);
// malformed syntax wraps errBadVar. With v == nil it only
// checks the syntax.
func expand(s string, v vars) (string, error) {
	var b strings.Builder
	var skip *errSkip
	lookup := func(name string) {
		if v == nil {
			return
		}
		known := false
		for _, k := range Variables {
			known = known || k == name
		}
		val := v[name]
		if !known || val == "" {
			if skip == nil {
				skip = &errSkip{name: name, unknown: !known}
			}
			return
		}
		b.WriteString(val)
	}
	if s == "~" || strings.HasPrefix(s, "~/") {
		lookup("HOME")
		s = s[1:]
	} else if strings.HasPrefix(s, "~") {
		return "", fmt.Errorf("%w: %q: only ~ and ~/ are supported (not ~user)", errBadVar, s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '$' {
			b.WriteByte(c)
			continue
		}
		switch {
		case i+1 < len(s) && s[i+1] == '$':
			b.WriteByte('$')
			i++
		case i+1 < len(s) && s[i+1] == '{':
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return "", fmt.Errorf("%w: %q: ${ without a closing }", errBadVar, s)
			}
			name := s[i+2 : i+2+end]
			if name == "" || !isVarStart(name[0]) || strings.IndexFunc(name, func(r rune) bool { return r > 127 || !isVarChar(byte(r)) }) >= 0 {
				return "", fmt.Errorf("%w: %q: ${%s} is not a variable name", errBadVar, s, name)
			}
			lookup(name)
			i += 2 + end
		case i+1 < len(s) && isVarStart(s[i+1]):
			j := i + 1
			for j < len(s) && isVarChar(s[j]) {
				j++
			}
			lookup(s[i+1 : j])
			i = j - 1
		default:
			return "", fmt.Errorf("%w: %q: a lone $ (write $$ for a literal $)", errBadVar, s)
		}
	}
	if skip != nil {
		return "", skip
	}
	return b.String(), nil
}
