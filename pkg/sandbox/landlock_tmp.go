package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/nsbox/nsbox/pkg/rmtree"
	"golang.org/x/sys/unix"
)

// A Landlock session's private TMPDIR lives in the host's temporary
// directory (it has no /tmp of its own), and only a clean Close removes
// it: a supervisor killed with SIGKILL leaves it, with whatever the
// session's commands wrote there. So its name says who owns it,
//
//	nsbox-tmp-PIDNS.PID.START-RANDOM
//
// the supervisor's PID namespace (the inode of /proc/self/ns/pid), pid and
// start time (field 22 of /proc/PID/stat, in clock ticks since boot), and
// a later nsbox (RemoveDeadLandlockTmpDirs) removes those whose owner is
// gone: no process with that pid, or one that started at another time (the
// pid was reused).
//
// They live in the caller's own directory nsbox-UID in the host's
// temporary directory (makeLandlockTmp), so that this later nsbox reads
// a directory of a few entries at its start, not the whole shared one (a
// /tmp of 500 entries cost every run ~0.5 ms here).

var (
	tmpOwnerOnce sync.Once
	tmpOwner     string
	tmpPidNS     uint64
)

// ownedPattern is the os.MkdirTemp pattern of what this process leaves
// on the host under prefix: the owner's identity, then the random part.
// Without the identity (no /proc) it is prefix alone, which no later run
// removes.
func ownedPattern(prefix string) string {
	tmpOwnerOnce.Do(func() {
		ns, err := pidNSInode()
		if err != nil {
			return
		}
		start, err := procStartTime(os.Getpid())
		if err != nil {
			return
		}
		tmpPidNS = ns
		tmpOwner = fmt.Sprintf("%d.%d.%d", ns, os.Getpid(), start)
	})
	if tmpOwner == "" {
		return prefix
	}
	return prefix + tmpOwner + "-"
}

// landlockTmpPattern is the pattern of this process's TMPDIRs.
func landlockTmpPattern() string { return ownedPattern(landlockTmpPrefix) }

// privateTmpDir is the caller's own directory for TMPDIRs: nsbox-UID in
// the host's temporary directory.
func privateTmpDir() string {
	return filepath.Join(os.TempDir(), "nsbox-"+strconv.Itoa(os.Geteuid()))
}

// openOwnDir returns an O_PATH fd of p when p is a directory (not a
// symlink) of this process's effective uid, its mode put back to 0700;
// exists says whether anything is at p. The temporary directory is shared
// and sticky: another user can neither put a link there under our name nor
// move ours away, and one who took the name first is refused here. Only
// this uid can have changed the mode of a directory of ours, but that
// includes a Landlock command, which runs as the caller (Landlock does not
// govern chmod(2)): a mode of 000 made every later run fail, one of 755 hid
// the directory from the cleanup (found by review). So the mode is
// repaired, not judged.
func openOwnDir(p string) (fd int, exists bool) {
	fd, err := unix.Open(p, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, !errors.Is(err, unix.ENOENT)
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != os.Geteuid() {
		unix.Close(fd)
		return -1, true
	}
	if st.Mode&0o7777 != 0o700 {
		// By the fd: the inode checked above, whatever the name holds now.
		if unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), 0o700) != nil {
			unix.Close(fd)
			return -1, true
		}
	}
	return fd, true
}

// makeLandlockTmp makes a session's private TMPDIR: in the caller's own
// directory (privateTmpDir, made mode 0700 when missing), created by fd
// below it; in the shared temporary directory itself when that name is
// taken by something not ours.
func makeLandlockTmp() (string, error) {
	dir := privateTmpDir()
	if err := unix.Mkdir(dir, 0o700); err != nil && err != unix.EEXIST {
		return os.MkdirTemp("", landlockTmpPattern())
	}
	fd, _ := openOwnDir(dir)
	if fd < 0 {
		return os.MkdirTemp("", landlockTmpPattern())
	}
	defer unix.Close(fd)
	pattern := landlockTmpPattern()
	for try := 0; try < 100; try++ {
		name := pattern + strconv.FormatUint(uint64(rand.Uint32()), 10)
		err := unix.Mkdirat(fd, name, 0o700)
		if err == nil {
			return filepath.Join(dir, name), nil
		}
		if err != unix.EEXIST {
			return "", &os.PathError{Op: "mkdir", Path: filepath.Join(dir, name), Err: err}
		}
	}
	return "", &os.PathError{Op: "mkdir", Path: filepath.Join(dir, pattern+"*"), Err: unix.EEXIST}
}

// landlockTmpParent is where makeLandlockTmp would make a TMPDIR now, for
// the dry run: nothing is made or repaired.
func landlockTmpParent() string {
	var st unix.Stat_t
	if err := unix.Lstat(privateTmpDir(), &st); err == nil && (st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != os.Geteuid()) {
		return os.TempDir()
	}
	return privateTmpDir()
}

// landlockTmpLeftAt is the directory where TMPDIRs of killed runs are
// looked for: the private one when it is ours (its mode repaired); the
// shared one when the private name is taken by something not ours (runs
// made them there); none when there is nothing at the private name (no
// run made one). A TMPDIR made in the shared directory while the private
// name was taken is not looked for once that name is free again.
func landlockTmpLeftAt() string {
	p := privateTmpDir()
	fd, exists := openOwnDir(p)
	switch {
	case fd >= 0:
		unix.Close(fd)
		return p
	case exists:
		return os.TempDir()
	}
	return ""
}

func pidNSInode() (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/pid", &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// procStartTime is the start time of process pid (field 22 of its stat,
// counted after the command name, which may hold spaces and parentheses).
func procStartTime(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("malformed stat")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): field 22 is f[19].
	if len(f) < 20 {
		return 0, errors.New("malformed stat")
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// parseTmpOwner reads the owner out of a TMPDIR's name; ok is false for any
// other name.
func parseTmpOwner(name string) (ns uint64, pid int, start uint64, ok bool) {
	return parseOwner(name, landlockTmpPrefix)
}

// parseOwner reads the owner out of a name made with ownedPattern(prefix).
func parseOwner(name, prefix string) (ns uint64, pid int, start uint64, ok bool) {
	rest, found := strings.CutPrefix(name, prefix)
	if !found {
		return 0, 0, 0, false
	}
	owner, _, found := strings.Cut(rest, "-")
	if !found {
		return 0, 0, 0, false
	}
	parts := strings.Split(owner, ".")
	if len(parts) != 3 {
		return 0, 0, 0, false
	}
	ns, err1 := strconv.ParseUint(parts[0], 10, 64)
	p, err2 := strconv.Atoi(parts[1])
	start, err3 := strconv.ParseUint(parts[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || p <= 0 {
		return 0, 0, 0, false
	}
	return ns, p, start, true
}

// RemoveDeadLandlockTmpDirs removes, from where runs make them
// (landlockTmpLeftAt), the private TMPDIRs of Landlock sessions whose
// supervisor is gone (killed before it could close them), and returns what
// it removed. Only what is
// certainly such a directory and dead goes:
//   - a name of this scheme whose owner is in this process's PID namespace
//     (a pid of another namespace, a container sharing /tmp, cannot be
//     judged from here);
//   - a directory, not a symlink, owned by this process's effective uid:
//     when the shared temporary directory is scanned, another user's entry
//     (or one planted under the scheme's name) is never touched; the sticky
//     bit keeps others from renaming ours meanwhile;
//   - no live process has the owner's pid and start time.
//
// os.RemoveAll does not follow symlinks inside (a session's commands could
// leave one pointing anywhere).
func RemoveDeadLandlockTmpDirs() ([]string, error) {
	dir := landlockTmpLeftAt()
	if dir == "" {
		return nil, nil // no Landlock run made its directory
	}
	return removeDeadOwned(dir, landlockTmpPrefix)
}

// removeDeadOwned removes the directories in dir named with
// ownedPattern(prefix) whose owner is gone, under the rules of
// RemoveDeadLandlockTmpDirs, and returns what it removed.
func removeDeadOwned(dir, prefix string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, e := range ents {
		ns, pid, start, ok := parseOwner(e.Name(), prefix)
		if !ok {
			continue
		}
		// This process's namespace, read from /proc only now: most runs
		// find nothing to judge (~0.15 ms a run).
		if ownedPattern(prefix); tmpPidNS == 0 {
			return nil, nil
		}
		if ns != tmpPidNS || !e.IsDir() {
			continue
		}
		p := filepath.Join(dir, e.Name())
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != os.Geteuid() {
			continue
		}
		if now, err := procStartTime(pid); err == nil && now == start {
			continue // its owner lives
		} else if err != nil && !errors.Is(err, os.ErrNotExist) {
			continue // cannot tell: keep it
		}
		// By fd, repairing modes, at any depth: a command's mode-0
		// or 600-level directory kept the TMPDIR with os.RemoveAll
		// (second review).
		if err := rmtree.All(p); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, p)
	}
	return removed, errors.Join(errs...)
}
