package policy

import (
	"strings"
)

// Config is one layer of policy in its file form: the schema of
// profiles/*.toml and of config.toml (docs/profiles.md). A nil pointer or
// list means "not set in this layer". It is plain data: embedding programs
// may build one in Go instead of TOML.
type Config struct {
	// Description says what a profile is for (profiles only).
	Description string `toml:"description" json:"description,omitempty"`
	// Extend names the profile this one starts from (profiles only).
	Extend string `toml:"extend" json:"extend,omitempty"`

	// Profile is the profile used when --profile is not given (config.toml
	// only).
	Profile string `toml:"profile" json:"profile,omitempty"`
	// BackendFallback lets backend "auto" run commands without a sandbox
	// when none can be built here (config.toml only: a profile cannot
	// switch sandboxing off).
	BackendFallback *bool `toml:"backend_fallback" json:"backend_fallback,omitempty"`

	// Backend is "auto", "required", "native" or "none".
	Backend *string `toml:"backend" json:"backend,omitempty"`
	// Workspace is the host directory of the project ($NSBOX_WORKSPACE);
	// the built-in tools are confined to it.
	Workspace *string `toml:"workspace" json:"workspace,omitempty"`
	// Cwd is the working directory inside the sandbox.
	Cwd *string `toml:"cwd" json:"cwd,omitempty"`
	// Hostname inside.
	Hostname *string `toml:"hostname" json:"hostname,omitempty"`
	// Network is the [network] table (network.go); `network = "host"`
	// is read as its mode.
	Network NetworkConfig `toml:"network" json:"network"`
	// Seccomp is "default", "unconfined" or the path of an OCI seccomp
	// profile (JSON).
	Seccomp *string `toml:"seccomp" json:"seccomp,omitempty"`
	// AllowPrivileged keeps capabilities inside the user namespace.
	AllowPrivileged *bool `toml:"allow_privileged" json:"allow_privileged,omitempty"`
	// AllowUserns lets commands create nested user namespaces.
	AllowUserns *bool `toml:"allow_userns" json:"allow_userns,omitempty"`
	// HostAPIs are the host API methods commands may call: "memory.save",
	// or a pattern "memory.*" expanded against the known methods.
	HostAPIs []string `toml:"host_apis" json:"host_apis,omitempty"`
	// AllowToolRegistration lets programs inside define tools.
	AllowToolRegistration *bool `toml:"allow_tool_registration" json:"allow_tool_registration,omitempty"`

	Filesystem Filesystem `toml:"filesystem" json:"filesystem"`
	Env        Env        `toml:"env" json:"env"`
	Limits     Limits     `toml:"limits" json:"limits"`
	Tools      Tools      `toml:"tools" json:"tools"`
	// UnixSockets is the [unix_sockets] table (sockets.go).
	UnixSockets UnixSockets `toml:"unix_sockets" json:"unix_sockets"`
}

// Filesystem is the [filesystem] table.
type Filesystem struct {
	// HostDirs replaces the read-only host root by just these host
	// directories (bound read-only at the same place). ["/"] means the
	// whole root again.
	HostDirs []string `toml:"host_dirs" json:"host_dirs,omitempty"`
	// RW and RO are binds: "SRC[:DST][?]" or {path, dest, try}.
	RW []PathEntry `toml:"rw" json:"rw,omitempty"`
	RO []PathEntry `toml:"ro" json:"ro,omitempty"`
	// Tmpfs are empty writable directories: "DST" or {path, size}.
	Tmpfs []PathEntry `toml:"tmpfs" json:"tmpfs,omitempty"`
	// Hide are host paths that read as empty: "PATH" (globs allowed).
	Hide []PathEntry `toml:"hide" json:"hide,omitempty"`
	// Protect are host paths that stay read-only inside writable binds,
	// also when they do not exist yet: "PATH" ("PATH/" for a directory).
	Protect []PathEntry `toml:"protect" json:"protect,omitempty"`
	// Shallow are writable directories the nested walks do not search:
	// the hide and protect entries with "**" skip them, and the run's
	// audit looks only at their top level. For a tree too big to walk
	// that git, editors and agents never use (a package cache); "!DIR"
	// drops a lower layer's.
	Shallow []string `toml:"shallow" json:"shallow,omitempty"`
	// Input is bound read-only at /input, Output read-write at /output.
	Input  *string `toml:"input" json:"input,omitempty"`
	Output *string `toml:"output" json:"output,omitempty"`
}

// Env is the [env] table.
type Env struct {
	// Clear (default true) starts from PATH, HOME, TERM and LANG only;
	// false passes the caller's whole environment.
	Clear *bool `toml:"clear" json:"clear,omitempty"`
	// Pass copies these variables from the caller's environment.
	Pass []string `toml:"pass" json:"pass,omitempty"`
	// Set sets variables (values are taken literally).
	Set map[string]string `toml:"set" json:"set,omitempty"`
}

// Limits is the [limits] table. Sizes are strings such as "512M"; times
// are Go durations ("2m") or whole seconds ("120").
type Limits struct {
	Memory  *string  `toml:"memory" json:"memory,omitempty"`
	Pids    *int64   `toml:"pids" json:"pids,omitempty"`
	CPU     *float64 `toml:"cpu" json:"cpu,omitempty"`
	Timeout *string  `toml:"timeout" json:"timeout,omitempty"`
	TmpSize *string  `toml:"tmp_size" json:"tmp_size,omitempty"`
}

// Tools is the [tools] table: bounds of the built-in tools.
type Tools struct {
	BlockedCommands []string `toml:"blocked_commands" json:"blocked_commands,omitempty"`
	Timeout         *string  `toml:"timeout" json:"timeout,omitempty"`
	MaxOutput       *string  `toml:"max_output" json:"max_output,omitempty"`
	MaxResults      *int     `toml:"max_results" json:"max_results,omitempty"`
}

// PathEntry is one entry of a path list. In TOML it is either a string,
// "[!]PATH[:DEST][?]" (a trailing "/" on PATH marks a directory), or an
// inline table {path = "...", dest = "...", try = true, dir = true,
// size = "64M"}.
type PathEntry struct {
	// Path is the host path (for tmpfs: the destination inside).
	Path string `toml:"path" json:"path"`
	// Dest is where a bind appears inside; "" means at Path.
	Dest string `toml:"dest" json:"dest,omitempty"`
	// Try makes a missing path a note instead of an error.
	Try bool `toml:"try" json:"try,omitempty"`
	// Dir says that a protected path that does not exist yet is a
	// directory.
	Dir bool `toml:"dir" json:"dir,omitempty"`
	// File makes a protect pattern match files (and links) only, not
	// directories: a .env is a dotenv file to protect, and a virtualenv
	// made with `python -m venv .env` the project's own (review 59).
	File bool `toml:"file" json:"file,omitempty"`
	// Size bounds a tmpfs ("64M").
	Size string `toml:"size" json:"size,omitempty"`
	// Remove ("!PATH") drops entries for PATH added by lower layers.
	Remove bool `toml:"remove" json:"remove,omitempty"`
}

// UnmarshalText reads the string form of an entry.
func (e *PathEntry) UnmarshalText(b []byte) error {
	*e = ParseEntry(string(b))
	return nil
}

// ParseEntry reads "[!]PATH[:DEST][?]". It never fails; checks come later,
// with the list the entry is in.
func ParseEntry(s string) PathEntry {
	var e PathEntry
	if strings.HasPrefix(s, "!") {
		e.Remove, s = true, s[1:]
	}
	if strings.HasSuffix(s, "?") {
		e.Try, s = true, s[:len(s)-1]
	}
	if src, dst, ok := strings.Cut(s, ":"); ok {
		s, e.Dest = src, dst // "SRC:" means SRC at the same place
	}
	if len(s) > 1 && strings.HasSuffix(s, "/") {
		e.Dir = true
		s = strings.TrimRight(s, "/")
		if s == "" {
			s = "/"
		}
	}
	e.Path = s
	return e
}

// String renders the entry in its string form (when it has one).
func (e PathEntry) String() string {
	s := e.Path
	if e.Dir && s != "/" {
		s += "/"
	}
	if e.Dest != "" {
		s += ":" + e.Dest
	}
	if e.Try {
		s += "?"
	}
	if e.Remove {
		s = "!" + s
	}
	return s
}
