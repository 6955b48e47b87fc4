package policy

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/nsbox/nsbox/pkg/sandbox"
	"github.com/nsbox/nsbox/pkg/seccomp"
	"golang.org/x/sys/unix"
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
			Protect: []PathEntry{{Path: "$NSBOX_CONFIG", Dir: true}, {Path: "$NSBOX_DATA", Dir: true}},
			Hide:    []PathEntry{{Path: "$NSBOX_DATA", Dir: true}},
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
	layers = []*Layer{Defaults()}
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
	r, err := newResolver(h, layers)
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
}

// Load resolves in full what Peek previewed, with the layers Peek read:
// profile and config files are not read twice.
func (pv *Preview) Load() (*Result, error) {
	res, err := Resolve(pv.h, pv.layers)
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
	r, err := newResolver(h, layers)
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
	pv := &Preview{Backend: r.res.Backend, BackendFallback: r.res.BackendFallback, h: h, layers: layers, ref: ref}
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
		// Before protect: a seccomp profile inside a writable bind is
		// protected like a policy file.
		{"seccomp", r.seccomp},
		// One walk for every pattern of both lists (globAll).
		{"patterns", r.patterns},
		{"protect", r.protect},
		{"hide", r.hide},
		{"plan", r.plan},
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

func newResolver(h Host, layers []*Layer) (*resolver, error) {
	h = h.withDefaults()
	if !filepath.IsAbs(h.Cwd) {
		return nil, &Error{Msg: fmt.Sprintf("the current directory %q is not absolute", h.Cwd)}
	}
	for _, l := range layers {
		if err := CheckLayer(l); err != nil {
			return nil, err
		}
	}
	r := &resolver{h: h, layers: layers, m: merge(layers), res: &Result{}}
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
	home   string // $HOME resolved, "" when unknown

	mounts  []mountItem // binds, tmpfs and pins, sorted by depth
	rwRoots []string    // writable bind sources that are directories ($NSBOX_RW)
	// policyFiles are this run's policy files that lie in writable binds.
	policyFiles []entry
	protects    []PlanEntry
	hides       []PlanEntry

	// Filled by the patterns step: the hide and protect entries with
	// their variables expanded, and what their patterns matched.
	hideList, protectList []expandedEntry
	globbed               map[globPattern]globResult
}

// expandedEntry is a hide or protect entry after expandEach: Path is
// absolute, or relative to the current directory.
type expandedEntry struct {
	entry
	written string // the entry as written: what a "!" removal names
}

type mountItem struct {
	m     sandbox.Mount
	why   string
	rank  int // layer precedence
	order int // position across lists
	at    origin
}

func (r *resolver) warn(w Warning) { r.res.Warnings = append(r.res.Warnings, w) }

// expandAt expands variables in s. ok is false when the entry must be
// left out: a variable is unknown or unset (a warning), or it refers to
// $NSBOX_WORKSPACE and there is no workspace (silently: such entries only
// apply to a workspace).
func (r *resolver) expandAt(s string, at origin) (string, bool, error) {
	v, err := expand(s, r.vars)
	var skip *errSkip
	switch {
	case errors.As(err, &skip):
		if skip.name == "NSBOX_WORKSPACE" && !skip.unknown {
			return "", false, nil
		}
		if skip.name == "NSBOX_RW" {
			r.warn(at.warn(false, "$NSBOX_RW (each writable directory) is only meaningful in hide and protect entries; entry skipped"))
			return "", false, nil
		}
		// An unknown variable is a mistake (a warning); a known one that
		// is unset here ($XDG_RUNTIME_DIR, $HOME for a daemon) is normal
		// (a note).
		r.warn(at.warn(!skip.unknown, "%s", skip.Error()))
		return "", false, nil
	case err != nil:
		return "", false, at.err(err, "%v", err)
	}
	return v, true, nil
}

var rwVarRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\$(\{NSBOX_RW\}|NSBOX_RW([^A-Za-z0-9_]|$))`) })

// expandEach expands a hide or protect entry: once, or, when it uses
// $NSBOX_RW, once per writable bind directory.
func (r *resolver) expandEach(s string, at origin) ([]string, error) {
	if !rwVarRE().MatchString(s) {
		v, ok, err := r.expandAt(s, at)
		if !ok {
			return nil, err
		}
		return []string{v}, nil
	}
	var out []string
	for _, root := range r.rwRoots {
		vv := vars{}
		for k, v := range r.vars {
			vv[k] = v
		}
		vv["NSBOX_RW"] = root
		saved := r.vars
		r.vars = vv
		v, ok, err := r.expandAt(s, at)
		r.vars = saved
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, v)
		}
	}
	return out, nil
}

// systemDirs can never be the workspace: making one writable would let the
// sandbox change the host's programs or configuration.
var systemDirs = map[string]bool{
	"/bin": true, "/boot": true, "/dev": true, "/etc": true, "/lib": true, "/lib32": true,
	"/lib64": true, "/libx32": true, "/proc": true, "/run": true, "/sbin": true, "/sys": true,
	"/usr": true, "/usr/bin": true, "/usr/lib": true, "/usr/local": true, "/usr/sbin": true,
	"/usr/share": true, "/var": true, "/var/lib": true, "/home": true, "/tmp": true, "/var/tmp": true,
}

// systemTrees hold the host's programs, configuration and kernel
// interfaces: no directory below them can be the workspace, except below
// userTrees, where users keep sources and removable media.
var (
	systemTrees = []string{"/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/run", "/sbin", "/sys", "/usr"}
	userTrees   = []string{"/usr/src", "/usr/local/src", "/run/media"}
)

// escapesThroughSymlink reports whether a symlink on the way to p points out
// of the directory that holds it (out/cfg -> ~/.config): what an earlier
// sandbox can plant in a tree it could write. A symlink that stays within
// its directory's tree, and the ancestors' own links (/home -> /var/home
// sits in /), are not that.
func escapesThroughSymlink(p string) bool {
	cur := "/"
	for _, name := range splitPath(p) {
		next := filepath.Join(cur, name)
		st, err := os.Lstat(next)
		if err != nil {
			return false
		}
		if st.Mode()&fs.ModeSymlink != 0 {
			t, err := resolvePath(next, "/")
			if err != nil || !within(t.Path, cur) {
				return true
			}
			next = t.Path
		}
		cur = next
	}
	return false
}

// unsafeWritable reports whether p is a directory no writable bind should
// reach by accident: /, a system directory or tree, or the home directory
// (or one holding it).
func (r *resolver) unsafeWritable(p string) bool {
	return p == "/" || systemDirs[p] || inSystemTree(p) || (r.home != "" && (p == r.home || within(r.home, p)))
}

func inSystemTree(p string) bool {
	for _, t := range userTrees {
		if p != t && within(p, t) {
			return false
		}
	}
	for _, t := range systemTrees {
		if within(p, t) {
			return true
		}
	}
	return false
}

func (r *resolver) workspace() error {
	r.vars = r.h.vars("")
	if r.h.Home != "" {
		if rp, err := resolvePath(r.h.Home, "/"); err == nil {
			r.home = rp.Path
		}
	}
	w := r.m.workspace
	if !w.set || w.v == "" {
		return nil
	}
	v, ok, err := r.expandAt(w.v, w.at)
	if !ok {
		return err
	}
	rp, err := resolvePath(v, r.h.Cwd)
	if err != nil {
		return w.at.err(err, "%v", err)
	}
	if rp.Missing > 0 {
		return w.at.err(fs.ErrNotExist, "%s does not exist", rp.Path)
	}
	if st, err := os.Stat(rp.Path); err != nil || !st.IsDir() {
		return w.at.err(nil, "%s is not a directory", rp.Path)
	}
	ws := rp.Path
	if ws == "/" {
		if w.at.layer.Kind == KindFlags {
			return w.at.err(ErrUnsafeWorkspace, "/ cannot be the workspace: the whole host would be writable")
		}
		// Invariant: "/" is never made writable by a default. Run from /,
		// the workspace profile has no workspace at all.
		r.warn(w.at.warn(true, "the current directory is /: no workspace; nothing is writable but explicit --rw paths"))
		return nil
	}
	if msg := unsafeWorkspace(ws, r.home, r.h.TmpDir, "run nsbox from a project directory, choose one with --workspace DIR, or use --profile strict"); msg != "" {
		return w.at.err(ErrUnsafeWorkspace, "%s", msg)
	}
	r.res.Workspace = ws
	r.vars["NSBOX_WORKSPACE"] = ws
	return nil
}

// unsafeWorkspace says why ws (resolved) cannot be a workspace, ending with
// advice, or returns "" when it can. home is resolved ("" when unknown).
func unsafeWorkspace(ws, home, tmpDir, advice string) string {
	// Invariant: the workspace never covers $HOME (credentials, startup
	// files, ~/.config) or a system directory.
	switch {
	case home != "" && ws == home:
		return fmt.Sprintf("%s is your home directory and cannot be the workspace: making it writable would expose your credentials and shell startup files; %s", ws, advice)
	case home != "" && within(home, ws):
		return fmt.Sprintf("%s contains your home directory and cannot be the workspace; %s", ws, advice)
	case systemDirs[ws] || ws == filepath.Clean(tmpDir):
		return fmt.Sprintf("%s is a system directory and cannot be the workspace; %s", ws, advice)
	case inSystemTree(ws):
		// Invariant: nothing below the host's programs or configuration
		// is writable by default either: as root, a workspace in
		// /etc/systemd/system would let the sandbox add a service.
		return fmt.Sprintf("%s is inside a system directory and cannot be the workspace; %s (or, deliberately, --profile strict --rw %s)", ws, advice, ws)
	}
	return ""
}

// CheckWorkspace refuses dir as a writable working directory for the same
// reasons a workspace is refused: /, the home directory or one holding it,
// a system directory or a directory below one. (nsbox script --workdir.)
func CheckWorkspace(h Host, dir string) error {
	h = h.withDefaults()
	rp, err := resolvePath(dir, h.Cwd)
	if err != nil {
		return err
	}
	home := ""
	if h.Home != "" {
		if hp, err := resolvePath(h.Home, "/"); err == nil {
			home = hp.Path
		}
	}
	if rp.Path == "/" {
		return fmt.Errorf("%w: / cannot be the workspace: the whole host would be writable", ErrUnsafeWorkspace)
	}
	if msg := unsafeWorkspace(rp.Path, home, h.TmpDir, "use a project directory"); msg != "" {
		return fmt.Errorf("%w: %s", ErrUnsafeWorkspace, msg)
	}
	return nil
}

func (r *resolver) cwdStep() error {
	p := &r.res.Policy
	c := r.m.cwd
	if c.set && c.v != "" {
		v, ok, err := r.expandAt(c.v, c.at)
		if err != nil {
			return err
		}
		if ok {
			if !filepath.IsAbs(v) {
				return c.at.err(nil, "%q must be an absolute path (the working directory inside)", c.v)
			}
			p.Cwd = filepath.Clean(v)
			return nil
		}
	}
	if r.res.Workspace != "" {
		p.Cwd = r.res.Workspace
		return nil
	}
	// Kept when visible inside; the worker falls back to / when not.
	p.Cwd = r.h.Cwd
	return nil
}

func (r *resolver) hostDirs() error {
	if !r.m.hostDirsSet {
		return nil
	}
	dirs := []string{}
	for _, d := range r.m.hostDirs {
		v, ok, err := r.expandAt(d.v, d.at)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if !filepath.IsAbs(v) {
			v = filepath.Join(r.h.Cwd, v)
		}
		v = filepath.Clean(v)
		if v == "/" {
			if len(r.m.hostDirs) > 1 {
				return d.at.err(nil, `"/" (the whole host root) cannot be combined with other host_dirs`)
			}
			return nil // the whole root
		}
		// The last component stays as written: a top-level symlink such as
		// /bin -> usr/bin is recreated inside as a symlink.
		parent, err := resolvePath(filepath.Dir(v), "/")
		if err != nil {
			return d.at.err(err, "%v", err)
		}
		v = filepath.Join(parent.Path, filepath.Base(v))
		if _, err := os.Lstat(v); err != nil {
			r.warn(d.at.warn(true, "%s does not exist; skipped", v))
			continue
		}
		dirs = append(dirs, v)
	}
	sort.Strings(dirs)
	r.res.Policy.HostDirs = dedupStrings(dirs)
	return nil
}

func depth(p string) int {
	if p == "/" {
		return 0
	}
	return strings.Count(p, "/")
}

func (r *resolver) binds() error {
	var cands []mountItem
	order := 0
	add := func(it mountItem) {
		it.order = order
		order++
		cands = append(cands, it)
	}
	bind := func(e entry, ro bool, why string) error {
		src, ok, err := r.expandAt(e.Path, e.at)
		if !ok {
			return err
		}
		rp, err := resolvePath(src, r.h.Cwd)
		if err != nil {
			return e.at.err(err, "%v", err)
		}
		dest := rp.Path
		if e.Dest != "" {
			d, ok, err := r.expandAt(e.Dest, e.at)
			if !ok {
				return err
			}
			if !filepath.IsAbs(d) {
				return e.at.err(nil, "destination %q must be an absolute path", d)
			}
			dest = filepath.Clean(d)
		}
		if rp.Missing > 0 || rp.NotDir {
			if e.Try {
				r.warn(e.at.warn(true, "%s does not exist; optional entry skipped", rp.Path))
				return nil
			}
			return e.at.err(fs.ErrNotExist, "mount %s on %s: no such file or directory", rp.Path, dest)
		}
		if reservedDest[dest] {
			return e.at.err(nil, "destination %s is managed by nsbox and cannot be replaced", dest)
		}
		if !ro {
			// Invariant: a symlink never turns a writable bind into one of
			// a system directory or the home directory. An earlier
			// sandbox can plant out/run2 -> /etc in a writable tree; a
			// later --output out/run2 would bind /etc read-write. Named
			// by its real path, such a bind stays the caller's choice.
			lit := src
			if !filepath.IsAbs(lit) {
				lit = filepath.Join(r.h.Cwd, lit)
			}
			// The cheap test first: the walk of lit's components only
			// for a bind that lands somewhere it must not be led to.
			if (r.unsafeWritable(rp.Path) || (r.home != "" && within(rp.Path, r.home))) && escapesThroughSymlink(filepath.Clean(lit)) {
				return e.at.err(ErrUnsafeWorkspace, "%s leads through a symlink out of its directory to %s, in a system directory or your home, which nothing should make writable by accident; give the real path if you mean it", src, rp.Path)
			}
		}
		add(mountItem{m: sandbox.Mount{Kind: sandbox.MountBind, Source: rp.Path, Dest: dest, ReadOnly: ro}, why: why, rank: e.at.rank, at: e.at})
		return nil
	}
	for _, e := range r.m.ro {
		if err := bind(e, true, "read-only bind ("+r.whereText(e.at)+")"); err != nil {
			return err
		}
	}
	for _, e := range r.m.rw {
		why := "read-write bind (" + r.whereText(e.at) + ")"
		if src, err := expand(e.Path, r.vars); err == nil && r.res.Workspace != "" && src == r.res.Workspace {
			why = "the workspace, read-write (" + r.whereText(e.at) + ")"
		}
		if err := bind(e, false, why); err != nil {
			return err
		}
	}
	for _, e := range r.m.tmpfs {
		d, ok, err := r.expandAt(e.Path, e.at)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if !filepath.IsAbs(d) {
			return e.at.err(nil, "%q must be an absolute path", d)
		}
		var size int64
		if e.Size != "" {
			size, _ = ParseSize(e.Size) // checked with the layer
		}
		d = filepath.Clean(d)
		if reservedDest[d] {
			return e.at.err(nil, "%s is managed by nsbox and cannot be replaced", d)
		}
		add(mountItem{m: sandbox.Mount{Kind: sandbox.MountTmpfs, Dest: d, Size: size}, why: "empty tmpfs (" + r.whereText(e.at) + ")", rank: e.at.rank, at: e.at})
	}
	for _, io := range []struct {
		v    sval
		dest string
		ro   bool
	}{{r.m.input, "/input", true}, {r.m.output, "/output", false}} {
		if !io.v.set || io.v.v == "" {
			continue
		}
		if err := bind(entry{PathEntry: PathEntry{Path: io.v.v, Dest: io.dest}, at: io.v.at}, io.ro, map[bool]string{true: "input, read-only", false: "output, read-write"}[io.ro]+" ("+r.whereText(io.v.at)+")"); err != nil {
			return err
		}
	}
	// One mount per destination: the entry from the higher layer wins
	// (flags over the profile), and within a layer the later one.
	best := map[string]int{}
	for i, c := range cands {
		j, ok := best[c.m.Dest]
		if !ok || c.rank > cands[j].rank || (c.rank == cands[j].rank && c.order > cands[j].order) {
			best[c.m.Dest] = i
		}
	}
	for i, c := range cands {
		if best[c.m.Dest] == i {
			r.mounts = append(r.mounts, c)
		}
	}
	r.sortMounts()
	// The real path of each policy file, resolved once for all the binds.
	files := make([]string, len(r.layers))
	for i, l := range r.layers {
		files[i], _ = r.policyFile(l)
	}
	for _, it := range r.mounts {
		if it.m.Kind != sandbox.MountBind || it.m.ReadOnly {
			continue
		}
		if st, err := os.Stat(it.m.Source); err == nil && st.IsDir() {
			r.rwRoots = append(r.rwRoots, it.m.Source)
		}
		// Invariant: a policy file used for this run is read-only inside,
		// even when it lies in a writable directory: it decides the next
		// sandbox's policy.
		for i, l := range r.layers {
			if f := files[i]; f != "" && within(f, it.m.Source) {
				r.policyFiles = append(r.policyFiles, entry{PathEntry: PathEntry{Path: f}, at: origin{l, "", it.rank}})
				r.warn(Warning{Source: l.Name, Msg: fmt.Sprintf("this policy file is inside %s, which the sandbox can write; it is kept read-only inside", it.m.Source), Note: true})
			}
		}
	}
	sort.Strings(r.rwRoots)
	r.rwRoots = dedupStrings(r.rwRoots)
	for _, it := range r.mounts {
		if it.m.Kind == sandbox.MountBind && !it.m.ReadOnly && r.home != "" && within(r.home, it.m.Source) {
			r.warn(it.at.warn(false, "makes %s writable, which holds your home directory: shell startup files and nsbox's config stay read-only, other startup files (editor, git, systemd user units) do not", it.m.Source))
		}
	}
	return nil
}

// policyFile is the real path of the file a profile or config layer was
// read from. Bind sources are real paths (symlinks resolved), and so must
// be what is compared with them: the file named through a symlinked
// directory (a workspace reached as /home/u/p where /home -> /var/home, a
// shell's $PWD) is still inside the writable bind, and a sandbox that could
// write it would choose the next run's policy.
func (r *resolver) policyFile(l *Layer) (string, bool) {
	if (l.Kind != KindProfile && l.Kind != KindConfig) || !filepath.IsAbs(l.Name) {
		return "", false
	}
	rp, err := resolvePath(l.Name, "/")
	if err != nil || rp.Missing > 0 {
		return filepath.Clean(l.Name), true
	}
	return rp.Path, true
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
	src, line, key := at.layer.where(at.key)
	if at.key == "" {
		return "the policy file itself"
	}
	switch at.layer.Kind {
	case KindFlags:
		return key
	case KindProfile:
		return fmt.Sprintf("profile %s, %s", at.layer.Profile, stripIndex(at.key))
	case KindDefaults:
		return "built-in default"
	}
	if line > 0 {
		return fmt.Sprintf("%s:%d", src, line)
	}
	return src
}

// Providers of an inside path: a mount index, or one of these.
const (
	provHostRoot = -1 // the read-only host root (same path on the host)
	provFresh    = -2 // nsbox's own /proc, /dev, /tmp, /run, or nothing
)

// freshDirs are nsbox's own; the host's are never visible there.
var freshDirs = []string{"/proc", "/dev", "/tmp", "/run"}

// provider returns what the sandbox shows at inside path q: the deepest
// mount covering it, else the host root, else nothing of the host.
func (r *resolver) provider(q string) int {
	best, bestDepth := provFresh, -1
	for i, it := range r.mounts {
		if within(q, it.m.Dest) && depth(it.m.Dest) >= bestDepth {
			best, bestDepth = i, depth(it.m.Dest)
		}
	}
	if best >= 0 {
		return best
	}
	for _, f := range freshDirs {
		if within(q, f) {
			return provFresh
		}
	}
	if r.res.Policy.HostDirs == nil {
		return provHostRoot
	}
	for _, d := range r.res.Policy.HostDirs {
		if within(q, d) {
			return provHostRoot
		}
	}
	return provFresh
}

// insideLocations lists where host path h is visible inside: through the
// host root and through every bind of a directory above it. writable keeps
// only read-write binds.
func (r *resolver) insideLocations(h string, writable bool) []struct {
	q    string
	prov int
} {
	var out []struct {
		q    string
		prov int
	}
	if !writable && r.provider(h) == provHostRoot {
		out = append(out, struct {
			q    string
			prov int
		}{h, provHostRoot})
	}
	for i, it := range r.mounts {
		if it.m.Kind != sandbox.MountBind || !within(h, it.m.Source) || (writable && it.m.ReadOnly) {
			continue
		}
		q := rebase(h, it.m.Source, it.m.Dest)
		if r.provider(q) == i {
			out = append(out, struct {
				q    string
				prov int
			}{q, i})
		}
	}
	return out
}

func (r *resolver) protect() error {
	pins := map[string]bool{}
	for _, it := range r.mounts {
		pins[it.m.Dest] = true // already mount points
	}
	seen := map[string]bool{}
	var newPins []mountItem
	for _, e := range r.policyFiles {
		if err := r.protectOne(e, e.Path, pins, seen, &newPins); err != nil {
			return err
		}
	}
	// What the scans of .git directories may visit, all together: the
	// trees they read are the sandbox's to write.
	gitBudget := maxGitScanDirs
	var repoTrees []string       // the work trees of the repositories protected
	scanned := map[string]bool{} // .git paths gitLinked read: once each
	for _, x := range r.protectList {
		e, paths := x.entry, []string{x.Path}
		if p := r.absolute(x.Path); hasGlob(p) {
			// The repositories' pattern goes as deep as the git audit
			// looks: what it trusts after the run must have been
			// protected during it.
			tmpl := globPattern{}
			if _, ok := bareRepoPattern(x.Path); ok {
				tmpl.maxDepth = auditMaxDepth
			}
			g, ok, err := r.globEntry(x, p, tmpl, "protect")
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			paths = g.matches
			if head, ok := bareRepoPattern(x.Path); ok {
				bare, err := r.bareRepos(head)
				if err != nil {
					return e.at.err(err, "%v", err)
				}
				paths = append(paths, bare...)
				// The checked-out submodules the indexes record, also
				// where the walk does not go (node_modules/x, target/):
				// git status at the top enters them.
				subs, present, err := r.submoduleCheckouts(g.matches)
				if err != nil {
					return e.at.err(err, "%v", err)
				}
				for _, sm := range present {
					if _, err := os.Lstat(filepath.Join(sm, ".git")); err == nil {
						paths = append(paths, filepath.Join(sm, ".git"))
					}
				}
				if r.res.GitAudit == nil {
					withLinks, _, err := r.globAs(p, globPattern{links: true, maxDepth: auditMaxDepth})
					if err != nil {
						return e.at.err(err, "%v", err)
					}
					r.res.GitAudit = r.newGitAudit(filepath.Dir(filepath.Dir(head)), withLinks.matches, bare, g.unlisted, subs)
				}
			}
			// Fail closed, as for hides: a sandbox could chmod a
			// directory the walk cannot look into back open and
			// write in it; such a directory is read-only whole.
			for _, d := range g.unlisted {
				if r.holdsRoot(d) {
					return e.at.err(fs.ErrPermission, "cannot look into %s (permission denied) for %s, and it holds a writable directory: make it readable (chmod u+rx %s)", d, e.Path, d)
				}
			}
			if len(g.unlisted) > 0 {
				r.warn(e.at.warn(false, "cannot look into %s (permission denied) to match %s: read-only whole", someOf(g.unlisted), e.Path))
				paths = append(paths, g.unlisted...)
			}
		}
		for _, p := range paths {
			if e.Dir && hasGlob(x.Path) {
				if st, err := os.Lstat(p); err != nil || !st.IsDir() {
					continue // "PATTERN/" matches directories only
				}
			}
			if err := r.protectOne(e, p, pins, seen, &newPins); err != nil {
				return err
			}
			p = filepath.Clean(p)
			if filepath.Base(p) != ".git" && gitDirLayout(p) {
				// A bare repository: hooks run in it.
				repoTrees = append(repoTrees, p)
				if err := r.protectPointers(e, filepath.Join(p, "config"), gitConfigPointers(filepath.Join(p, "config"), p, r.home, r.rwRoots, nil), pins, seen, &newPins); err != nil {
					return err
				}
			}
			if filepath.Base(p) == ".git" && !scanned[p] {
				scanned[p] = true
				more, err := r.gitLinked(p, &gitBudget)
				if err != nil {
					return e.at.err(err, "%v", err)
				}
				for _, g := range more {
					if err := r.protectOne(e, g, pins, seen, &newPins); err != nil {
						return err
					}
				}
				// What the repository's config points git to.
				repoTrees = append(repoTrees, filepath.Dir(p))
				gitDirs := more
				if st, err := os.Lstat(p); err == nil && st.IsDir() {
					gitDirs = append([]string{p}, more...)
				}
				for _, d := range gitDirs {
					if st, err := os.Lstat(d); err != nil || !st.IsDir() {
						continue
					}
					for _, name := range []string{"config", "config.worktree"} {
						ptrs := gitConfigPointers(filepath.Join(d, name), filepath.Dir(p), r.home, r.rwRoots, nil)
						if err := r.protectPointers(e, filepath.Join(d, name), ptrs, pins, seen, &newPins); err != nil {
							return err
						}
					}
				}
			}
			// Invariant: a run's protections are bounded: each is a
			// mount (and pins above it) the worker makes at every
			// start, from a tree a sandbox may have filled with decoy
			// repositories.
			if n := len(r.protects) + len(newPins); n > maxProtectMounts {
				var got []string
				for _, pe := range r.protects {
					got = append(got, pe.Dest)
				}
				return e.at.err(nil, "protecting %s takes more than %d mounts (%s); if a sandbox made these, remove them, else protect fewer paths", e.Path, maxProtectMounts, someOf(got[len(got)-min(len(got), 3):]))
			}
		}
	}
	// The user's own git configs may point every repository to a hooks
	// directory or an included file in a writable directory: those are
	// protected with the entries that protect a .git.
	for _, x := range r.protectList {
		if filepath.Base(filepath.Clean(x.Path)) != ".git" {
			continue
		}
		var files []string
		if r.h.ConfigHome != "" {
			files = append(files, filepath.Join(r.h.ConfigHome, "git", "config"))
		}
		if r.home != "" {
			files = append(files, filepath.Join(r.home, ".gitconfig"))
		}
		files = append(files, "/etc/gitconfig")
		for _, f := range files {
			// A relative core.hooksPath there counts for every
			// repository: each writable root, and each repository
			// found in them.
			trees := dedupStrings(append(append([]string(nil), r.rwRoots...), repoTrees...))
			if err := r.protectPointers(x.entry, f, gitConfigPointers(f, "", r.home, r.rwRoots, trees), pins, seen, &newPins); err != nil {
				return err
			}
		}
		break
	}
	// Invariant: a writable root that is itself a git directory (a bare
	// repository given with --rw) keeps what git runs read-only, as its
	// .git would be: its worktrees, also outside the sandbox, run its
	// config and hooks. Done for the entries that protect something of
	// the root's .git ("$NSBOX_RW/.git/", its hooks or config).
	for _, root := range r.rwRoots {
		if !gitDirLayout(root) {
			continue
		}
		for _, x := range r.protectList {
			if !within(filepath.Clean(r.absolute(x.Path)), filepath.Join(root, ".git")) {
				continue
			}
			for _, m := range gitRootMeta {
				mp := filepath.Join(root, m.name)
				if _, err := os.Lstat(mp); err != nil && !m.always {
					continue
				}
				me := x.entry
				me.Dir = m.dir
				if err := r.protectOne(me, mp, pins, seen, &newPins); err != nil {
					return err
				}
			}
			config := filepath.Join(root, "config")
			if err := r.protectPointers(x.entry, config, gitConfigPointers(config, root, r.home, r.rwRoots, nil), pins, seen, &newPins); err != nil {
				return err
			}
			break
		}
	}
	r.mounts = append(r.mounts, newPins...)
	r.sortMounts()
	sort.SliceStable(r.protects, func(a, b int) bool { return depth(r.protects[a].Dest) < depth(r.protects[b].Dest) })
	return nil
}

// bareRepoPattern returns, for a protect pattern of repositories
// ("DIR/**/.git"), the pattern that finds the bare ones by their HEAD
// ("DIR/**/HEAD"), walked with it.
func bareRepoPattern(p string) (string, bool) {
	if dir, ok := strings.CutSuffix(p, "/**/.git"); ok && hasGlob(p) {
		return dir + "/**/HEAD", true
	}
	return "", false
}

// bareRepos returns the bare repositories among the directories that hold
// a file matching head: a HEAD file next to objects/ and refs/ directories,
// not in a .git (those are protected as such). git on the host runs what
// such a repository's config and hooks say for every worktree of it, even
// one outside the workspace, and for every push to it.
func (r *resolver) bareRepos(head string) ([]string, error) {
	g, ok, err := r.globAs(r.absolute(head), globPattern{fileOnly: true, links: true, maxDepth: auditMaxDepth})
	if !ok || err != nil {
		return nil, err
	}
	if g.tooMany {
		return nil, fmt.Errorf("matching %s stopped after %d directories, so the bare repositories beyond cannot be protected; if a sandbox made them, remove them", head, walkMaxDirs)
	}
	var out []string
	for _, m := range g.matches {
		d := filepath.Dir(m)
		if filepath.Base(d) == ".git" || strings.HasSuffix(filepath.Base(d), quarantineSuffix) || r.holdsRoot(d) {
			// A writable directory, or one above it, is never made
			// read-only whole: a sandbox could plant HEAD, objects/
			// and refs/ above a --rw directory to stop the next run's
			// work (a root that is a git directory: gitRoot).
			continue
		}
		if gitDirLayout(d) {
			out = append(out, d)
		}
	}
	return out, nil
}

// protectPointers protects what the git config file points git to (ptrs,
// from gitConfigPointers), when it lies in a writable directory. Those
// paths are looked up only below that directory, and a symlink on the way
// stops the run: the sandbox could point it elsewhere once the run has
// protected its target, and following it could make the host look up a
// path of the sandbox's choosing outside (an automounter's /net/HOST).
func (r *resolver) protectPointers(e entry, config string, ptrs []gitPointer, pins, seen map[string]bool, newPins *[]mountItem) error {
	for _, ptr := range ptrs {
		root := ""
		for _, rw := range r.rwRoots {
			if within(ptr.path, rw) && len(rw) > len(root) {
				root = rw
			}
		}
		if root == "" || ptr.path == root {
			continue // read-only inside, or the whole writable directory
		}
		rel, _ := filepath.Rel(root, ptr.path)
		cur := root
		for _, c := range splitPath(rel) {
			cur = filepath.Join(cur, c)
			st, err := os.Lstat(cur)
			if err != nil {
				break // missing from here: a placeholder keeps it so
			}
			if st.Mode()&os.ModeSymlink != 0 {
				return e.at.err(nil, "%s points git to %s through the symlink %s, which a sandbox could point elsewhere: point it to the real path, or remove the symlink if a sandbox made it", config, ptr.path, cur)
			}
		}
		pe := e
		pe.Dir = ptr.dir
		if err := r.protectOne(pe, ptr.path, pins, seen, newPins); err != nil {
			return err
		}
	}
	return nil
}

// submoduleCheckouts returns the checkouts of the gitlinks (submodules)
// that the index of each .git directory in gits records (all), and those
// of them that exist as directories (present). They are looked up by fd
// below their writable root, never through a symlink (git refuses a
// submodule path beyond one; a symlink on the way was put there by a
// sandbox, and is an error).
func (r *resolver) submoduleCheckouts(gits []string) (all, present []string, err error) {
	for _, g := range gits {
		if st, err := os.Lstat(g); err != nil || !st.IsDir() {
			continue
		}
		index := filepath.Join(g, "index")
		sha256 := strings.Contains(strings.ToLower(string(readSmall(filepath.Join(g, "config"), maxSubmoduleConfig))), "objectformat = sha256")
		for _, l := range gitlinks(index, sha256) {
			sm := filepath.Join(filepath.Dir(g), filepath.FromSlash(l))
			fd, _, err := r.openBeneath(index, sm)
			if err != nil {
				return nil, nil, err
			}
			all = append(all, sm)
			if fd >= 0 {
				unix.Close(fd)
				present = append(present, sm)
			}
			if len(all) > maxProtectMounts {
				return nil, nil, fmt.Errorf("%s records more than %d submodules; if a sandbox made them, remove them", index, maxProtectMounts)
			}
		}
	}
	return all, present, nil
}

// holdsRoot reports whether d is a writable root or above one.
func (r *resolver) holdsRoot(d string) bool {
	for _, rw := range r.rwRoots {
		if within(rw, d) {
			return true
		}
	}
	return false
}

// gitRootMeta are the entries of a git directory that make git on the host
// run code or take settings from it; always: protected also when missing.
var gitRootMeta = []struct {
	name        string
	dir, always bool
}{
	{"config", false, true}, {"hooks", true, true}, {"config.worktree", false, true},
	{"info", true, true}, {"worktrees", true, true}, {"modules", true, true},
	{"remotes", true, true}, {"branches", true, true},
	// Not created when missing: an empty commondir breaks git on the
	// host for the run's length. One the sandbox creates is renamed by
	// the git audit.
	{"commondir", false, false},
}

// someOf names a few of paths, and how many there are.
func someOf(paths []string) string {
	if len(paths) <= 3 {
		return strings.Join(paths, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(paths[:3], ", "), len(paths)-3)
}

// Bounds of what protect reads of a repository the sandbox may have
// written before, and of what it protects.
const (
	maxProtectMounts    = 2048 // protected paths and their pins, in all
	maxGitScanDirs      = 8192 // directories the .git scans visit, in all
	maxSubmodules       = 256
	maxSubmoduleDepth   = 8
	maxSubmoduleConfig  = 64 << 10
	maxGitfile          = 4 << 10
	submoduleConfigName = "config"
)

// gitLinked returns what the repository at dotGit (a .git directory or
// file) points git on the host to, so that it is protected with it:
//
//   - The .git files of its checked-out submodules. The index records each
//     submodule and git recurses into it (git status runs git in every
//     one); a .git file rewritten to "gitdir: ../evil" would make that git
//     read a config, core.fsmonitor and all, the sandbox wrote.
//   - For a .git file (a worktree, a submodule, --separate-git-dir): the
//     git directory its "gitdir:" names, and the one that directory's
//     commondir names (a worktree's main repository, whose config and
//     hooks git uses). Inside a writable directory they would otherwise be
//     writable: a workspace holding a bare repository and its worktrees.
//
// Only what exists is returned, and every read is bounded (budget counts
// the directories visited, across calls). The paths a .git file names are
// the sandbox's to choose: see gitTarget.
func (r *resolver) gitLinked(dotGit string, budget *int) ([]string, error) {
	st, err := os.Lstat(dotGit)
	if err != nil {
		return nil, nil
	}
	if st.Mode().IsRegular() {
		var out []string
		dir, err := r.gitTarget(dotGit, "gitdir:", dotGit)
		if dir == "" || err != nil {
			return nil, err
		}
		out = append(out, dir)
		common, err := r.gitTarget(filepath.Join(dir, "commondir"), "", dotGit)
		if common != "" {
			out = append(out, common)
		}
		return out, err
	}
	if !st.IsDir() {
		return nil, nil
	}
	return r.submoduleGitfiles(dotGit, budget)
}

// gitTarget reads the one-line file at file (a .git file, "gitdir: DIR",
// or a commondir, "DIR") and returns DIR as a host path when it is a git
// directory inside the writable directory that holds file; "" when it
// names anything else (outside, it is read-only inside anyway) or a
// directory above dotGit, the .git file the chain started from.
//
// Invariant: a path the sandbox wrote is looked up only below a writable
// root, by fd, never through a symlink and never past the root (openat2
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_XDEV): a lookup on the
// host of /net/HOST/... could have an automounter act for a sandbox that
// has no network. A symlink on the way is an error, not a skip: the
// sandbox could point it elsewhere after the run has protected its
// target. A directory above file or above a writable root is never
// protected this way: a planted "gitdir: .." would make the whole
// workspace read-only.
func (r *resolver) gitTarget(file, prefix, dotGit string) (string, error) {
	line, _, _ := strings.Cut(string(readSmall(file, maxGitfile)), "\n")
	v, ok := strings.CutPrefix(line, prefix)
	v = strings.TrimSpace(v)
	if !ok || v == "" {
		return "", nil
	}
	fd, root, err := r.openBeneath(file, v)
	if fd < 0 || err != nil {
		return "", err
	}
	defer unix.Close(fd)
	// A git directory, as git decides (setup.c is_git_directory): HEAD,
	// and objects of its own or a commondir. Anything else git ignores.
	var st unix.Stat_t
	if unix.Fstatat(fd, "HEAD", &st, unix.AT_SYMLINK_NOFOLLOW) != nil ||
		(unix.Fstatat(fd, "objects", &st, unix.AT_SYMLINK_NOFOLLOW) != nil && unix.Fstatat(fd, "commondir", &st, unix.AT_SYMLINK_NOFOLLOW) != nil) {
		return "", nil
	}
	target, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil || !within(target, root) {
		return "", nil
	}
	if within(dotGit, target) {
		return "", nil // above the .git file: its own work tree
	}
	for _, rw := range r.rwRoots {
		// A writable root itself, or above one: never read-only whole
		// (a root that is a git directory keeps its config and hooks
		// read-only instead: gitRoot).
		if within(rw, target) {
			return "", nil
		}
	}
	return target, nil
}

// openBeneath opens the directory v, a path that file (inside a writable
// root) names, relative to file's directory unless absolute: by fd below
// the longest writable root that lexically holds it, never through a
// symlink and never past that root (openat2 RESOLVE_BENEATH |
// RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV). fd is -1 when v is outside
// every writable root (read-only inside anyway, and not looked up at all:
// a lookup of /net/HOST/... on the host could wake an automounter), or
// missing, or not a directory. Any other failure is an error naming file:
// a directory a sandbox made unsearchable must not make the run skip what
// it holds.
func (r *resolver) openBeneath(file, v string) (fd int, root string, err error) {
	if strings.ContainsRune(v, 0) {
		return -1, "", nil
	}
	lexical := v
	if !filepath.IsAbs(v) {
		lexical = filepath.Join(filepath.Dir(file), v)
	}
	lexical = filepath.Clean(lexical)
	for _, rw := range r.rwRoots {
		if within(lexical, rw) && len(rw) > len(root) {
			root = rw
		}
	}
	if root == "" {
		return -1, "", nil
	}
	// Relative to the root, as written when it starts inside the
	// root's directory (".." is the kernel's to resolve, beneath it).
	rel := ""
	if dir, err := filepath.Rel(root, filepath.Dir(file)); err == nil && !filepath.IsAbs(v) && dir != ".." && !strings.HasPrefix(dir, "../") {
		rel = dir + "/" + v
	} else if rel, err = filepath.Rel(root, lexical); err != nil {
		return -1, "", nil
	}
	fd, err = openBeneathRoot(root, rel, unix.O_PATH|unix.O_DIRECTORY)
	switch {
	case err == nil:
		return fd, root, nil
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.EXDEV):
		return -1, "", nil // missing, not a directory, or past the root
	case errors.Is(err, unix.ELOOP):
		return -1, "", fmt.Errorf("%s names %s through a symlink, which a sandbox could point elsewhere once the run has protected its target; write the path without symlinks into %s, or remove it if a sandbox made it", file, v, file)
	}
	return -1, "", fmt.Errorf("cannot look up %s, which %s names: %w (if a sandbox made a directory on the way unreadable, chmod u+rx it)", v, file, err)
}

// readSmall reads at most limit bytes of the regular file at path, not
// through a symlink and never blocking on a FIFO; nil when it cannot.
func readSmall(path string, limit int64) []byte {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(f, limit))
	return b
}

// submoduleGitfiles returns the ".git" files of the checked-out submodules
// that gitDir knows: git keeps each submodule's repository in
// gitDir/modules/NAME (NAME may hold slashes; nested submodules have
// modules of their own) and its checkout in that config's core.worktree.
// Only .git files that exist are returned. Nothing is followed through a
// symlink, and the walk and the reads are bounded: past budget, an error,
// as an unread submodule would stay writable.
func (r *resolver) submoduleGitfiles(gitDir string, budget *int) ([]string, error) {
	var out []string
	var visit func(dir string, depth int) error
	visit = func(dir string, depth int) error {
		if depth > maxSubmoduleDepth || len(out) >= maxSubmodules {
			return nil
		}
		if *budget--; *budget < 0 {
			return fmt.Errorf("reading the submodules of %s: more than %d directories under the workspace's .git directories; if a sandbox made them, remove them", gitDir, maxGitScanDirs)
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			return nil
		}
		for _, e := range ents {
			if len(out) >= maxSubmodules {
				return nil
			}
			// DirEntry types come from the listing: a symlink is never a
			// directory here, so none is followed.
			if !e.IsDir() {
				continue
			}
			switch e.Name() {
			case "objects", "refs", "logs", "hooks", "info", "lfs":
				continue // a repository's own data, no submodules in it
			}
			sub := filepath.Join(dir, e.Name())
			config := filepath.Join(sub, submoduleConfigName)
			if wt := configWorktree(config); wt != "" {
				// The work tree is looked up as a gitdir is: by fd,
				// below a writable root only (openBeneath).
				fd, _, err := r.openBeneath(config, wt)
				if err != nil {
					return err
				}
				if fd >= 0 {
					var st unix.Stat_t
					real, lerr := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
					if unix.Fstatat(fd, ".git", &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && lerr == nil {
						out = append(out, filepath.Join(real, ".git"))
					}
					unix.Close(fd)
				}
			}
			if err := visit(sub, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if _, err := os.Lstat(filepath.Join(gitDir, "modules")); err != nil {
		return nil, nil // no submodules: nothing to count
	}
	err := visit(filepath.Join(gitDir, "modules"), 0)
	return out, err
}

// configWorktree is core.worktree of the git config file at path, or "".
func configWorktree(path string) string {
	b := readSmall(path, maxSubmoduleConfig)
	core := false
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") {
			core = strings.EqualFold(strings.Trim(line, "[] \t"), "core")
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if core && ok && strings.EqualFold(strings.TrimSpace(k), "worktree") {
			return strings.Trim(strings.TrimSpace(v), `"`)
		}
	}
	return ""
}

func (r *resolver) protectOne(e entry, p string, pins, seen map[string]bool, newPins *[]mountItem) error {
	rp, err := resolvePath(p, r.h.Cwd)
	if skippable(err) {
		return nil
	}
	if err != nil {
		return e.at.err(err, "%v", err)
	}
	for _, loc := range r.insideLocations(rp.Path, true) {
		b := r.mounts[loc.prov].m
		// The path to make read-only: the protected path itself when it
		// exists, else the first component that does not exist (or the
		// file standing where a directory should be), so that nothing
		// on the way can be created either.
		t, dir, missing := rp.Path, false, false
		switch {
		case rp.Missing == 0:
			st, err := os.Stat(t)
			dir = err == nil && st.IsDir()
		case rp.NotDir:
			t = rp.firstMissing()
		default:
			t, missing = rp.firstMissing(), true
			dir = t != rp.Path || e.Dir
		}
		if !within(t, b.Source) {
			continue
		}
		dest := rebase(t, b.Source, b.Dest)
		if seen[dest] {
			continue
		}
		seen[dest] = true
		// Invariant: every directory between the writable bind and
		// the protected path is a mount point (a "pin"). A mount point
		// cannot be renamed or removed (EBUSY), so the sandbox cannot
		// move .git away and put a .git of its own, with hooks, in
		// its place.
		*newPins = r.pinChain(*newPins, pins, t, b, e.at, dest+" stays protected")
		why := "protected: read-only inside a writable bind (" + r.whereText(e.at) + ")"
		if missing {
			why = "protected: does not exist; an empty read-only placeholder keeps it from being created (" + r.whereText(e.at) + ")"
			r.res.Placeholders = append(r.res.Placeholders, Placeholder{Path: t, Dir: dir, Root: b.Source})
		}
		r.protects = append(r.protects, PlanEntry{Mount: sandbox.Mount{Kind: sandbox.MountProtect, Dest: dest, Dir: dir}, Why: why})
	}
	return nil
}

// maxHideMounts bounds the hides and the pins above them: each is a mount
// of every run (a tree with thousands of .env.example files cost 0.1 ->
// 0.4 s a start, measured), and an earlier sandbox can create files that
// match. Past it the run stops: leaving a hidden file unpinned would let
// a sandbox move it where the next run does not look.
const maxHideMounts = 2048

// pinChain appends to out a pin (a read-write bind of itself) for each
// directory between bind b's source and t, parents first, skipping the
// destinations already in pins.
func (r *resolver) pinChain(out []mountItem, pins map[string]bool, t string, b sandbox.Mount, at origin, what string) []mountItem {
	var chain []string
	for x := filepath.Dir(t); x != b.Source && within(x, b.Source); x = filepath.Dir(x) {
		chain = append(chain, x)
	}
	for i := len(chain) - 1; i >= 0; i-- {
		x := chain[i]
		xd := rebase(x, b.Source, b.Dest)
		if pins[xd] {
			continue
		}
		pins[xd] = true
		out = append(out, mountItem{
			m:   sandbox.Mount{Kind: sandbox.MountBind, Source: x, Dest: xd},
			why: "pin: a mount point cannot be renamed, so " + what + " (" + r.whereText(at) + ")",
			at:  at, rank: at.rank,
		})
	}
	return out
}

// patterns expands the variables of the protect and hide entries, then
// matches all their patterns in one walk: the workspace's "**/.env*" and
// "**/.git" share its listings (globAll).
func (r *resolver) patterns() error {
	for _, l := range []struct {
		in  []entry
		out *[]expandedEntry
	}{{r.m.protect, &r.protectList}, {r.m.hide, &r.hideList}} {
		for _, e := range l.in {
			ps, err := r.expandEach(e.Path, e.at)
			if err != nil {
				return err
			}
			for _, p := range ps {
				x := e
				x.Path = p
				*l.out = append(*l.out, expandedEntry{x, e.Path})
			}
		}
	}
	var pats []globPattern
	add := func(p string, gp globPattern) {
		if p = r.absolute(p); !hasGlob(p) {
			return
		}
		// What cannot be walked (a missing prefix, a bad pattern) is
		// left to the entry's own step, which skips it or names it.
		if pat, ok, err := globPatternOf(p); ok && err == nil {
			gp.path = pat
			pats = append(pats, gp)
		}
	}
	for _, e := range r.protectList {
		if head, ok := bareRepoPattern(e.Path); ok {
			add(e.Path, globPattern{maxDepth: auditMaxDepth})
			add(head, globPattern{fileOnly: true, links: true, maxDepth: auditMaxDepth})
			add(e.Path, globPattern{links: true, maxDepth: auditMaxDepth}) // for the git audit
		} else {
			add(e.Path, globPattern{})
		}
	}
	for _, e := range r.hideList {
		add(e.Path, globPattern{fileOnly: !e.Dir})
	}
	if len(pats) == 0 {
		return nil
	}
	res, err := globAll(pats)
	if err != nil {
		return nil // a bad pattern: its entry's step says which
	}
	r.globbed = map[globPattern]globResult{}
	for i, p := range pats {
		r.globbed[p] = res[i]
	}
	return nil
}

// absolute is p, made absolute against the current directory.
func (r *resolver) absolute(p string) string {
	if !filepath.IsAbs(p) {
		return filepath.Join(r.h.Cwd, p)
	}
	return p
}

// globPatternOf resolves the part of p (absolute) before its first
// wildcard, the walk's start. ok is false when that part does not exist,
// so that nothing can match.
func globPatternOf(p string) (pattern string, ok bool, err error) {
	parts := splitPath(p)
	i := 0
	for i < len(parts) && !hasGlob(parts[i]) && parts[i] != "**" {
		i++
	}
	prefix, err := resolvePath("/"+strings.Join(parts[:i], "/"), "/")
	if skippable(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	if prefix.Missing > 0 {
		return "", false, nil
	}
	return filepath.Join(append([]string{prefix.Path}, parts[i:]...)...), true, nil
}

// globEntry matches the pattern p of a hide or protect entry (list names
// which) with gp's matching. ok is false when nothing can match. Running
// out of the walk's directories is an error, its depth a warning.
func (r *resolver) globEntry(x expandedEntry, p string, gp globPattern, list string) (globResult, bool, error) {
	e := x.entry
	g, ok, err := r.globAs(p, gp)
	if err != nil || !ok {
		return g, false, e.at.errOrNil(err)
	}
	done, section := "protected", "Protected paths"
	if list == "hide" {
		done, section = "hidden", "Hidden paths"
	}
	if g.tooMany {
		// Fail closed: an earlier sandbox could create that many
		// directories, sorted before a repository or a .env, to leave it
		// writable or readable in the next run.
		return g, false, e.at.err(nil, "matching %s stopped after %d directories, so what lies beyond cannot be %s: if a sandbox made them, remove them (for a workspace that big, see %q in docs/profiles.md)", e.Path, walkMaxDirs, done, section)
	}
	if g.truncated {
		depth := gp.maxDepth
		if depth == 0 {
			depth = walkMaxDepth
		}
		r.warn(e.at.warn(false, "stopped matching %s at %d levels, below %s: matches deeper down are not %s (%s them explicitly, or remove this entry with \"!%s\" in your config)", e.Path, depth, g.truncatedAt, done, list, x.written))
	}
	return g, true, nil
}

// globAs matches the pattern p (absolute), matched as gp says (fileOnly,
// links, maxDepth): from the patterns step's walk, or, for a pattern it did
// not see, alone.
func (r *resolver) globAs(p string, gp globPattern) (globResult, bool, error) {
	pat, ok, err := globPatternOf(p)
	if !ok || err != nil {
		return globResult{}, false, err
	}
	gp.path = pat
	if g, ok := r.globbed[gp]; ok {
		return g, true, nil
	}
	res, err := globAll([]globPattern{gp})
	if err != nil {
		return globResult{}, false, err
	}
	return res[0], true, nil
}

func (r *resolver) hide() error {
	type target struct {
		path string
		at   origin
	}
	var targets []target
	for _, e := range r.hideList {
		p := r.absolute(e.Path)
		if !hasGlob(p) {
			rp, err := resolvePath(p, "/")
			if skippable(err) {
				continue
			}
			if err != nil {
				return e.at.err(err, "%v", err)
			}
			if rp.Missing == 0 {
				targets = append(targets, target{rp.Path, e.at})
			}
			continue
		}
		g, ok, err := r.globEntry(e, p, globPattern{fileOnly: !e.Dir}, "hide")
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		for _, m := range g.matches {
			if st, err := os.Lstat(m); err == nil && e.Dir != st.IsDir() {
				continue
			}
			targets = append(targets, target{m, e.at})
		}
		// Fail closed: what a directory the walk cannot look into holds
		// is unknown, and a sandbox (same uid) could chmod it back and
		// read a match an earlier sandbox chmod'ed away from the walk.
		for _, d := range g.unlisted {
			// Not over a bind the run asked for (the workspace itself
			// made unreadable): stop instead of replacing it.
			for _, it := range r.mounts {
				if it.m.Kind == sandbox.MountBind && within(it.m.Source, d) {
					return e.at.err(fs.ErrPermission, "cannot look into %s (permission denied) for %s, and it holds %s (%s): make it readable (chmod u+rx %s), or remove the entry with \"!%s\" in your config", d, e.Path, it.m.Source, it.why, d, e.written)
				}
			}
			targets = append(targets, target{d, e.at})
		}
		if len(g.unlisted) > 0 {
			r.warn(e.at.warn(false, "cannot look into %s (permission denied) to match %s: hidden whole", someOf(g.unlisted), e.Path))
		}
	}
	// Invariant: a hidden path is hidden wherever it is visible inside,
	// through the host root and through every bind above it; a hide is
	// applied after every other mount, so no later mount uncovers it.
	seen := map[string]bool{}
	pins := map[string]bool{}
	for _, it := range r.mounts {
		pins[it.m.Dest] = true
	}
	var newPins []mountItem
	for _, t := range targets {
		// Invariant: inside a writable bind, every directory between the
		// bind and a hidden path is pinned (a mount point cannot be
		// renamed). Otherwise a sandbox could move the directory that
		// holds a .env where the next run's walk does not look
		// (node_modules/, past its depth) or under a name that run
		// cannot hide, and that run would read the secret. The hidden
		// path itself is a mount point inside already.
		for _, loc := range r.insideLocations(t.path, true) {
			b := r.mounts[loc.prov].m
			newPins = r.pinChain(newPins, pins, t.path, b, t.at, rebase(t.path, b.Source, b.Dest)+" stays where its hide is")
		}
		for _, loc := range r.insideLocations(t.path, false) {
			if seen[loc.q] {
				continue
			}
			seen[loc.q] = true
			// A hidden directory above another mount would bury it: the
			// empty read-only tmpfs has no room for its mount point.
			for _, it := range r.mounts {
				if it.m.Dest != loc.q && within(it.m.Dest, loc.q) && !strings.HasPrefix(it.why, "pin:") {
					return t.at.err(nil, "hiding %s would also hide %s (%s); hide a narrower path or mount it elsewhere", loc.q, it.m.Dest, it.why)
				}
			}
			r.hides = append(r.hides, PlanEntry{Mount: sandbox.Mount{Kind: sandbox.MountHide, Dest: loc.q}, Why: "hidden: reads as empty (" + r.whereText(t.at) + ")"})
		}
		if n := len(r.hides) + len(newPins); n > maxHideMounts {
			var got []string
			for _, h := range r.hides[len(r.hides)-min(len(r.hides), 3):] {
				got = append(got, h.Dest)
			}
			return t.at.err(nil, "hiding takes more than %d mounts (%s); if a sandbox made these files, remove them, else hide fewer paths (.env.example and the like match .env*)", maxHideMounts, someOf(got))
		}
	}
	// A hide inside another hide is already hidden: drop it, looking up
	// each ancestor among the kept ones (a set: n hides cost n·depth).
	sort.SliceStable(r.hides, func(a, b int) bool { return r.hides[a].Dest < r.hides[b].Dest })
	kept := map[string]bool{}
	var out []PlanEntry
	for _, h := range r.hides {
		covered := false
		for p := h.Dest; !covered; p = filepath.Dir(p) {
			covered = kept[p]
			if p == "/" || p == "." {
				break
			}
		}
		if !covered {
			kept[h.Dest] = true
			out = append(out, h)
		}
	}
	r.hides = out
	r.mounts = append(r.mounts, newPins...)
	r.sortMounts()
	return nil
}

func (r *resolver) plan() error {
	// The plan: binds, tmpfs and pins (parents first), then protections,
	// then hides (last, on top of everything).
	for _, it := range r.mounts {
		r.res.Plan = append(r.res.Plan, PlanEntry{Mount: it.m, Why: it.why})
	}
	r.res.Plan = append(r.res.Plan, r.protects...)
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

func (r *resolver) env() error {
	var env []string
	lookup := r.h.LookupEnv
	// Invariant: the policy's environment is always complete (never nil),
	// so nothing of the caller's environment crosses unless listed.
	if !r.m.envClear.set || r.m.envClear.v {
		env = sandbox.BaseEnv(func(k string) string { v, _ := lookup(k); return v })
	} else {
		env = append(env, r.h.Environ()...)
		r.warn(r.m.envClear.at.warn(false, "the caller's whole environment, secrets included, is visible inside"))
	}
	for _, p := range r.m.envPass {
		if v, ok := lookup(p.v); ok {
			env = append(env, p.v+"="+v)
		}
	}
	keys := make([]string, 0, len(r.m.envSet))
	for k := range r.m.envSet {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+r.m.envSet[k].v)
	}
	r.res.Policy.Env = dedupEnv(env)
	return nil
}

// dedupEnv keeps the last value of each key, at the place of the first.
func dedupEnv(env []string) []string {
	idx := map[string]int{}
	out := []string{}
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if strings.ContainsRune(kv, 0) || k == "" {
			continue
		}
		if i, ok := idx[k]; ok {
			out[i] = kv
			continue
		}
		idx[k] = len(out)
		out = append(out, kv)
	}
	return out
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
	return nil
}

func (r *resolver) seccomp() error {
	s := r.m.seccomp
	r.res.Policy.Seccomp = s.v
	switch s.v {
	case "", "default":
		r.res.Policy.Seccomp = "default"
		return nil
	case "unconfined":
		r.warn(s.at.warn(false, "seccomp unconfined: commands may use every system call, including the kernel interfaces the default profile closes"))
		return nil
	}
	p, err := expand(s.v, r.vars)
	if err != nil {
		// A filter that silently went missing would loosen the sandbox.
		return s.at.err(err, "%v", err)
	}
	rp, err := resolvePath(p, r.h.Cwd)
	if err != nil {
		return s.at.err(err, "%v", err)
	}
	if rp.Missing > 0 || rp.NotDir {
		return s.at.err(fs.ErrNotExist, "seccomp profile %s does not exist", rp.Path)
	}
	// Parsed now so that a bad profile is reported before anything starts.
	prof, err := seccomp.LoadFile(rp.Path)
	if err != nil {
		return s.at.err(err, "%v", err)
	}
	for _, w := range prof.Warnings() {
		r.warn(s.at.warn(false, "%s", w))
	}
	r.res.Policy.Seccomp = rp.Path
	// Invariant: like a policy file, a seccomp profile in a directory the
	// sandbox can write is read-only inside: a sandbox that rewrote it
	// with defaultAction SCMP_ACT_ALLOW would switch the next run's
	// filter off.
	for _, it := range r.mounts {
		if it.m.Kind == sandbox.MountBind && !it.m.ReadOnly && within(rp.Path, it.m.Source) {
			r.policyFiles = append(r.policyFiles, entry{PathEntry: PathEntry{Path: rp.Path}, at: s.at})
			r.warn(s.at.warn(true, "the seccomp profile %s is inside %s, which the sandbox can write; it is kept read-only inside", rp.Path, it.m.Source))
			break
		}
	}
	return nil
}

func (r *resolver) hostAPIs() error {
	var out []string
	known := map[string]bool{}
	for _, k := range r.h.KnownHostAPIs {
		known[k] = true
	}
	for _, a := range r.m.hostAPIs {
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
	layers := []*Layer{Defaults()}
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
