package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/nsbox/nsbox/pkg/hostapi"
	"github.com/nsbox/nsbox/pkg/netfilter"
	"github.com/nsbox/nsbox/pkg/policy"
	"github.com/nsbox/nsbox/pkg/sandbox"
	"github.com/nsbox/nsbox/pkg/sessiond"
	"github.com/spf13/pflag"
)

// knownHostAPIs are the host API methods a pattern such as "memory.*"
// expands to: every method pkg/hostapi can serve to a sandbox.
var knownHostAPIs = hostapi.Methods()

// policyFlags are the policy flags shared by run (and script, tools call,
// mcp): each one, when given, is the command-line layer of the policy, on
// top of the profile, the config file and the defaults.
type policyFlags struct {
	fs *pflag.FlagSet

	rw, ro, tmpfs, hide, protect []string
	shallow                      []string
	env, passEnv, hostAPI        []string
	allowSocket                  []string
	cwd, network, hostname       string
	profile, backend, workspace  string
	memory, pids, cpu, timeout   string
	tmpSize, seccomp             string
	input, output                string
	allowUserns, allowPrivileged bool
	allowSingleID                bool
	allowToolRegistration        bool
	dryRun                       bool
	netFlags
}

// flagKeys maps policy keys to the flags that set them, so that every
// error names what the user typed.
var flagKeys = map[string]string{
	"filesystem.rw": "--rw", "filesystem.ro": "--ro", "filesystem.tmpfs": "--tmpfs",
	"filesystem.hide": "--hide", "filesystem.protect": "--protect", "filesystem.shallow": "--shallow",
	"filesystem.input": "--input", "filesystem.output": "--output",
	"env.set": "--env", "env.pass": "--pass-env", "host_apis": "--host-api",
	"cwd": "--cwd", "network": "--net", "hostname": "--hostname", "backend": "--backend",
	"workspace": "--workspace", "seccomp": "--seccomp",
	"limits.memory": "--memory", "limits.pids": "--pids", "limits.cpu": "--cpu",
	"limits.timeout": "--timeout", "limits.tmp_size": "--tmp-size",
	"allow_userns": "--allow-userns", "allow_privileged": "--allow-privileged",
	"allow_tool_registration": "--allow-tool-registration",
	"tools.max_output":        "--max-output",
	"unix_sockets.allow":      "--allow-socket",
}

func (f *policyFlags) register(fl *pflag.FlagSet) {
	f.fs = fl
	fl.StringVar(&f.profile, "profile", "", "policy profile: a `NAME` (nsbox profiles list) or a FILE (in a writable directory only from its .nsbox/policy/; a file in any .nsbox/policy/ only once trusted: nsbox trust; default: the config's, else workspace)")
	fl.BoolVar(&f.dryRun, "dry-run", false, "print the resolved policy and mount plan (the Landlock rules with --backend landlock) as JSON, start nothing")
	fl.StringVar(&f.backend, "backend", "", "`MODE`: auto (native, else landlock), required (native only), native, landlock or none (default auto)")
	fl.StringVar(&f.workspace, "workspace", "", "the workspace `DIR`, read-write under the workspace profile (default: the current directory)")
	fl.StringArrayVar(&f.rw, "rw", nil, "bind `PATH[:DST]` read-write (repeatable)")
	fl.StringArrayVar(&f.ro, "ro", nil, "bind `PATH[:DST]` read-only (repeatable)")
	fl.StringArrayVar(&f.tmpfs, "tmpfs", nil, "mount an empty tmpfs at `DST` (repeatable)")
	fl.StringArrayVar(&f.hide, "hide", nil, "make `PATH` read as empty (repeatable; !PATH unhides a profile's entry)")
	fl.StringArrayVar(&f.protect, "protect", nil, "keep `PATH` read-only inside writable binds, even if it does not exist yet; a pattern (*, **) keeps what it matches, and what the run makes that matches it is renamed NAME.nsbox-quarantine at its end (repeatable; !PATH drops a profile's entry)")
	fl.StringArrayVar(&f.shallow, "shallow", nil, "search the writable `DIR` at its top level only: the nested hide and protect patterns (**/.git, **/.env*, agent configs) and the end-of-run audit skip what lies below (for a tree too big to walk that git, editors and agents never use; repeatable; !DIR drops a config's entry)")
	fl.StringVar(&f.input, "input", "", "bind `DIR` read-only at /input")
	fl.StringVar(&f.output, "output", "", "bind `DIR` read-write at /output")
	fl.StringVar(&f.cwd, "cwd", "", "working `DIR` inside (default: the workspace, else the current directory when visible, else /)")
	fl.StringVar(&f.network, "net", "", "network: none (only lo), host, or filtered (an allowlist: --allow-host) (default none)")
	f.registerNetwork(fl)
	fl.StringVar(&f.hostname, "hostname", "", "hostname inside (default nsbox)")
	fl.StringArrayVar(&f.env, "env", nil, "set `K=V` inside (repeatable)")
	fl.StringArrayVar(&f.passEnv, "pass-env", nil, "pass the variable `K` from this environment (repeatable)")
	fl.StringVar(&f.timeout, "timeout", "", "kill the whole sandbox after `DURATION` (e.g. 30s, 2m; exit 124)")
	fl.StringVar(&f.memory, "memory", "", "memory limit `SIZE` (e.g. 512M, 2G)")
	fl.StringVar(&f.pids, "pids", "", "limit on processes and threads `N`")
	fl.StringVar(&f.cpu, "cpu", "", "CPU bandwidth in CPUs `N` (e.g. 0.5, 2)")
	fl.StringVar(&f.tmpSize, "tmp-size", "", "size `SIZE` of the private /tmp")
	fl.StringVar(&f.seccomp, "seccomp", "", "seccomp profile: default, unconfined or a `FILE` (OCI JSON)")
	fl.BoolVar(&f.allowUserns, "allow-userns", false, "let commands create nested user namespaces (loosens the sandbox)")
	fl.BoolVar(&f.allowPrivileged, "allow-privileged", false, "keep capabilities inside the sandbox's user namespace (loosens the sandbox)")
	fl.BoolVar(&f.allowSingleID, "allow-single-id", false, "as root, when a writable bind's filesystem cannot be idmapped, run with the single-id map (as host root) and a warning instead of failing (loosens the sandbox)")
	fl.StringArrayVar(&f.hostAPI, "host-api", nil, "allow the host API method `API.METHOD` (or API.*; repeatable)")
	fl.StringArrayVar(&f.allowSocket, "allow-socket", nil, "let commands connect to the host unix socket at `PATH`, as found when the sandbox starts (variables expanded, e.g. '$SSH_AUTH_SOCK'; repeatable; a path through a symlink in a writable place is refused)")
	fl.BoolVar(&f.allowToolRegistration, "allow-tool-registration", false, "let programs inside define tools")
}

// hideAndProtect adds a pattern as --hide and --protect both: what the
// command itself keeps (a file no sandbox it starts may read or replace).
func (f *policyFlags) hideAndProtect(pattern string) {
	f.hide = append(f.hide, pattern)
	f.protect = append(f.protect, pattern)
}

func (f *policyFlags) changed(name string) bool { return f.fs != nil && f.fs.Changed(name) }

// layer turns the flags that were given into the command-line layer.
func (f *policyFlags) layer() (*policy.Layer, error) {
	l := &policy.Layer{Kind: policy.KindFlags, Name: "command line", KeyNames: flagKeys}
	c := &l.Config
	str := func(name string, v string) *string {
		if !f.changed(name) {
			return nil
		}
		return &v
	}
	boolean := func(name string, v bool) *bool {
		if !f.changed(name) {
			return nil
		}
		return &v
	}
	c.Backend = str("backend", f.backend)
	c.Workspace = str("workspace", f.workspace)
	if c.Workspace != nil && *c.Workspace == "" {
		return nil, fmt.Errorf("--workspace: empty path")
	}
	c.Cwd = str("cwd", f.cwd)
	if c.Cwd != nil && *c.Cwd == "" {
		return nil, fmt.Errorf("--cwd: empty path")
	}
	c.Network.Mode = str("net", f.network)
	f.networkLayer(c)
	c.Hostname = str("hostname", f.hostname)
	c.Seccomp = str("seccomp", f.seccomp)
	c.AllowUserns = boolean("allow-userns", f.allowUserns)
	c.AllowPrivileged = boolean("allow-privileged", f.allowPrivileged)
	c.AllowToolRegistration = boolean("allow-tool-registration", f.allowToolRegistration)
	c.HostAPIs = f.hostAPI
	c.UnixSockets.Allow = f.allowSocket
	for _, s := range f.rw {
		c.Filesystem.RW = append(c.Filesystem.RW, flagEntry(s))
	}
	for _, s := range f.ro {
		c.Filesystem.RO = append(c.Filesystem.RO, flagEntry(s))
	}
	for _, s := range f.tmpfs {
		c.Filesystem.Tmpfs = append(c.Filesystem.Tmpfs, policy.PathEntry{Path: s})
	}
	for _, s := range f.hide {
		e := policy.ParseEntry(s)
		c.Filesystem.Hide = append(c.Filesystem.Hide, e)
	}
	for _, s := range f.protect {
		c.Filesystem.Protect = append(c.Filesystem.Protect, policy.ParseEntry(s))
	}
	c.Filesystem.Shallow = f.shallow
	c.Filesystem.Input = str("input", f.input)
	c.Filesystem.Output = str("output", f.output)
	for _, k := range f.passEnv {
		c.Env.Pass = append(c.Env.Pass, k)
	}
	for _, kv := range f.env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--env %q: want K=V", kv)
		}
		if c.Env.Set == nil {
			c.Env.Set = map[string]string{}
		}
		c.Env.Set[k] = v
	}
	c.Limits.Memory = str("memory", f.memory)
	c.Limits.Timeout = str("timeout", f.timeout)
	c.Limits.TmpSize = str("tmp-size", f.tmpSize)
	if f.changed("pids") {
		n, err := strconv.ParseInt(strings.TrimSpace(f.pids), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("--pids %q: not a whole number", f.pids)
		}
		c.Limits.Pids = &n
	}
	if f.changed("cpu") {
		n, err := strconv.ParseFloat(strings.TrimSpace(f.cpu), 64)
		if err != nil {
			return nil, fmt.Errorf("--cpu %q: not a number of CPUs such as 0.5 or 2", f.cpu)
		}
		c.Limits.CPU = &n
	}
	return l, nil
}

// flagEntry reads --rw/--ro PATH[:DST]. Unlike a profile entry, a flag
// takes the path as written: no "!" removal, no "?" optional suffix.
func flagEntry(s string) policy.PathEntry {
	src, dst, _ := strings.Cut(s, ":")
	return policy.PathEntry{Path: src, Dest: dst}
}

// hostForCLI describes this process for policy resolution.
func hostForCLI() (policy.Host, error) {
	h, err := policy.HostFromEnv()
	if err != nil {
		return h, err
	}
	h.KnownHostAPIs = knownHostAPIs
	// Invariant: nsbox's data directory exists before any policy is
	// resolved. A hide applies to what exists when the run starts, and
	// nsbox makes the directory itself right after (its run records),
	// or another run does (its memory store): one made after the start
	// would be readable inside through the read-only root (review 18).
	// A failure is the same as before: nothing there yet to hide, and
	// this run cannot make it either.
	if d := h.DataDir(); d != "" {
		os.MkdirAll(d, 0o700)
	}
	// The same for the sessions' directory (made 0700 and checked, as a
	// session makes it): a sandbox given its parent as a writable place
	// (--rw /tmp) could otherwise make it first, or reach the sockets in
	// it through the unix gate, whose connect and listen the daemon and
	// its client take for the user's own (review 45).
	h.SessionsDir, h.OtherSessionsDirs = sessiond.SandboxedDirs(os.Getenv)
	return h, nil
}

// resolve builds the policy from the flags, the profile, the config file
// and the defaults.
func (f *policyFlags) resolve(h policy.Host) (*policy.Result, error) {
	l, err := f.layer()
	if err != nil {
		return nil, err
	}
	return policy.Load(h, policy.Request{Profile: f.profile, Flags: l})
}

// peek resolves the flags as resolve does, only as far as the backend and
// the writable roots (policy.Peek).
func (f *policyFlags) peek(h policy.Host) (*policy.Preview, error) {
	l, err := f.layer()
	if err != nil {
		return nil, err
	}
	return policy.Peek(h, policy.Request{Profile: f.profile, Flags: l})
}

// printWarnings writes the warnings (and, with notes, the notes) of a
// resolution, one line each.
func printWarnings(w io.Writer, res *policy.Result, notes bool) {
	for _, x := range res.Warnings {
		switch {
		case !x.Note:
			fmt.Fprintln(w, "nsbox: warning: "+x.String())
		case notes:
			fmt.Fprintln(w, "nsbox: note: "+x.String())
		}
	}
}

// dryRun is what --dry-run prints.
type dryRun struct {
	Profile         string               `json:"profile"`
	Layers          []string             `json:"layers"`
	Backend         string               `json:"backend"`
	BackendFallback bool                 `json:"backendFallback"`
	Workspace       string               `json:"workspace,omitempty"`
	Policy          any                  `json:"policy"`
	Plan            []planLine           `json:"mountPlan"`
	Placeholders    []policy.Placeholder `json:"placeholders,omitempty"`
	Warnings        []policy.Warning     `json:"warnings,omitempty"`
	// Landlock replaces the mount plan for --backend landlock, which
	// makes no mount.
	Landlock *sandbox.LandlockPlan `json:"landlock,omitempty"`
	// NetworkAllow is a filtered network's allow list with the ports
	// each pattern covers, as the session applies them (a pattern
	// without a port: 80 and 443; 443 only under --check-sni).
	NetworkAllow []string `json:"networkAllow,omitempty"`
	// Audit is what is looked for once the sandbox has ended
	// (policy.GitAudit): repositories made in the workspace, and what
	// the run made or changed that the patterns match.
	Audit *policy.AuditPlan `json:"audit,omitempty"`
	// Shallow are the writable directories searched at their top level
	// only (--shallow).
	Shallow []string `json:"shallow,omitempty"`
}

type planLine struct {
	Kind     string `json:"kind"`
	Source   string `json:"source,omitempty"`
	Dest     string `json:"dest"`
	ReadOnly bool   `json:"readonly,omitempty"`
	Size     int64  `json:"size,omitempty"`
	Why      string `json:"why"`
}

// mountPlan lists every mount the sandbox will make, in order: nsbox's
// own base, then the policy's.
func mountPlan(res *policy.Result) []planLine {
	p := res.Policy
	host := "every top-level entry of the host root except /proc, /dev, /tmp and /run, read-only, nosuid, nodev, recursively"
	lines := []planLine{{Kind: "tmpfs", Dest: "/", ReadOnly: true, Why: "new root (sealed read-only after setup)"}}
	if p.HostDirs != nil {
		for _, d := range p.HostDirs {
			lines = append(lines, planLine{Kind: "bind", Source: d, Dest: d, ReadOnly: true, Why: "host_dirs, read-only, nosuid, nodev"})
		}
	} else {
		lines = append(lines, planLine{Kind: "bind", Source: "/*", Dest: "/*", ReadOnly: true, Why: host})
	}
	lines = append(lines,
		planLine{Kind: "proc", Dest: "/proc", Why: "a fresh proc of the sandbox's PID namespace"},
		planLine{Kind: "tmpfs", Dest: "/dev", Why: "minimal /dev: null zero full random urandom tty, private devpts, shm"},
		planLine{Kind: "tmpfs", Dest: "/tmp", Size: p.Limits.Tmp, Why: "private /tmp"},
		planLine{Kind: "tmpfs", Dest: "/run", Why: "private /run"},
	)
	if p.Network == sandbox.NetworkFiltered {
		lines = append(lines, planLine{Kind: "bind", Source: "(generated)", Dest: "/etc/resolv.conf", ReadOnly: true, Why: "filtered network: the sandbox's resolver is nsbox's, at " + netfilter.ResolverAddr.String()})
	}
	for _, e := range res.Plan {
		lines = append(lines, planLine{Kind: string(e.Kind), Source: e.Source, Dest: e.Dest, ReadOnly: e.ReadOnly || e.Kind == "protect" || e.Kind == "hide", Size: e.Size, Why: e.Why})
	}
	return lines
}

// printDryRun prints the dry run. For backend landlock it prints the
// Landlock rules and what the backend leaves shared instead of the mount
// plan, and fails on a policy the landlock backend refuses to start (its
// error is the run's).
func printDryRun(w io.Writer, res *policy.Result) error {
	out := dryRun{
		Profile: res.Profile, Layers: res.Layers, Backend: res.Backend, BackendFallback: res.BackendFallback,
		Workspace: res.Workspace, Policy: res.Policy, Plan: mountPlan(res), Placeholders: res.Placeholders,
		Warnings: res.Warnings, Audit: res.GitAudit.Plan(), Shallow: res.Shallow,
	}
	if res.Policy.Network == sandbox.NetworkFiltered && res.Policy.NetFilter != nil {
		out.NetworkAllow = allowDescribed(res.Policy.NetFilter)
	}
	// The environment as commands get it: with the private cache
	// (sandbox.PrivateCacheEnv). Backend none runs on the host as is.
	switch pol := res.Policy; res.Backend {
	case policy.BackendNone:
	case policy.BackendLandlock:
		pol.Env = sandbox.PrivateCacheEnv(pol, true)
		out.Policy = pol
	default:
		pol.Env = sandbox.PrivateCacheEnv(pol, false)
		out.Policy = pol
	}
	if res.Backend == policy.BackendLandlock {
		ll, err := sandbox.PlanLandlock(res.Policy)
		if err != nil {
			return err
		}
		out.Plan, out.Landlock = []planLine{}, ll
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
