package mounts

import (
	"errors"
	"io"
	"os"
	"path"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// Placeholders (Plan.Made) are empty files and directories that stand
// where protected agent files are missing, so that the sandbox cannot
// create them. Inside, git would list the empty files as untracked
// (`?? .npmrc`), and an agent that trusts `git status` would try to remove
// them or add them to a commit. gitExclude shows the sandbox's git a
// repository's .git/info/exclude with the placeholders' names added: a
// read-only bind of a generated copy, on a small tmpfs of its own, over
// the repository's file. The host's file is never written, and git on the
// host, which sees no placeholder after the run, sees its own file.
//
// It is a convenience, not a boundary: whatever stops it (no
// .git/info/exclude, a symlink on the way, a file too large, a kernel that
// cannot clone a file of a detached tmpfs) leaves git's view as it was.

// maxExclude bounds the copy of a repository's exclude file.
const maxExclude = 256 << 10

// gitExclude adds the placeholders' names to the exclude file of the
// repository each of them is in.
func (b *builder) gitExclude() error {
	if len(b.plan.Made) == 0 && len(b.emptyProtected) == 0 {
		return nil
	}
	made := map[string]bool{}
	for _, m := range b.plan.Made {
		made[path.Clean(m)] = true
	}
	// Named too, not searched past: an empty protected file that was
	// there already, a placeholder of another session sharing the
	// workspace (or an empty file of the user's, read-only here all the
	// same).
	named := map[string]bool{}
	for m := range made {
		named[m] = true
	}
	for _, m := range b.emptyProtected {
		named[path.Clean(m)] = true
	}
	// The work tree each placeholder is in: the nearest ancestor with a
	// .git entry, as git looks for one. A placeholder .git (a workspace
	// that is not a repository's top) is empty, not a repository: git
	// looks further up, and so does this.
	top := map[string]string{} // directory -> its work tree ("": none)
	var find func(dir string) string
	find = func(dir string) string {
		if t, ok := top[dir]; ok {
			return t
		}
		t := ""
		if fd, err := openNoSymlinks(b.rootFD(), path.Join(dir, ".git")); err == nil && !made[path.Join(dir, ".git")] {
			unix.Close(fd)
			t = dir
		} else {
			if err == nil {
				unix.Close(fd)
			}
			if dir != "/" {
				t = find(path.Dir(dir))
			}
		}
		top[dir] = t
		return t
	}
	names := map[string][]string{} // work tree -> placeholders, relative
	for m := range named {
		t := find(path.Dir(m))
		if t == "" {
			continue
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(m, t), "/")
		names[t] = append(names[t], rel)
	}
	for t, rels := range names {
		sort.Strings(rels)
		b.excludeIn(t, rels)
	}
	return nil
}

// excludeIn binds the generated exclude file over work tree t's
// .git/info/exclude; see gitExclude for what it skips.
func (b *builder) excludeIn(t string, rels []string) {
	dest := path.Join(t, ".git/info/exclude")
	// No symlink anywhere (.git, info or exclude): a repository the
	// sandbox wrote could point the mount at another file.
	target, err := openNoSymlinks(b.rootFD(), dest)
	if err != nil {
		return
	}
	defer unix.Close(target)
	var st unix.Stat_t
	if unix.Fstat(target, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size > maxExclude {
		return
	}
	orig, err := b.readExclude(dest, &st)
	if err != nil {
		return
	}
	text := excludeText(orig, rels)
	src, err := newFS("tmpfs", tmpfsOpts("0555", int64(len(text))+4096), 0)
	if err != nil {
		return
	}
	defer unix.Close(src)
	f, err := unix.Openat(src, "exclude", unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o444)
	if err != nil {
		return
	}
	w := os.NewFile(uintptr(f), "exclude")
	_, err = w.Write(text)
	if cerr := w.Close(); err != nil || cerr != nil {
		return
	}
	file, err := unix.OpenTree(src, "exclude", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return // a kernel that cannot clone from a detached mount
	}
	defer unix.Close(file)
	if setAttr(file, roAttrs|unix.MOUNT_ATTR_NOEXEC, false) != nil {
		return
	}
	// Attached to the fd resolved above, never to a path looked up again.
	attach(file, target)
}

// readExclude reads the file dest, resolved in the root as target was,
// and checks that it read target's inode (a rename in between could put
// another file at the name).
func (b *builder) readExclude(dest string, target *unix.Stat_t) ([]byte, error) {
	fd, err := openat2Retry(b.rootFD(), dest, &unix.OpenHow{
		// O_NONBLOCK: a FIFO swapped in cannot hold the build up.
		Flags:   unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_SYMLINKS,
	})
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "exclude")
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if st.Dev != target.Dev || st.Ino != target.Ino {
		return nil, errors.New("exclude file replaced")
	}
	b2, err := io.ReadAll(io.LimitReader(f, maxExclude+1))
	if err != nil {
		return nil, err
	}
	if len(b2) > maxExclude {
		return nil, errors.New("exclude file too large")
	}
	return b2, nil
}

// excludeText is orig with one anchored pattern per placeholder added.
func excludeText(orig []byte, rels []string) []byte {
	var sb strings.Builder
	sb.Write(orig)
	if len(orig) > 0 && orig[len(orig)-1] != '\n' {
		sb.WriteByte('\n')
	}
	sb.WriteString("# nsbox: placeholders of protected files that are missing on the host (empty, read-only, removed after the run)\n")
	for _, r := range rels {
		if p, ok := excludePattern(r); ok {
			sb.WriteString(p)
			sb.WriteByte('\n')
		}
	}
	return []byte(sb.String())
}

// excludePattern is the gitignore(5) pattern that matches exactly the path
// rel below the work tree: anchored with a leading slash, with the
// characters that patterns give a meaning escaped. A name with a line
// break cannot be written and is left out.
func excludePattern(rel string) (string, bool) {
	if rel == "" || strings.ContainsAny(rel, "\n\r") {
		return "", false
	}
	var sb strings.Builder
	sb.WriteByte('/')
	for i := 0; i < len(rel); i++ {
		c := rel[i]
		switch {
		case c == '\\' || c == '*' || c == '?' || c == '[':
			sb.WriteByte('\\')
		case (c == '!' || c == '#') && i == 0:
			// After the leading slash these are literal already.
		case c == ' ' && strings.TrimRight(rel[i:], " ") == "":
			sb.WriteByte('\\') // trailing spaces are dropped unless escaped
		}
		sb.WriteByte(c)
	}
	return sb.String(), true
}
