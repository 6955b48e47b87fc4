package policy

import (
	"errors"
	"fmt"
	"math"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nsbox/nsbox/pkg/cgroups"
	"github.com/nsbox/nsbox/pkg/sandbox"
)

// check is one validation of a single layer, run before any layer is
// merged, so that every error names the layer's own file, line and key.
type check struct {
	name string
	fn   func(l *Layer) error
}

// layerChecks run in order on every layer; the first error stops.
var layerChecks = []check{
	{"keys allowed in this kind of file", checkKinds},
	{"choices", checkChoices},
	{"limits", checkLimits},
	{"tools", checkTools},
	{"environment", checkEnv},
	{"host APIs", checkHostAPIs},
	{"network", checkNetwork},
	{"paths", checkPaths},
}

// CheckLayer runs every check on l.
func CheckLayer(l *Layer) error {
	for _, c := range layerChecks {
		if err := c.fn(l); err != nil {
			return err
		}
	}
	return nil
}

func checkKinds(l *Layer) error {
	c := &l.Config
	if l.Kind != KindConfig && l.Kind != KindDefaults {
		if c.Profile != "" {
			return errorf(l, "profile", nil, "only allowed in config.toml (a profile cannot choose another profile; use extend)")
		}
		if c.BackendFallback != nil {
			return errorf(l, "backend_fallback", nil, "only allowed in config.toml: a profile cannot allow running without a sandbox")
		}
		// Invariant: no profile switches sandboxing off. A profile may lie
		// in a directory an earlier sandbox could write; "none" comes
		// only from the user's own config.toml or the command line.
		if c.Backend != nil && *c.Backend == BackendNone && l.Kind != KindFlags {
			return errorf(l, "backend", nil, "\"none\" is only allowed in config.toml or as --backend none: a profile cannot run commands without a sandbox")
		}
	}
	if l.Kind != KindProfile && c.Extend != "" {
		return errorf(l, "extend", nil, "only allowed in a profile")
	}
	if c.Profile != "" && !isPathRef(c.Profile) && !isProfileName(c.Profile) {
		return errorf(l, "profile", nil, "%q is not a profile name or a file path", c.Profile)
	}
	if c.Extend != "" && !isPathRef(c.Extend) && !isProfileName(c.Extend) {
		return errorf(l, "extend", nil, "%q is not a profile name or a file path", c.Extend)
	}
	return nil
}

// Backend modes.
const (
	BackendAuto     = "auto"
	BackendRequired = "required"
	BackendNative   = "native"
	BackendLandlock = "landlock"
	BackendNone     = "none"
)

func checkChoices(l *Layer) error {
	c := &l.Config
	if c.Network.Mode != nil {
		switch *c.Network.Mode {
		case string(sandbox.NetworkNone), string(sandbox.NetworkHost), string(sandbox.NetworkFiltered):
		default:
			return errorf(l, l.networkModeKey(), nil, "%q: want none or host, or filtered (with network.allow)", *c.Network.Mode)
		}
	}
	if c.Backend != nil {
		switch *c.Backend {
		case BackendAuto, BackendRequired, BackendNative, BackendLandlock, BackendNone:
		default:
			return errorf(l, "backend", nil, "%q: want auto, required, native, landlock or none", *c.Backend)
		}
	}
	if c.Hostname != nil {
		h := *c.Hostname
		if h == "" || len(h) > 64 || strings.ContainsAny(h, "/\x00 \t\n") {
			return errorf(l, "hostname", nil, "%q is not a hostname (1 to 64 characters, no spaces or /)", h)
		}
	}
	if c.Seccomp != nil {
		s := *c.Seccomp
		switch {
		case s == "default" || s == "unconfined":
		case s == "":
			return errorf(l, "seccomp", nil, "empty: want default, unconfined or the path of a seccomp profile (JSON)")
		case strings.ContainsRune(s, 0):
			return errorf(l, "seccomp", nil, "path contains a NUL byte")
		case !strings.ContainsAny(s, "/$~") && !strings.HasSuffix(s, ".json"):
			return errorf(l, "seccomp", nil, "%q: want default, unconfined or the path of a seccomp profile (JSON; a path with a / or ending in .json)", s)
		default:
			if err := checkVars(s); err != nil {
				return errorf(l, "seccomp", err, "%v", err)
			}
		}
	}
	return nil
}

// ParseDuration reads a time limit: a Go duration ("90s", "2m", "1h30m")
// or whole seconds ("120"). It must be positive.
func ParseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("empty duration: use seconds (120) or a duration such as 30s, 2m, 1h")
	}
	if n, err := strconv.ParseInt(t, 10, 64); err == nil {
		if n <= 0 {
			return 0, fmt.Errorf("duration %q must be positive (leave it out for no limit)", s)
		}
		if n > math.MaxInt64/int64(time.Second) {
			return 0, fmt.Errorf("duration %q is too large", s)
		}
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q: use seconds (120) or a duration such as 30s, 2m, 1h", s)
	}
	if d <= 0 {
		return 0, fmt.Errorf("duration %q must be positive (leave it out for no limit)", s)
	}
	return d, nil
}

// ParseSize reads a size ("512M", "1G", bytes); see cgroups.ParseSize.
func ParseSize(s string) (int64, error) { return cgroups.ParseSize(s) }

func checkLimits(l *Layer) error {
	lim := &l.Config.Limits
	if lim.Memory != nil {
		n, err := ParseSize(*lim.Memory)
		if err != nil {
			return errorf(l, "limits.memory", err, "%v", err)
		}
		if n < sandbox.MinMemory {
			return errorf(l, "limits.memory", cgroups.ErrInvalidLimit, "%s is below %d MiB, the least the sandbox itself needs (its PID 1 counts against the limit)", *lim.Memory, sandbox.MinMemory>>20)
		}
	}
	if lim.Pids != nil {
		switch n := *lim.Pids; {
		case n <= 0:
			return errorf(l, "limits.pids", cgroups.ErrInvalidLimit, "%d: must be a positive number of processes (leave it out for no limit)", n)
		case n < sandbox.MinPids:
			return errorf(l, "limits.pids", cgroups.ErrInvalidLimit, "%d is below %d, the least the sandbox itself needs (its PID 1's threads count too)", n, sandbox.MinPids)
		case n > math.MaxInt32:
			return errorf(l, "limits.pids", cgroups.ErrInvalidLimit, "%d is larger than any kernel accepts", n)
		}
	}
	if lim.CPU != nil {
		v := *lim.CPU
		if v <= 0 || math.IsNaN(v) {
			return errorf(l, "limits.cpu", cgroups.ErrInvalidLimit, "%v: must be a positive number of CPUs such as 0.5 or 2 (leave it out for no limit)", v)
		}
		if err := (cgroups.Limits{CPU: v}).Validate(); err != nil {
			var le *cgroups.LimitError
			if errors.As(err, &le) {
				return errorf(l, "limits.cpu", err, "%s %s", le.Value, le.Msg)
			}
			return errorf(l, "limits.cpu", err, "%v", err)
		}
	}
	if lim.Timeout != nil {
		if _, err := ParseDuration(*lim.Timeout); err != nil {
			return errorf(l, "limits.timeout", err, "%v", err)
		}
	}
	if lim.TmpSize != nil {
		if _, err := ParseSize(*lim.TmpSize); err != nil {
			return errorf(l, "limits.tmp_size", err, "%v", err)
		}
	}
	return nil
}

func checkTools(l *Layer) error {
	t := &l.Config.Tools
	for i, c := range t.BlockedCommands {
		k := fmt.Sprintf("tools.blocked_commands[%d]", i)
		if strings.TrimPrefix(c, "!") == "" || strings.ContainsRune(c, 0) {
			return errorf(l, k, nil, "%q is not a command name", c)
		}
	}
	if t.Timeout != nil {
		if _, err := ParseDuration(*t.Timeout); err != nil {
			return errorf(l, "tools.timeout", err, "%v", err)
		}
	}
	if t.MaxOutput != nil {
		if _, err := ParseSize(*t.MaxOutput); err != nil {
			return errorf(l, "tools.max_output", err, "%v", err)
		}
	}
	if t.MaxResults != nil && (*t.MaxResults <= 0 || *t.MaxResults > 100000) {
		return errorf(l, "tools.max_results", nil, "%d: want 1 to 100000", *t.MaxResults)
	}
	return nil
}

var envNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })

func checkEnv(l *Layer) error {
	e := &l.Config.Env
	for i, n := range e.Pass {
		if !envNameRE().MatchString(strings.TrimPrefix(n, "!")) {
			return errorf(l, fmt.Sprintf("env.pass[%d]", i), nil, "%q is not a variable name", n)
		}
	}
	for k, v := range e.Set {
		if !envNameRE().MatchString(k) {
			return errorf(l, "env.set."+k, nil, "%q is not a variable name", k)
		}
		if strings.ContainsRune(v, 0) {
			return errorf(l, "env.set."+k, nil, "value contains a NUL byte")
		}
	}
	return nil
}

var hostAPIRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]*\.([A-Za-z][A-Za-z0-9_-]*|\*)$`)
})

func checkHostAPIs(l *Layer) error {
	for i, m := range l.Config.HostAPIs {
		if !hostAPIRE().MatchString(strings.TrimPrefix(m, "!")) {
			return errorf(l, fmt.Sprintf("host_apis[%d]", i), nil, "%q is not api.method or api.* (e.g. memory.save, memory.*)", m)
		}
	}
	return nil
}

// reservedDest are destinations nsbox itself owns.
var reservedDest = map[string]bool{"/": true, "/proc": true, "/dev": true}

func checkPaths(l *Layer) error {
	c := &l.Config
	single := []struct {
		key string
		v   *string
	}{{"workspace", c.Workspace}, {"cwd", c.Cwd}, {"filesystem.input", c.Filesystem.Input}, {"filesystem.output", c.Filesystem.Output}}
	for _, s := range single {
		if s.v == nil {
			continue
		}
		if err := checkPathString(*s.v, s.key == "workspace"); err != nil {
			return errorf(l, s.key, err, "%v", err)
		}
	}
	for i, d := range c.Filesystem.HostDirs {
		if err := checkPathString(d, false); err != nil {
			return errorf(l, fmt.Sprintf("filesystem.host_dirs[%d]", i), err, "%v", err)
		}
	}
	lists := []struct {
		key     string
		entries []PathEntry
	}{
		{"filesystem.rw", c.Filesystem.RW}, {"filesystem.ro", c.Filesystem.RO},
		{"filesystem.tmpfs", c.Filesystem.Tmpfs}, {"filesystem.hide", c.Filesystem.Hide},
		{"filesystem.protect", c.Filesystem.Protect},
	}
	for _, li := range lists {
		for i, e := range li.entries {
			k := fmt.Sprintf("%s[%d]", li.key, i)
			if err := checkEntry(li.key, e); err != nil {
				return errorf(l, k, err, "%v", err)
			}
		}
	}
	return nil
}

func checkPathString(s string, allowEmpty bool) error {
	switch {
	case s == "" && allowEmpty:
		return nil
	case s == "":
		return errors.New("empty path")
	case strings.ContainsRune(s, 0):
		return errors.New("path contains a NUL byte")
	}
	return checkVars(s)
}

func checkEntry(list string, e PathEntry) error {
	if err := checkPathString(e.Path, false); err != nil {
		return err
	}
	if e.Remove {
		return nil
	}
	name := strings.TrimPrefix(list, "filesystem.")
	if e.Size != "" && name != "tmpfs" {
		return fmt.Errorf("size is only for tmpfs entries")
	}
	switch name {
	case "rw", "ro":
		if e.Dest != "" {
			if strings.ContainsRune(e.Dest, 0) {
				return errors.New("destination contains a NUL byte")
			}
			if err := checkVars(e.Dest); err != nil {
				return err
			}
			if !strings.HasPrefix(e.Dest, "$") && !path.IsAbs(e.Dest) {
				return fmt.Errorf("destination %q must be an absolute path", e.Dest)
			}
			if reservedDest[path.Clean(e.Dest)] {
				return fmt.Errorf("destination %s is managed by nsbox and cannot be replaced", e.Dest)
			}
		}
	case "tmpfs":
		if e.Dest != "" {
			return fmt.Errorf("a tmpfs entry is just its destination (no SRC:DST)")
		}
		if !strings.HasPrefix(e.Path, "$") && !path.IsAbs(e.Path) {
			return fmt.Errorf("%q must be an absolute path", e.Path)
		}
		if reservedDest[path.Clean(e.Path)] {
			return fmt.Errorf("%s is managed by nsbox and cannot be replaced", e.Path)
		}
		if e.Size != "" {
			if _, err := ParseSize(e.Size); err != nil {
				return err
			}
		}
	case "hide", "protect":
		if e.Dest != "" {
			return fmt.Errorf("%s entries take no destination (use the table form {path = ...} for a path with a colon)", name)
		}
	}
	return nil
}
