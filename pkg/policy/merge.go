package policy

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// origin is where a merged value came from, for messages.
type origin struct {
	layer *Layer
	key   string
	rank  int // position of the layer in precedence order
}

func (o origin) err(cause error, format string, args ...any) *Error {
	return errorf(o.layer, o.key, cause, format, args...)
}

// errOrNil is o.err for cause, or nil when there is none (a typed nil
// *Error must not become a non-nil error).
func (o origin) errOrNil(cause error) error {
	if cause == nil {
		return nil
	}
	return o.err(cause, "%v", cause)
}

func (o origin) warn(note bool, format string, args ...any) Warning {
	w := Warning{Msg: fmt.Sprintf(format, args...), Note: note}
	if o.layer != nil {
		w.Source, w.Line, w.Key = o.layer.where(o.key)
	}
	return w
}

type sval struct {
	v   string
	set bool
	at  origin
}

type bval struct {
	v   bool
	set bool
	at  origin
}

type entry struct {
	PathEntry
	at origin
	// quiet: a best-effort protection (hostrc.go), whose directory's
	// links past protectLinksInside's bounds are not worth a warning in
	// every run (review 52: a vim plugin six levels deep).
	quiet bool
}

type sentry struct {
	v  string
	at origin
}

// merged is every layer folded into one, each value with its origin.
type merged struct {
	profile                                    sval
	backend                                    sval
	backendFallback                            bval
	workspace, cwd, hostname, network, seccomp sval
	allowPrivileged, allowUserns, allowToolReg bval
	hostDirs                                   []sentry
	hostDirsSet                                bool
	hostDirsAt                                 origin
	rw, ro, tmpfs, hide, protect               []entry
	input, output                              sval
	envClear                                   bval
	envPass, hostAPIs, blocked                 []sentry
	envSet                                     map[string]sval
	memory, timeout, tmpSize                   sval
	pids                                       *int64
	pidsAt                                     origin
	cpu                                        *float64
	cpuAt                                      origin
	toolTimeout, toolMaxOutput                 sval
	toolMaxResults                             *int
	toolMaxResultsAt                           origin
	net                                        mergedNetwork
	unixAllow                                  []sentry
	// lifted are warnings for the built-in hide and protect entries a
	// policy file of the user's removed (liftWarnings).
	lifted []Warning
}

// builtin reports whether l is nsbox's own (the defaults or a built-in
// profile), whose loosenings are documented, not the user's.
func (l *Layer) builtin() bool {
	return l == nil || l.Kind == KindDefaults || strings.HasPrefix(l.Name, "(built-in) ")
}

// liftWarnings warns, at the removing layer l, for each entry of before
// that a built-in layer set and that after no longer holds: a policy file
// lifted a built-in hide or protection ("!~/.ssh", "!$NSBOX_RW/.git/").
// Loosening is a visible choice, from every layer (review 19); flags are
// the command line the user typed, and warn where they are read.
func (m *merged) liftWarnings(before, after []entry, l *Layer, key, what string) {
	if l == nil || l.builtin() || l.Kind == KindFlags {
		return
	}
	kept := map[entry]bool{}
	for _, e := range after {
		kept[e] = true
	}
	for _, e := range before {
		if !kept[e] && e.at.layer.builtin() {
			m.lifted = append(m.lifted, origin{l, key, 0}.warn(false, "lifts the built-in %s of %s", what, e.Path))
		}
	}
}

func setS(dst *sval, v *string, l *Layer, key string, rank int) {
	if v != nil {
		*dst = sval{v: *v, set: true, at: origin{l, key, rank}}
	}
}

func setB(dst *bval, v *bool, l *Layer, key string, rank int) {
	if v != nil {
		*dst = bval{v: *v, set: true, at: origin{l, key, rank}}
	}
}

// addEntries appends a layer's list; "!PATH" removes what lower layers
// added for PATH (compared as written, before expansion).
func addEntries(dst []entry, src []PathEntry, l *Layer, key string, rank int) []entry {
	for i, e := range src {
		if e.Remove {
			out := dst[:0]
			for _, d := range dst {
				if d.Path != e.Path {
					out = append(out, d)
				}
			}
			dst = out
			continue
		}
		dst = append(dst, entry{PathEntry: e, at: origin{l, indexKey(key, i), rank}})
	}
	return dst
}

func addStrings(dst []sentry, src []string, l *Layer, key string, rank int) []sentry {
	for i, s := range src {
		if len(s) > 0 && s[0] == '!' {
			out := dst[:0]
			for _, d := range dst {
				if d.v != s[1:] {
					out = append(out, d)
				}
			}
			dst = out
			continue
		}
		dst = append(dst, sentry{v: s, at: origin{l, indexKey(key, i), rank}})
	}
	return dst
}

// indexKey is key's i-th element, "filesystem.protect[3]".
func indexKey(key string, i int) string { return key + "[" + strconv.Itoa(i) + "]" }

// removeEntries applies only the "!PATH" entries of src to dst.
func removeEntries(dst []entry, src []PathEntry) []entry {
	var rm []PathEntry
	for _, e := range src {
		if e.Remove {
			rm = append(rm, e)
		}
	}
	return addEntries(dst, rm, nil, "", 0)
}

// removeStrings applies only the "!S" entries of src to dst.
func removeStrings(dst []sentry, src []string) []sentry {
	var rm []string
	for _, s := range src {
		if len(s) > 0 && s[0] == '!' {
			rm = append(rm, s)
		}
	}
	return addStrings(dst, rm, nil, "", 0)
}

// configRemovals applies the "!" entries of the config file again, after
// the profile chain: the config ranks below the profile, yet removing a
// profile's list entry ("!~/.ssh", "!$NSBOX_WORKSPACE/**/.env*") is what
// such an entry in the user's own config is for. Flags come after and may
// add the entry back.
func (m *merged) configRemovals(l *Layer) {
	c := &l.Config
	fs := &c.Filesystem
	m.rw = removeEntries(m.rw, fs.RW)
	m.ro = removeEntries(m.ro, fs.RO)
	m.tmpfs = removeEntries(m.tmpfs, fs.Tmpfs)
	hide, protect := slices.Clone(m.hide), slices.Clone(m.protect)
	m.hide = removeEntries(m.hide, fs.Hide)
	m.protect = removeEntries(m.protect, fs.Protect)
	m.liftWarnings(hide, m.hide, l, "filesystem.hide", "hide")
	m.liftWarnings(protect, m.protect, l, "filesystem.protect", "protection")
	m.hostAPIs = removeStrings(m.hostAPIs, c.HostAPIs)
	m.unixAllow = removeStrings(m.unixAllow, c.UnixSockets.Allow)
	m.envPass = removeStrings(m.envPass, c.Env.Pass)
	m.blocked = removeStrings(m.blocked, c.Tools.BlockedCommands)
}

// merge folds layers, lowest precedence first.
func merge(layers []*Layer) *merged {
	m := &merged{envSet: map[string]sval{}}
	removed := false
	removals := func() {
		if removed {
			return
		}
		removed = true
		for _, l := range layers {
			if l.Kind == KindConfig {
				m.configRemovals(l)
			}
		}
	}
	for rank, l := range layers {
		if l.Kind == KindFlags {
			removals()
		}
		c := &l.Config
		if c.Profile != "" {
			m.profile = sval{v: c.Profile, set: true, at: origin{l, "profile", rank}}
		}
		setS(&m.backend, c.Backend, l, "backend", rank)
		setB(&m.backendFallback, c.BackendFallback, l, "backend_fallback", rank)
		setS(&m.workspace, c.Workspace, l, "workspace", rank)
		setS(&m.cwd, c.Cwd, l, "cwd", rank)
		setS(&m.hostname, c.Hostname, l, "hostname", rank)
		m.mergeNetwork(&c.Network, l, rank)
		setS(&m.seccomp, c.Seccomp, l, "seccomp", rank)
		setB(&m.allowPrivileged, c.AllowPrivileged, l, "allow_privileged", rank)
		setB(&m.allowUserns, c.AllowUserns, l, "allow_userns", rank)
		setB(&m.allowToolReg, c.AllowToolRegistration, l, "allow_tool_registration", rank)
		m.hostAPIs = addStrings(m.hostAPIs, c.HostAPIs, l, "host_apis", rank)
		m.unixAllow = addStrings(m.unixAllow, c.UnixSockets.Allow, l, "unix_sockets.allow", rank)

		fs := &c.Filesystem
		if fs.HostDirs != nil {
			// A scalar: the highest layer's list replaces the others.
			m.hostDirs = addStrings(nil, fs.HostDirs, l, "filesystem.host_dirs", rank)
			m.hostDirsSet, m.hostDirsAt = true, origin{l, "filesystem.host_dirs", rank}
		}
		m.rw = addEntries(m.rw, fs.RW, l, "filesystem.rw", rank)
		m.ro = addEntries(m.ro, fs.RO, l, "filesystem.ro", rank)
		m.tmpfs = addEntries(m.tmpfs, fs.Tmpfs, l, "filesystem.tmpfs", rank)
		hide, protect := slices.Clone(m.hide), slices.Clone(m.protect)
		m.hide = addEntries(m.hide, fs.Hide, l, "filesystem.hide", rank)
		m.protect = addEntries(m.protect, fs.Protect, l, "filesystem.protect", rank)
		m.liftWarnings(hide, m.hide, l, "filesystem.hide", "hide")
		m.liftWarnings(protect, m.protect, l, "filesystem.protect", "protection")
		setS(&m.input, fs.Input, l, "filesystem.input", rank)
		setS(&m.output, fs.Output, l, "filesystem.output", rank)

		setB(&m.envClear, c.Env.Clear, l, "env.clear", rank)
		m.envPass = addStrings(m.envPass, c.Env.Pass, l, "env.pass", rank)
		keys := make([]string, 0, len(c.Env.Set))
		for k := range c.Env.Set {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			m.envSet[k] = sval{v: c.Env.Set[k], set: true, at: origin{l, "env.set." + k, rank}}
		}

		lim := &c.Limits
		setS(&m.memory, lim.Memory, l, "limits.memory", rank)
		setS(&m.timeout, lim.Timeout, l, "limits.timeout", rank)
		setS(&m.tmpSize, lim.TmpSize, l, "limits.tmp_size", rank)
		if lim.Pids != nil {
			m.pids, m.pidsAt = lim.Pids, origin{l, "limits.pids", rank}
		}
		if lim.CPU != nil {
			m.cpu, m.cpuAt = lim.CPU, origin{l, "limits.cpu", rank}
		}
		t := &c.Tools
		m.blocked = addStrings(m.blocked, t.BlockedCommands, l, "tools.blocked_commands", rank)
		setS(&m.toolTimeout, t.Timeout, l, "tools.timeout", rank)
		setS(&m.toolMaxOutput, t.MaxOutput, l, "tools.max_output", rank)
		if t.MaxResults != nil {
			m.toolMaxResults, m.toolMaxResultsAt = t.MaxResults, origin{l, "tools.max_results", rank}
		}
	}
	removals()
	return m
}
