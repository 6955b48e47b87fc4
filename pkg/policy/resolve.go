package policy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

// Result is a resolved policy and how it came about.
type Result struct {
	// Policy is ready for sandbox.Start.
	Policy sandbox.Policy `json:"policy"`
	// Plan explains every mount of Policy.Mounts, in order.
	Plan []PlanEntry `json:"plan"`
	// Profile is the profile used (its name, or the file given).
	Profile string `json:"profile"`
	// Layers name the sources applied, lowest precedence first.
	Layers []string `json:"layers"`
	// Backend is "auto", "required", "native" or "none".
	Backend string `json:"backend"`
	// BackendFallback allows "auto" to fall back to backend none.
	BackendFallback bool `json:"backendFallback"`
	// Workspace is the host workspace directory ("" for none).
	Workspace string `json:"workspace,omitempty"`
	// Shallow are the writable directories the nested walks skip.
	Shallow []string `json:"shallow,omitempty"`
	// Placeholders are host paths that do not exist and that the sandbox
	// will create, empty and read-only, so that it cannot create them
	// itself (see Hold).
	Placeholders []Placeholder `json:"placeholders,omitempty"`
	// Warnings and notes, in the order they arose.
	Warnings []Warning `json:"warnings,omitempty"`
	// GitAudit, when not nil, is to be run once the sandbox has ended:
	// it makes the git repositories the sandbox created inert.
	GitAudit *GitAudit `json:"-"`
}

// PlanEntry is one mount and why it is there.
type PlanEntry struct {
	sandbox.Mount
	Why string `json:"why"`
}

// Placeholder is a protected path the sandbox creates empty.
type Placeholder struct {
	Path string `json:"path"`
	Dir  bool   `json:"dir"`
	// Root is the writable bind source that holds it.
	Root string `json:"root"`
}

func ptr[T any](v T) *T { return &v }

// defaultsFor is Defaults with the user database's config directory
// protected too, whatever $HOME says in this run: a later run with
// another $HOME trusts it (trustedPolicyFile; review 22).
//
// The default config directories ($HOME's and the user database's) are
// protected whatever XDG_CONFIG_HOME says in this run: the next run may
// not set it (trustedPolicyFile). Each once: the same path twice would
// be two read-only binds.
func defaultsFor(h Host) *Layer {
	l := Defaults()
	fs := &l.Config.Filesystem
	seen := map[string]bool{h.ConfigDir(): true}
	for _, home := range []string{h.Home, h.UserHome} {
		if home == "" {
			continue
		}
		if d := filepath.Join(home, ".config", "nsbox"); !seen[d] {
			seen[d] = true
			fs.Protect = append(fs.Protect, PathEntry{Path: escapeGlob(d), Dir: true})
		}
	}
	// The sessions' sockets, wherever a session of another environment
	// keeps them (review 47), as $NSBOX_SESSIONS.
	for _, d := range h.OtherSessionsDirs {
		if d != "" && d != h.SessionsDir && !seen[d] {
			seen[d] = true
			fs.Hide = append(fs.Hide, PathEntry{Path: escapeGlob(d), Dir: true})
			fs.Protect = append(fs.Protect, PathEntry{Path: escapeGlob(d), Dir: true})
		}
	}
	return l
}

// Defaults is the lowest layer: what nsbox does when nothing else says.
func Defaults() *Layer {
	return &Layer{Kind: KindDefaults, Name: "built-in defaults", Config: Config{
		Backend:               ptr(BackendAuto),
		BackendFallback:       ptr(false),
		Network:               NetworkConfig{Mode: ptr(string(sandbox.NetworkNone))},
		Seccomp:               ptr("default"),
		Hostname:              ptr("nsbox"),
		AllowPrivileged:       ptr(false),
		AllowUserns:           ptr(false),
		AllowToolRegistration: ptr(false),
		Env:                   Env{Clear: ptr(true)},
		Filesystem: Filesystem{
			// nsbox's own config and profiles: a sandbox that could write
			// them would choose the next sandbox's policy. The host APIs'
			// stores: sandboxed code reaches them only through hostCall and
			// its allowlist, never as files (read or written).
			// The sessions' sockets: a sandbox that reached them drove
			// the user's other sessions, its connect and listen made by
			// the unix gate, as the supervisor (review 45).
			Protect: []PathEntry{{Path: "$NSBOX_CONFIG", Dir: true}, {Path: "$NSBOX_DATA", Dir: true}, {Path: "$NSBOX_SESSIONS", Dir: true}},
			Hide:    []PathEntry{{Path: "$NSBOX_DATA", Dir: true}, {Path: "$NSBOX_SESSIONS", Dir: true}},
		},
	}}
}

// ConfigPath is the user's config file ("" when no config directory is
// known).
func ConfigPath(h Host) string {
	h = h.withDefaults()
	if d := h.ConfigDir(); d != "" {
		return filepath.Join(d, "config.toml")
	}
	return ""
}

// Request says what to load besides the defaults.
type Request struct {
	// Profile is --profile: a name or a file path; "" uses the config
	// file's profile, then DefaultProfile.
	Profile string
	// Flags is the command-line layer (nil: none).
	Flags *Layer
	// ConfigFile replaces ConfigPath(h); "-" loads no config file.
	ConfigFile string
}

// Load builds the layers (defaults, config file, profile chain, flags),
// checks each, merges and resolves them.
func Load(h Host, req Request) (*Result, error) {
	h = h.withDefaults()
	layers, ref, err := loadLayers(h, req)
	if err != nil {
		return nil, err
	}
	return (&Preview{h: h, layers: layers, ref: ref}).Load()
}

// loadLayers reads the layers of req: the defaults, the config file, the
// profile chain and the flags. ref is the profile used.
func loadLayers(h Host, req Request) (layers []*Layer, ref string, err error) {
	layers = []*Layer{defaultsFor(h)}
	cfgPath := req.ConfigFile
	if cfgPath == "" {
		cfgPath = ConfigPath(h)
	}
	var cfg *Layer
	if cfgPath != "" && cfgPath != "-" {
		if _, err := os.Stat(cfgPath); err == nil || !(errors.Is(err, fs.ErrNotExist) || implicitUnreachable(req.ConfigFile, err)) {
			cfg, err = LoadLayer(cfgPath, KindConfig)
			if err != nil {
				return nil, "", err
			}
			layers = append(layers, cfg)
		}
	}
	ref = req.Profile
	if ref == "" && cfg != nil && cfg.Config.Profile != "" {
		if err := CheckLayer(cfg); err != nil {
			return nil, "", err
		}
		ref = cfg.Config.Profile
		// A relative path in the config file is relative to that file,
		// as extend is to its profile: looked up from the current
		// directory, it would let any project directory holding a file
		// of that name choose the policy.
		if isPathRef(ref) && !filepath.IsAbs(ref) && !strings.HasPrefix(ref, "~") && !strings.HasPrefix(ref, "$") {
			ref = filepath.Join(filepath.Dir(cfgPath), ref)
		}
	}
	if ref == "" {
		ref = DefaultProfile
	}
	chain, err := NewLoader(h).Chain(ref)
	if err != nil {
		return nil, "", err
	}
	layers = append(layers, chain...)
	if req.Flags != nil {
		layers = append(layers, req.Flags)
	}
	return layers, ref, nil
}

// Resolve checks every layer, merges them (lowest precedence first) and
// resolves the result against h.
func Resolve(h Host, layers []*Layer) (*Result, error) {
	return resolve(h, layers, false)
}

// resolve is Resolve; checked says the layers passed CheckLayer already
// (a Preview's, which Peek checked and nothing else holds).
func resolve(h Host, layers []*Layer, checked bool) (*Result, error) {
	r, err := newResolver(h, layers, checked)
	if err != nil {
		return nil, err
	}
	if err := r.run(r.steps()); err != nil {
		return nil, err
	}
	return r.res, nil
}

// Preview is what a caller needs before the full resolution: the backend
// to choose and the writable roots to hold (Hold).
type Preview struct {
	Backend         string
	BackendFallback bool
	// Roots are the writable bind sources (Result.Roots may add pins
	// below them).
	Roots []string

	h      Host
	layers []*Layer
	ref    string
	// checked: the layers passed CheckLayer (Peek checked them); Load
	// does not check them again.
	checked bool
}

// Load resolves in full what Peek previewed, with the layers Peek read:
// profile and config files are not read twice.
func (pv *Preview) Load() (*Result, error) {
	res, err := resolve(pv.h, pv.layers, pv.checked)
	if err != nil {
		return nil, err
	}
	res.Profile = pv.ref
	return res, nil
}

// Peek loads req as Load does but resolves only the steps that decide the
// backend and the writable roots. The hide walk (a readdir of every
// directory of the workspace) is left to Preview.Load, called under the
// hold, so that a run pays it once. Errors are the ones Load would return
// from the same steps.
func Peek(h Host, req Request) (*Preview, error) {
	h = h.withDefaults()
	layers, ref, err := loadLayers(h, req)
	if err != nil {
		return nil, err
	}
	r, err := newResolver(h, layers, false)
	if err != nil {
		return nil, err
	}
	var steps []step
	for _, s := range r.steps() {
		switch s.name {
		case "workspace", "cwd", "host_dirs", "binds", "options":
			steps = append(steps, s)
		}
	}
	if err := r.run(steps); err != nil {
		return nil, err
	}
	pv := &Preview{Backend: r.res.Backend, BackendFallback: r.res.BackendFallback, h: h, layers: layers, ref: ref, checked: true}
	for _, it := range r.mounts {
		if it.m.Kind == sandbox.MountBind && !it.m.ReadOnly {
			pv.Roots = append(pv.Roots, it.m.Source)
		}
	}
	sort.Strings(pv.Roots)
	pv.Roots = dedupStrings(pv.Roots)
	return pv, nil
}

type step struct {
	name string
	fn   func() error
}

// steps is the resolution, in order.
func (r *resolver) steps() []step {
	return []step{
		{"workspace", r.workspace},
		{"cwd", r.cwdStep},
		{"host_dirs", r.hostDirs},
		{"binds", r.binds},
		{"shallow", r.shallowDirs},
		{"policy_files", r.checkPolicyFiles},
		// Before protect: a seccomp profile inside a writable bind is
		// protected like a policy file.
		{"seccomp", r.seccomp},
		// After policy_files and seccomp: every file read is known.
		{"trust", r.trust},
		// One walk for every pattern of both lists (globAll).
		{"patterns", r.patterns},
		{"protect", r.protect},
		{"hide", r.hide},
		{"walk_warnings", func() error { r.warnTruncations(); return nil }},
		{"plan", r.plan},
		// After plan: an allowed socket in a private place is bound in.
		{"unix_sockets", r.unixSockets},
		{"env", r.env},
		{"limits", r.limits},
		{"tools", r.tools},
		{"host_apis", r.hostAPIs},
		{"options", r.options},
		// After options (the mode): the allowlist of a filtered network.
		{"network", r.network},
		// Last: the same checks sandbox.Start runs, before anything starts.
		{"validate", r.validate},
	}
}

func (r *resolver) run(steps []step) error {
	for _, s := range steps {
		if err := s.fn(); err != nil {
			return err
		}
	}
	return nil
}

func newResolver(h Host, layers []*Layer, checked bool) (*resolver, error) {
	h = h.withDefaults()
	if !filepath.IsAbs(h.Cwd) {
		return nil, &Error{Msg: fmt.Sprintf("the current directory %q is not absolute", h.Cwd)}
	}
	if !checked {
		for _, l := range layers {
			if err := CheckLayer(l); err != nil {
				return nil, err
			}
		}
	}
	r := &resolver{h: h, layers: layers, m: merge(layers), res: &Result{}}
	for _, w := range r.m.lifted {
		r.warn(w)
	}
	for _, l := range layers {
		r.res.Layers = append(r.res.Layers, l.Name)
		if l.Kind == KindProfile && r.res.Profile == "" {
			r.res.Profile = l.Profile
		}
	}
	return r, nil
}

type resolver struct {
	h      Host
	layers []*Layer
	m      *merged
	res    *Result
	vars   vars
	// varsCache holds the values entries expand with (varsFor), made once
	// a resolution; cleared whenever vars changes.
	varsCache map[varsKey]vars
	// warnedPython: the git commands warnPythonCwd named already.
	warnedPython map[string]bool
	home         string // $HOME resolved, "" when unknown

	mounts  []mountItem // binds, tmpfs and pins, sorted by depth
	rwRoots []string    // writable bind sources that are directories ($NSBOX_RW)
	shallow []string    // those the nested walks skip (shallow.go)
	// startLinks are the symlinks the start's walk met (patterns), in
	// directories down to startLinkDepth below its roots.
	startLinks     []string
	startLinkDepth int
	// policyChecks are the policy files in writable directories, checked
	// once shallow is known (checkPolicyFiles).
	policyChecks []policyCheck
	// seccompFile and seccompDigest are the seccomp profile file read
	// (its real path) and the SHA-256 of its bytes; "" for none.
	seccompFile   string
	seccompDigest [32]byte
	// seccompNamed is that file's path as named, made absolute.
	seccompNamed string
	// shallowRepos: a pattern of repositories skipped a shallow one.
	shallowRepos bool
	// policyFiles are this run's policy files that lie in writable binds.
	policyFiles []entry
	protects    []PlanEntry
	hides       []PlanEntry

	// Filled by the patterns step: the hide and protect entries with
	// their variables expanded, and what their patterns matched.
	hideList, protectList []expandedEntry
	// hookCreated are files that hooks would run which do not exist
	// (auditPointers): audited as the created patterns are.
	hookCreated []createdPattern
	truncations []truncation // warnTruncations
	globbed     map[globPattern]globResult
	// lstat remembers this resolution's host lookups (resolvePath).
	lstat lstatCache
}

// expandedEntry is a hide or protect entry after expandEach: Path is
// absolute, or relative to the current directory.
type expandedEntry struct {
	entry
	written string // the entry as written: what a "!" removal names
	// pattern: the entry as written has a wildcard; Path is then a
	// pattern whose variable values and current directory are escaped
	// (escapeGlob), else the path itself.
	pattern bool
}

// writtenPattern reports whether the entry s, as written, is a pattern:
// a wildcard outside its variables (whose values are escaped into it).
func writtenPattern(s string) bool {
	if !strings.ContainsAny(s, "*?[") {
		return false // expanding "v" for each variable adds none
	}
	v, err := expand(s, neutralVars())
	if err != nil {
		v = s
	}
	return strings.ContainsAny(v, "*?[")
}

// neutralVars gives every variable the value "v": what an entry is as
// written, whatever the variables hold.
var neutralVars = sync.OnceValue(func() vars {
	neutral := vars{}
	for _, k := range Variables {
		neutral[k] = "v"
	}
	return neutral
})

type mountItem struct {
	m     sandbox.Mount
	why   string
	rank  int // layer precedence
	order int // position across lists
	at    origin
}

func (r *resolver) warn(w Warning) { r.res.Warnings = append(r.res.Warnings, w) }

// expandAt expands variables in s. ok is false when the entry must be
// left out: a known variable is unset (a note), or it refers to
// $NSBOX_WORKSPACE and there is no workspace (silently: such entries only
// apply to a workspace). An unknown variable is an error.
func (r *resolver) expandAt(s string, at origin) (string, bool, error) {
	v, err := expand(s, r.vars)
	var skip *errSkip
	switch {
	case errors.As(err, &skip) && skip.unknown:
		// Invariant: a path with a variable nsbox does not know stops
		// the run. Skipped, an editor's "${workspaceFolder}" copied into
		// another's MCP config left the workspace at the current
		// directory, read-only, or dropped a --rw, a hide or a protect
		// the user meant to have.
		return "", false, at.err(ErrUnknownVariable, "%s is not a variable nsbox knows (known: $%s); write $$ for a literal $", "$"+skip.name, strings.Join(sortedVars(), ", $"))
	case errors.As(err, &skip):
		if skip.name == "NSBOX_WORKSPACE" {
			return "", false, nil
		}
		if skip.name == "NSBOX_RW" {
			r.warn(at.warn(false, "$NSBOX_RW (each writable directory) is only meaningful in hide and protect entries; entry skipped"))
			return "", false, nil
		}
		// A known variable that is unset here ($XDG_RUNTIME_DIR, $HOME
		// for a daemon) is normal (a note).
		r.warn(at.warn(true, "%s", skip.Error()))
		return "", false, nil
	case err != nil:
		return "", false, at.err(err, "%v", err)
	}
	return v, true, nil
}

// sortMounts orders mounts parents first, so that a bind inside another
// one lands on top of it; equal depths keep their order.
func (r *resolver) sortMounts() {
	sort.SliceStable(r.mounts, func(a, b int) bool { return depth(r.mounts[a].m.Dest) < depth(r.mounts[b].m.Dest) })
}

// whereText names an origin for the plan ("--rw", "profile workspace").
func (r *resolver) whereText(at origin) string {
	if at.layer == nil {
		return ""
	}
	if at.key == "" {
		return "the policy file itself"
	}
	switch at.layer.Kind {
	case KindFlags:
		_, _, key := at.layer.where(at.key)
		return key
	case KindProfile:
		return fmt.Sprintf("profile %s, %s", at.layer.Profile, stripIndex(at.key))
	case KindDefaults:
		return "built-in default"
	}
	// Only here the line: finding it reads the file's text again
	// (keyPositions), which a run of the built-in profiles never needs.
	src, line, _ := at.layer.where(at.key)
	if line > 0 {
		return fmt.Sprintf("%s:%d", src, line)
	}
	return src
}

func (r *resolver) plan() error {
	// The plan: binds, tmpfs and pins (parents first), then protections,
	// then hides (last, on top of everything).
	for _, it := range r.mounts {
		r.res.Plan = append(r.res.Plan, PlanEntry{Mount: it.m, Why: it.why})
	}
	hidden := make(map[string]bool, len(r.hides))
	for _, h := range r.hides {
		hidden[h.Mount.Dest] = true
	}
	for _, p := range r.protects {
		// Invariant: a hidden path is not protected as well. Its cover
		// is a read-only mount point already, which the sandbox can
		// neither write nor replace; protected too, a hidden file
		// renamed away during the build got a placeholder at its old
		// name, the hide covered that, and the file ran visible at its
		// new name instead of failing the build (a .env both hidden and
		// matched by a protect pattern, review 58).
		if hidden[p.Mount.Dest] && !p.Mount.NoFollow {
			continue
		}
		r.res.Plan = append(r.res.Plan, p)
	}
	r.res.Plan = append(r.res.Plan, r.hides...)
	for _, pe := range r.res.Plan {
		// Invariant: every path of the plan reaches the worker as it is.
		// The plan crosses as JSON, which turns bytes that are not UTF-8
		// into U+FFFD; a hide of "sub\xff/.env" would name no file
		// there and be skipped, and an earlier sandbox can rename a
		// directory to such a name to expose the secret in it.
		for _, p := range []string{pe.Source, pe.Dest} {
			if !utf8.ValidString(p) {
				return fmt.Errorf("%s (%s): the path is not valid UTF-8, which nsbox cannot pass to the sandbox unchanged; rename it", strconv.QuoteToASCII(p), strings.ToValidUTF8(pe.Why, "\uFFFD"))
			}
		}
		r.res.Policy.Mounts = append(r.res.Policy.Mounts, pe.Mount)
	}
	return nil
}

func (r *resolver) limits() error {
	l := &r.res.Policy.Limits
	m := r.m
	// Every value was checked with its layer; parsing cannot fail here.
	if m.memory.set {
		l.Memory, _ = ParseSize(m.memory.v)
	}
	if m.pids != nil {
		l.Pids = *m.pids
	}
	if m.cpu != nil {
		l.CPU = *m.cpu
	}
	if m.timeout.set {
		l.Time, _ = ParseDuration(m.timeout.v)
	}
	if m.tmpSize.set {
		l.Tmp, _ = ParseSize(m.tmpSize.v)
	}
	return nil
}

func (r *resolver) tools() error {
	t := &r.res.Policy.Tools
	for _, b := range r.m.blocked {
		t.BlockedCommands = append(t.BlockedCommands, b.v)
	}
	t.BlockedCommands = dedupStrings(t.BlockedCommands)
	if r.m.toolTimeout.set {
		t.Timeout, _ = ParseDuration(r.m.toolTimeout.v)
	}
	if r.m.toolMaxOutput.set {
		t.MaxOutput, _ = ParseSize(r.m.toolMaxOutput.v)
	}
	if r.m.toolMaxResults != nil {
		t.MaxResults = *r.m.toolMaxResults
	}
	t.ProtectedPatterns = r.toolPatterns()
	return nil
}

func (r *resolver) hostAPIs() error {
	var out []string
	known := map[string]bool{}
	for _, k := range r.h.KnownHostAPIs {
		known[k] = true
	}
	for _, a := range r.m.hostAPIs {
		if l := a.at.layer; l != nil && !l.builtin() && l.Kind != KindFlags {
			// A policy file's choice, which the command line does not
			// show (review 21): the sandbox reaches the host through it.
			r.warn(a.at.warn(false, "lets the sandbox call the host API %s", a.v))
		}
		api, method, _ := strings.Cut(a.v, ".")
		if method != "*" {
			if len(known) > 0 && !known[a.v] {
				r.warn(a.at.warn(false, "%s is not a host API method nsbox knows; calls to it will be refused", a.v))
			}
			out = append(out, a.v)
			continue
		}
		n := 0
		for _, k := range r.h.KnownHostAPIs {
			if strings.HasPrefix(k, api+".") {
				out = append(out, k)
				n++
			}
		}
		if n == 0 {
			return a.at.err(nil, "%s matches no known host API method (known: %s)", a.v, strings.Join(r.h.KnownHostAPIs, ", "))
		}
	}
	sort.Strings(out)
	r.res.Policy.HostAPIs = dedupStrings(out)
	return nil
}

func (r *resolver) options() error {
	p, m := &r.res.Policy, r.m
	p.Network = sandbox.Network(m.network.v)
	if p.Network == "" {
		p.Network = sandbox.NetworkNone
	}
	p.Hostname = m.hostname.v
	p.AllowPrivileged = m.allowPrivileged.v
	p.AllowUserns = m.allowUserns.v
	p.AllowToolRegistration = m.allowToolReg.v
	p.Workspace = r.res.Workspace
	r.res.Backend = m.backend.v
	if r.res.Backend == "" {
		r.res.Backend = BackendAuto
	}
	r.res.BackendFallback = m.backendFallback.v
	if p.AllowPrivileged {
		r.warn(m.allowPrivileged.at.warn(false, "commands keep every capability inside the sandbox's user namespace (mount, network administration, ...)"))
	}
	if p.AllowUserns {
		r.warn(m.allowUserns.at.warn(false, "commands may create nested user namespaces, a large kernel attack surface"))
	}
	if r.res.BackendFallback && r.res.Backend == BackendAuto {
		r.warn(m.backendFallback.at.warn(true, "when no sandbox can be built here, commands run WITHOUT one"))
	}
	return nil
}

func (r *resolver) validate() error {
	if err := r.res.Policy.Validate(); err != nil {
		var pe *sandbox.PolicyError
		if errors.As(err, &pe) {
			return &Error{Source: "resolved policy", Key: pe.Field, Msg: pe.Msg, Err: err}
		}
		return &Error{Source: "resolved policy", Msg: err.Error(), Err: err}
	}
	return nil
}

// BackendSettings reads the backend mode and backend_fallback from the
// defaults and the user's config file alone (for `nsbox status`, which
// needs no workspace).
func BackendSettings(h Host) (mode string, fallback bool, err error) {
	h = h.withDefaults()
	layers := []*Layer{defaultsFor(h)}
	if p := ConfigPath(h); p != "" {
		if _, serr := os.Stat(p); serr == nil || !(errors.Is(serr, fs.ErrNotExist) || implicitUnreachable("", serr)) {
			l, err := LoadLayer(p, KindConfig)
			if err != nil {
				return "", false, err
			}
			layers = append(layers, l)
		}
	}
	for _, l := range layers {
		if err := CheckLayer(l); err != nil {
			return "", false, err
		}
	}
	m := merge(layers)
	return m.backend.v, m.backendFallback.v, nil
}

// implicitUnreachable: the default config path lies under a $HOME this user
// cannot search (sudo -E, setpriv without --reset-env): that is no config
// of this user's, so it is skipped rather than failing every run. A file
// named explicitly is always read, and its errors reported.
func implicitUnreachable(explicit string, err error) bool {
	return explicit == "" && errors.Is(err, fs.ErrPermission)
}

// someNames joins up to max names, and says how many more there are.
func someNames(names []string, max int) string {
	if len(names) <= max {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:max], ", "), len(names)-max)
}
