package sandbox

import (
	"fmt"
	"os"
	"path"
	"strings"
	"time"

	"github.com/nsbox/nsbox/pkg/cgroups"
	"github.com/nsbox/nsbox/pkg/mounts"
)

// Mount is one filesystem entry of a policy (a bind, tmpfs, hidden or
// protected path), applied in order on top of the read-only host root.
type Mount = mounts.Mount

// Mount kinds.
const (
	MountBind    = mounts.Bind
	MountTmpfs   = mounts.Tmpfs
	MountHide    = mounts.Hide
	MountProtect = mounts.Protect
)

// Network is the network a sandbox gets.
type Network string

const (
	// NetworkNone is a new network namespace holding only lo (up).
	NetworkNone Network = "none"
	// NetworkHost shares the host's network namespace.
	NetworkHost Network = "host"
)

// Limits bound a sandbox. Zero values mean no limit.
type Limits struct {
	Memory int64         `json:"memory,omitempty"` // bytes
	Pids   int64         `json:"pids,omitempty"`
	CPU    float64       `json:"cpu,omitempty"` // CPUs, e.g. 0.5
	Tmp    int64         `json:"tmp,omitempty"` // size of /tmp in bytes
	Time   time.Duration `json:"time,omitempty"`
}

// Policy is the resolved description of one sandbox: concrete absolute
// paths, a complete environment, limits. The CLI, the profiles and
// embedding programs all produce a Policy; pkg/policy builds one from
// profiles, variables and flags.
type Policy struct {
	// HostDirs, when non-nil, replaces the read-only host root with just
	// these host paths (bound read-only at the same place).
	HostDirs []string `json:"hostDirs,omitempty"`
	// Mounts apply in order on top of the read-only root.
	Mounts []Mount `json:"mounts,omitempty"`
	// Cwd is the working directory inside; "" keeps the caller's when it
	// is visible inside, else "/".
	Cwd string `json:"cwd,omitempty"`
	// CwdFallback says Cwd is only the caller's current directory, not a
	// choice: when it is not visible inside (a directory under the host's
	// /tmp with a private /tmp), commands start in / instead of failing.
	CwdFallback bool `json:"cwdFallback,omitempty"`
	// Network is NetworkNone (default), NetworkHost or NetworkFiltered.
	Network Network `json:"network,omitempty"`
	// NetFilter is the allowlist of NetworkFiltered.
	NetFilter *NetFilter `json:"netFilter,omitempty"`
	// Hostname inside; "" means "nsbox".
	Hostname string `json:"hostname,omitempty"`
	// Env is the complete environment of commands ("K=V"); nil means
	// BaseEnv(os.Getenv).
	Env []string `json:"env,omitempty"`
	// Limits bound memory, processes, CPU and /tmp.
	Limits Limits `json:"limits"`
	// Seccomp is "default", "unconfined", or the path of an OCI seccomp
	// profile (JSON).
	Seccomp string `json:"seccomp,omitempty"`
	// SeccompSHA256 is, when set, the hex SHA-256 of the profile file the
	// policy was resolved (and trusted) with: Start refuses the file if
	// its bytes differ now.
	SeccompSHA256 string `json:"seccompSHA256,omitempty"`
	// AllowUserns lets commands create nested user namespaces.
	AllowUserns bool `json:"allowUserns,omitempty"`
	// AllowPrivileged keeps capabilities inside the user namespace.
	AllowPrivileged bool `json:"allowPrivileged,omitempty"`
	// SingleID maps only the caller's own uid and gid (setgroups denied)
	// instead of a 65,536-id range: a root caller then runs as host root.
	SingleID bool `json:"singleID,omitempty"`
	// AllowSingleID: a root caller whose bind is on a filesystem
	// that cannot be idmapped gets the single-id map (and a warning,
	// Session.Warnings) instead of an error.
	AllowSingleID bool `json:"allowSingleID,omitempty"`
	// HostAPIs is the allowlist of "api.method" names commands may call
	// through hostCall. Empty: no hostCall fd is given to commands.
	HostAPIs []string `json:"hostAPIs,omitempty"`
	// AllowToolRegistration lets programs inside register tools.
	AllowToolRegistration bool `json:"allowToolRegistration,omitempty"`
	// Workspace is the directory (inside) the workspace tools are
	// confined to; "" means Cwd.
	Workspace string `json:"workspace,omitempty"`
	// Tools bound the built-in tools.
	Tools ToolSettings `json:"tools"`
	// UnixSockets is the gate on connects and sends to path sockets
	// (sockets.go).
	UnixSockets UnixSocketPolicy `json:"unixSockets"`
	// AbsentHidden are hidden paths that did not exist when the policy
	// was resolved (the first missing component of each). The namespace
	// backend has nothing to mount there; the Landlock backend denies
	// them, so a secret the host creates there during the session (`gh
	// auth login` in another terminal) stays out of reach.
	AbsentHidden []string `json:"absentHidden,omitempty"`
}

// BaseEnv returns the minimal environment commands get: PATH, HOME, TERM and
// LANG taken from getenv (with a safe PATH when unset). Nothing else of the
// caller's environment crosses unless the policy adds it.
func BaseEnv(getenv func(string) string) []string {
	env := []string{}
	p := getenv("PATH")
	if p == "" {
		p = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	}
	env = append(env, "PATH="+p)
	for _, k := range []string{"HOME", "TERM", "LANG"} {
		if v := getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// Validate checks the policy before anything starts. Each error is a
// *PolicyError naming the field.
func (p *Policy) Validate() error {
	for i, m := range p.Mounts {
		f := fmt.Sprintf("mounts[%d]", i)
		if err := checkAbs(m.Dest); err != nil {
			return &PolicyError{Field: f + ".dest", Msg: err.Error()}
		}
		if m.Kind == MountBind {
			if err := checkAbs(m.Source); err != nil {
				return &PolicyError{Field: f + ".source", Msg: err.Error()}
			}
		}
		switch m.Kind {
		case MountBind, MountTmpfs, MountHide, MountProtect:
		default:
			return &PolicyError{Field: f + ".kind", Msg: fmt.Sprintf("unknown kind %q", m.Kind)}
		}
		if m.Dest == "/" || m.Dest == "/proc" || m.Dest == "/dev" {
			return &PolicyError{Field: f + ".dest", Msg: m.Dest + " is managed by nsbox and cannot be replaced"}
		}
	}
	for i, d := range p.HostDirs {
		if err := checkAbs(d); err != nil {
			return &PolicyError{Field: fmt.Sprintf("hostDirs[%d]", i), Msg: err.Error()}
		}
	}
	if p.Cwd != "" {
		if err := checkAbs(p.Cwd); err != nil {
			return &PolicyError{Field: "cwd", Msg: err.Error()}
		}
	}
	if err := p.validateNetwork(); err != nil {
		return err
	}
	if len(p.Hostname) > 64 || strings.ContainsAny(p.Hostname, "/\x00 ") {
		return &PolicyError{Field: "hostname", Msg: fmt.Sprintf("invalid hostname %q", p.Hostname)}
	}
	for i, e := range p.Env {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" || strings.ContainsRune(e, 0) {
			return &PolicyError{Field: fmt.Sprintf("env[%d]", i), Msg: fmt.Sprintf("%q is not KEY=VALUE", e)}
		}
	}
	if err := p.Limits.validate(); err != nil {
		return err
	}
	for i, m := range p.HostAPIs {
		api, method, ok := strings.Cut(m, ".")
		if !ok || api == "" || method == "" {
			return &PolicyError{Field: fmt.Sprintf("hostAPIs[%d]", i), Msg: fmt.Sprintf("%q is not api.method", m)}
		}
	}
	return nil
}

// MinMemory is the smallest memory limit accepted: room for a small command,
// and for the worker (PID 1, a Go process) where it is charged to the same
// limit (a systemd scope; elsewhere it stays outside the group).
const MinMemory = cgroups.MinMemory

// MinPids is the smallest process limit accepted: a pipeline needs a few
// tasks, and the worker's threads count where it shares the limit (a
// systemd scope, rlimits).
const MinPids = cgroups.MinPids

func (l Limits) validate() error {
	if l.Memory < 0 || (l.Memory > 0 && l.Memory < MinMemory) {
		return &PolicyError{Field: "limits.memory", Msg: fmt.Sprintf("%d bytes is below the %d MiB the sandbox itself needs", l.Memory, MinMemory>>20)}
	}
	if l.Pids < 0 || (l.Pids > 0 && l.Pids < MinPids) {
		return &PolicyError{Field: "limits.pids", Msg: fmt.Sprintf("%d is below the minimum of %d (the sandbox's own PID 1 and its threads count too)", l.Pids, MinPids)}
	}
	if l.CPU < 0 {
		return &PolicyError{Field: "limits.cpu", Msg: "must be positive"}
	}
	if l.Tmp < 0 {
		return &PolicyError{Field: "limits.tmp", Msg: "must be positive"}
	}
	if l.Time < 0 {
		return &PolicyError{Field: "limits.time", Msg: "must be positive"}
	}
	return nil
}

func checkAbs(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("empty path")
	case strings.ContainsRune(p, 0):
		return fmt.Errorf("path contains a NUL byte")
	case !path.IsAbs(p):
		return fmt.Errorf("path %q is not absolute", p)
	}
	return nil
}

// env returns the command environment of the policy.
func (p *Policy) env() []string {
	env := p.Env
	if env == nil {
		env = BaseEnv(os.Getenv)
	}
	if len(p.HostAPIs) > 0 || p.AllowToolRegistration {
		// nsbox is bound at SelfPath then: `nsbox call` by name.
		env = withSelfOnPath(env)
	}
	return env
}
