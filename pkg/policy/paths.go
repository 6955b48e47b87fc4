package policy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// maxSymlinks bounds symlink hops while resolving one path, as the kernel
// does (MAXSYMLINKS, 40).
const maxSymlinks = 40

// resolved is a host path with its symlinks resolved as far as it exists.
type resolved struct {
	// Path is absolute and clean; its existing prefix has no symlinks.
	Path string
	// Missing is the number of trailing components that do not exist
	// (0: the whole path exists).
	Missing int
	// NotDir is set when a non-directory stands where a directory is
	// needed; Missing then counts from that component, which exists.
	NotDir bool
}

// firstMissing returns the first component of r that does not exist (or
// the non-directory in the way), "" when the whole path exists.
func (r resolved) firstMissing() string {
	if r.Missing == 0 {
		return ""
	}
	p := r.Path
	for i := 1; i < r.Missing; i++ {
		p = filepath.Dir(p)
	}
	return p
}

// resolvePath makes p absolute (against cwd) and resolves every symlink of
// its existing prefix, component by component, with Lstat and Readlink on
// the host. A symlink loop wraps ErrSymlinkLoop. It never follows more than
// maxSymlinks links.
func resolvePath(p, cwd string) (resolved, error) { return resolvePathWith(nil, p, cwd) }

// lstatCache remembers what Lstat and Readlink answered during one
// resolution: a policy resolves some seventy paths that share their
// prefixes (the workspace, $HOME), each component by component. It is a
// snapshot of no more authority than the resolution itself: the worker
// resolves every path again, by fd, when it builds the sandbox. A nil
// cache asks the host every time.
type lstatCache map[string]lstatAnswer

type lstatAnswer struct {
	fi     fs.FileInfo
	err    error
	target string // Readlink's, once asked
	terr   error
	read   bool
	// A whole path's resolution, under a key no path can be (it holds
	// a NUL): the patterns of a policy share their fixed prefixes.
	res    *resolved
	reserr error
}

// resolvedKey is the cache key of resolvePathWith(p, cwd)'s answer.
func resolvedKey(p, cwd string) string { return "\x00" + cwd + "\x00" + p }

func (c lstatCache) lstat(p string) (fs.FileInfo, error) {
	if a, ok := c[p]; ok {
		return a.fi, a.err
	}
	fi, err := os.Lstat(p)
	if c != nil {
		c[p] = lstatAnswer{fi: fi, err: err}
	}
	return fi, err
}

func (c lstatCache) readlink(p string) (string, error) {
	if a, ok := c[p]; ok && a.read {
		return a.target, a.terr
	}
	t, err := os.Readlink(p)
	if a, ok := c[p]; ok {
		a.target, a.terr, a.read = t, err, true
		c[p] = a
	}
	return t, err
}

// resolvePath of r: with r's cache of this resolution's lookups.
func (r *resolver) resolvePath(p, cwd string) (resolved, error) {
	if r.lstat == nil {
		r.lstat = lstatCache{}
	}
	return resolvePathWith(r.lstat, p, cwd)
}

// resolvePathWith is resolvePath, looking components up through c, which
// also keeps the answer.
func resolvePathWith(c lstatCache, p, cwd string) (resolved, error) {
	if strings.ContainsRune(p, 0) || strings.ContainsRune(cwd, 0) {
		return resolved{}, errors.New("path contains a NUL byte")
	}
	if c == nil {
		return resolveUncached(c, p, cwd)
	}
	key := resolvedKey(p, cwd)
	if a, ok := c[key]; ok {
		return *a.res, a.reserr
	}
	res, err := resolveUncached(c, p, cwd)
	c[key] = lstatAnswer{res: &res, reserr: err}
	return res, err
}

func resolveUncached(c lstatCache, p, cwd string) (resolved, error) {
	if !filepath.IsAbs(p) {
		p = cwd + "/" + p
	}
	// Not cleaned first: "link/.." is the parent of the link's target, as
	// the kernel sees it, not the directory holding the link.
	todo := splitPath(p)
	cur := "/"
	hops := 0
	for len(todo) > 0 {
		name := todo[0]
		todo = todo[1:]
		// filepath.Join(cur, name), without its Clean: cur is clean and
		// name one component ("..", or a name; never "." or empty).
		var next string
		switch {
		case name == "..":
			next = filepath.Dir(cur)
		case cur == "/":
			next = "/" + name
		default:
			next = cur + "/" + name
		}
		st, err := c.lstat(next)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return resolved{Path: filepath.Join(append([]string{next}, todo...)...), Missing: 1 + len(todo)}, nil
		case errors.Is(err, syscall.ENOTDIR):
			// cur is not a directory: the component before is in the way.
			return resolved{Path: filepath.Join(append([]string{cur, name}, todo...)...), Missing: 2 + len(todo), NotDir: true}, nil
		case err != nil:
			return resolved{}, &unreachableError{path: next, err: err}
		}
		if st.Mode()&fs.ModeSymlink == 0 {
			if !st.IsDir() && len(todo) > 0 {
				return resolved{Path: filepath.Join(append([]string{next}, todo...)...), Missing: 1 + len(todo), NotDir: true}, nil
			}
			cur = next
			continue
		}
		hops++
		if hops > maxSymlinks {
			return resolved{}, fmt.Errorf("%w at %s: more than %d symlinks to follow", ErrSymlinkLoop, p, maxSymlinks)
		}
		target, err := c.readlink(next)
		if err != nil {
			return resolved{}, fmt.Errorf("%s: %s", next, errText(err))
		}
		if filepath.IsAbs(target) {
			cur = "/"
		}
		todo = append(splitPath(target), todo...)
	}
	return resolved{Path: cur}, nil
}

// unreachableError is a path whose lookup failed (permission denied, say);
// errors.Is sees the cause.
type unreachableError struct {
	path string
	err  error
}

func (e *unreachableError) Error() string { return e.path + ": " + errText(e.err) }
func (e *unreachableError) Unwrap() error { return e.err }

// skippable: a hidden or protected path this user cannot even look up is
// out of the sandbox's reach too (it runs with the same uid), so it needs
// no mount; the typical case is a $HOME of another user (sudo -E).
func skippable(err error) bool { return errors.Is(err, fs.ErrPermission) }

// splitPath returns p's components, without empty ones and ".". It is on
// the path of every pattern and entry a policy resolves: one allocation,
// no intermediate slice.
func splitPath(p string) []string {
	n := 0
	for i := 0; i < len(p); i++ {
		if p[i] == '/' {
			n++
		}
	}
	out := make([]string, 0, n+1)
	for len(p) > 0 {
		c := p
		if i := strings.IndexByte(p, '/'); i >= 0 {
			c, p = p[:i], p[i+1:]
		} else {
			p = ""
		}
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}

// within reports whether p is base or below it (both clean, absolute).
func within(p, base string) bool {
	if base == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == base || strings.HasPrefix(p, base+"/")
}

// rebase maps p (within from) to the same place below to.
func rebase(p, from, to string) string {
	rel := strings.TrimPrefix(p, from)
	if from == "/" {
		rel = p
	}
	return path.Clean(to + "/" + strings.TrimPrefix(rel, "/"))
}

func hasGlob(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++ // an escaped character is itself (filepath.Match)
		case '*', '?', '[':
			return true
		}
	}
	return false
}

// escapeGlob escapes what filepath.Match reads as a wildcard or an escape
// in s: a path from a variable or the current directory pasted into a
// pattern matches itself (/src/app[v2] is no character class).
// EscapeGlob makes the path s a pattern that matches s only: a policy
// entry built from a path (a directory's name may hold *, ?, [ or \).
func EscapeGlob(s string) string { return escapeGlob(s) }

func escapeGlob(s string) string {
	if !strings.ContainsAny(s, `*?[\`) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// unescapeGlob is the name a pattern part without wildcards stands for:
// its escapes removed.
func unescapeGlob(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// literalPrefix is the path the parts of a pattern before its first
// wildcard name: their escapes removed. n is how many parts that is.
func literalPrefix(parts []string) (prefix string, n int) {
	for n < len(parts) && parts[n] != "**" && !hasGlob(parts[n]) {
		n++
	}
	lit := make([]string, n)
	for i, p := range parts[:n] {
		lit[i] = unescapeGlob(p)
	}
	return "/" + strings.Join(lit, "/"), n
}

func dedupStrings(in []string) []string {
	seen := map[string]bool{}
	out := in[:0]
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// openBeneathRoot opens rel below the directory root (absolute, a writable
// root) with flags, never through a symlink, never past root and never
// across a mount (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
// RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV): what lies in a directory a
// sandbox could write is looked up only this way. An error from opening
// root itself is wrapped with its name; one from openat2 is returned as
// the kernel gave it (callers tell ENOENT, ELOOP and EXDEV apart).
func openBeneathRoot(root, rel string, flags int) (int, error) {
	rootFD, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", root, err)
	}
	defer unix.Close(rootFD)
	return openat2Retry(rootFD, rel, &unix.OpenHow{
		Flags:   uint64(flags) | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
}

// openat2Retry is openat2(2), made again on EAGAIN, which RESOLVE_BENEATH
// and RESOLVE_IN_ROOT return when any rename or mount on the host raced a
// ".." lookup (the kernel cannot then vouch that the walk stayed beneath:
// openat2(2), ERRORS), and on EINTR. A busy host does both: a policy
// load failed on it once (CI, TestSubmoduleGitfilesProtected).
func openat2Retry(dirfd int, p string, how *unix.OpenHow) (int, error) {
	for tries := 0; ; tries++ {
		fd, err := unix.Openat2(dirfd, p, how)
		if (err == unix.EAGAIN || err == unix.EINTR) && tries < 64 {
			// A host renaming without pause can meet every quick
			// retry: past a few, back off (1 µs doubling to 1 ms).
			if tries >= 8 {
				time.Sleep(time.Microsecond << min(tries-8, 10))
			}
			continue
		}
		return fd, err
	}
}
