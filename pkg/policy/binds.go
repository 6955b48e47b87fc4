// The resolver's first steps: the workspace, the current directory, the
// host directories and the binds, and the checks that keep a system
// directory or $HOME from becoming writable.

package policy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

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
func escapesThroughSymlink(p string) bool { return escapingLink(p) != "" }

// escapingLink is the first symlink on the way to p that points out of
// the directory holding it (as escapesThroughSymlink), "" if none.
func escapingLink(p string) string {
	cur := "/"
	for _, name := range splitPath(p) {
		next := filepath.Join(cur, name)
		st, err := os.Lstat(next)
		if err != nil {
			return ""
		}
		if st.Mode()&fs.ModeSymlink != 0 {
			t, err := resolvePath(next, "/")
			if err != nil || !within(t.Path, cur) {
				return next
			}
			next = t.Path
		}
		cur = next
	}
	return ""
}

// inRunWritable reports whether p lies in the workspace or in a writable
// bind already planned (cands).
func (r *resolver) inRunWritable(p string, cands []mountItem) bool {
	if r.res.Workspace != "" && within(p, r.res.Workspace) {
		return true
	}
	for _, it := range cands {
		if it.m.Kind == sandbox.MountBind && !it.m.ReadOnly && within(p, it.m.Source) {
			return true
		}
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
	r.vars, r.varsCache = r.h.vars(""), nil
	if r.h.Home != "" {
		if rp, err := r.resolvePath(r.h.Home, "/"); err == nil {
			r.home = rp.Path
		}
	}
	w := r.m.workspace
	if !w.set || w.v == "" {
		return nil
	}
	if _, err := expand(w.v, r.vars); err != nil {
		// Invariant: a workspace that cannot be expanded stops the run,
		// also for a known variable that is unset: without it the run
		// would go on with no workspace (the current directory
		// read-only), not the directory the user named.
		var skip *errSkip
		if errors.As(err, &skip) && !skip.unknown {
			return w.at.err(ErrUnknownVariable, "$%s is not set, so the workspace %q cannot be found", skip.name, w.v)
		}
	}
	v, ok, err := r.expandAt(w.v, w.at)
	if !ok {
		return err
	}
	rp, err := r.resolvePath(v, r.h.Cwd)
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
	r.vars["NSBOX_WORKSPACE"], r.varsCache = ws, nil
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
	// Kept when visible inside; commands start in / when not.
	p.Cwd = r.h.Cwd
	p.CwdFallback = true
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
		parent, err := r.resolvePath(filepath.Dir(v), "/")
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
		rp, err := r.resolvePath(src, r.h.Cwd)
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
		// Invariant: a bind never follows a link out of its directory
		// that lies in a writable place of this run (the workspace, an
		// earlier --rw): an earlier sandbox may have planted it there
		// (dist -> a directory of the user's; review 71: a later
		// `--output ./dist` appended to an authorized_keys there, and
		// `--input ./data` read what the strict profile keeps out).
		// Named by its real path, the bind stays the caller's choice.
		lit := src
		if !filepath.IsAbs(lit) {
			lit = filepath.Join(r.h.Cwd, lit)
		}
		if lit = filepath.Clean(lit); lit != rp.Path {
			if link := escapingLink(lit); link != "" && r.inRunWritable(link, cands) {
				return e.at.err(ErrUnsafeWorkspace, "%s leads through a symlink out of its directory (%s, in a directory this run may write: a sandbox may have made it) to %s; give the real path if you mean it", src, link, rp.Path)
			}
		}
		if !ro {
			// Invariant: a symlink never turns a writable bind into one of
			// a system directory or the home directory. An earlier
			// sandbox can plant out/run2 -> /etc in a writable tree; a
			// later --output out/run2 would bind /etc read-write. Named
			// by its real path, such a bind stays the caller's choice.
			// The cheap test first: the walk of lit's components only
			// for a bind that lands somewhere it must not be led to.
			if (r.unsafeWritable(rp.Path) || (r.home != "" && within(rp.Path, r.home))) && escapesThroughSymlink(lit) {
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
				r.policyChecks = append(r.policyChecks, policyCheck{l, f, it.m.Source})
				r.policyFiles = append(r.policyFiles, entry{PathEntry: PathEntry{Path: f}, at: origin{l, "", it.rank}})
				r.warn(Warning{Source: l.Name, Msg: fmt.Sprintf("this policy file is inside %s, which the sandbox can write; it is kept read-only inside", it.m.Source), Note: true})
			}
		}
	}
	sort.Strings(r.rwRoots)
	r.rwRoots = dedupStrings(r.rwRoots)
	for _, it := range r.mounts {
		if it.m.Kind == sandbox.MountBind && !it.m.ReadOnly && r.home != "" && within(r.home, it.m.Source) {
			r.warn(it.at.warn(false, "makes %s writable, which holds your home directory: shell startup files, the git and ssh configs, the editor and tmux configs that exist and nsbox's config stay read-only, other startup files (systemd user units, autostart) do not", it.m.Source))
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
// policyDir is the directory, at the top of a writable directory or below
// it, where a project keeps its profiles and seccomp files: every run
// protects it, and quarantines one a sandbox made (profiles/base.toml).
var policyDir = []string{".nsbox", "policy"}

// policyCheck is a policy file of the run (layer l's, or a seccomp file it
// names) that lies in the writable directory dir.
type policyCheck struct {
	l      *Layer
	f, dir string
}

// checkPolicyFiles is the resolution step that refuses the run's policy
// files no run protects (trustedPolicyFile); after shallow, which decides
// which nested .nsbox/policy directories are protected.
func (r *resolver) checkPolicyFiles() error {
	for _, c := range r.policyChecks {
		if err := r.trustedPolicyFile(c.l, c.f, c.dir); err != nil {
			return err
		}
	}
	return nil
}

// trustedPolicyFile refuses a profile or seccomp file f that lies in the
// writable directory dir outside a .nsbox/policy/ directory every run
// protects, layer l naming it.
//
// Invariant: no sandbox chooses a later sandbox's policy. A policy file
// is read-only in the runs that use it, but any other run with dir
// writable (a plain `nsbox run` there) could rewrite it, lifting the
// protection of .git or the hiding of ~/.ssh for the next run that reads
// it (review 19). Whichever layer names the file (a config.toml naming a
// seccomp file in the workspace, review 20), it is read only from the
// config directory or from a .nsbox/policy/ that every run protects: at
// the top of dir, or nested where the walk protects it (no name the walk
// skips on the way, within its depth, dir not --shallow; review 20).
func (r *resolver) trustedPolicyFile(l *Layer, f, dir string) error {
	// The user database's default config directory is protected in
	// every run, whatever $HOME and XDG_CONFIG_HOME say (defaultsFor);
	// one those variables put in a writable directory is protected only
	// in the runs that set them, and an earlier run without them could
	// have written a config.toml with backend = "none" there (reviews
	// 21, 22).
	if within(f, r.h.ConfigDir()) && r.configDirProtectedEverywhere() {
		return nil
	}
	if rel, err := filepath.Rel(dir, f); err == nil {
		parts := strings.Split(filepath.Dir(rel), string(filepath.Separator))
		for i := 0; i+1 < len(parts); i++ {
			if parts[i] != policyDir[0] || parts[i+1] != policyDir[1] {
				continue
			}
			nestedOK := i < walkMaxDepth && !slices.Contains(r.shallow, dir) &&
				!slices.ContainsFunc(parts[:i], func(c string) bool { return walkSkip[c] })
			if i == 0 || nestedOK {
				return nil
			}
		}
	}
	return errorf(l, "", ErrWritablePolicyFile, "%s lies in %s, which sandboxes can write: an earlier run there could have rewritten it. Keep project profiles and seccomp files in %s (every run keeps that directory read-only; nsbox trust FILE there), or outside every writable directory",
		f, dir, filepath.Join(append([]string{dir}, policyDir...)...)+"/")
}

func (r *resolver) policyFile(l *Layer) (string, bool) {
	if (l.Kind != KindProfile && l.Kind != KindConfig) || !filepath.IsAbs(l.Name) {
		return "", false
	}
	rp, err := r.resolvePath(l.Name, "/")
	if err != nil || rp.Missing > 0 {
		return filepath.Clean(l.Name), true
	}
	return rp.Path, true
}
