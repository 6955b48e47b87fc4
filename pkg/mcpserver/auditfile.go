package mcpserver

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The audit file (nsbox mcp --audit FILE) is written on the host, with the
// user's rights, for as long as sandboxes run, and may lie in a directory a
// sandbox can write (the workspace). What it must withstand:
//
//   - A symlink put at its path (to ~/.bashrc) must not make nsbox append
//     there: it is opened with O_NOFOLLOW, and anything but a regular file
//     is refused (O_NONBLOCK first, so that a FIFO cannot stall the start).
//   - Its content must not be forged or replaced from inside: the caller
//     keeps the path read-only inside (a protected path, as --json-status).
//     Its inode never changes while nsbox runs (rotation copies and
//     truncates; it never renames the file away), so that protection holds
//     for the whole session.
//   - A loop of refused calls must not fill the disk, nor push the lines
//     before it out of the log: a refusal like one written in the last
//     second (same session, kind, API, method or tool and error) is
//     counted, not written, whatever came in between (two refusals in
//     turn were each a full line, and 3000 of them flushed a 64K log:
//     found by review); each kind's count is written once a second. At
//     most maxRuns kinds are followed at once; refusals of further kinds
//     in that second are counted together. The file is rotated at a size
//     cap: FILE.1 holds the previous part, so the log never takes more
//     than twice the cap.

// DefaultAuditMax is the size at which the audit file is rotated.
const DefaultAuditMax = 64 << 20

// coalesceEvery is how often the refusals counted are written as counts,
// and how long a kind of refusal stays followed after its last one.
const coalesceEvery = time.Second

// maxRuns bounds the kinds of refusal followed at once (the method names
// come from inside: a flood of ever new ones must not grow the map).
const maxRuns = 64

// refusalRun counts the refusals of one kind since its last line.
type refusalRun struct {
	line  map[string]any // what the "repeated" line says was refused
	count int
	first time.Time
}

// AuditFile is an append-only, bounded JSON-lines audit log. Each Write
// must be one whole line (as the session's audit and Server.audit write
// them). It is safe for concurrent use.
type AuditFile struct {
	mu   sync.Mutex
	f    *os.File
	path string
	// dir is the directory the file was opened in (O_PATH), held: FILE.1
	// and the rotation's temporary file are made and renamed relative to
	// it, never through the path again, which a sandbox that can write
	// above the file could have turned into a symlink since.
	dir  int
	name string
	max  int64
	size int64

	// The kinds of refusal followed in this window (since windowStart),
	// and the refusals of further kinds, counted together.
	runs        map[string]*refusalRun
	others      refusalRun
	windowStart time.Time
	now         func() time.Time
}

// ErrAuditNotRegular refuses an audit path that is a symlink or not a
// regular file.
var ErrAuditNotRegular = errors.New("not a regular file (a symlink, a FIFO or a device is refused: name the file itself)")

// ErrAuditHardLinked refuses an audit file with more than one name: what
// is written through another could rewrite the log.
var ErrAuditHardLinked = errors.New("has other names (hard links), through which its lines could be changed: remove them, or name a new file")

// OpenAudit opens (creating it, mode 0600) the audit file at path, to be
// rotated at max bytes (0: DefaultAuditMax). Its directory is looked up by
// path; a caller that knows where a sandbox may have planted symlinks
// opens the directory itself and uses OpenAuditAt.
func OpenAudit(path string, max int64) (*AuditFile, error) {
	dir, name := filepath.Split(filepath.Clean(path))
	dfd, err := unix.Open(filepath.Clean(dir), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	a, err := OpenAuditAt(dfd, path, name, max)
	unix.Close(dfd)
	return a, err
}

// OpenAuditAt is OpenAudit of the file name in the directory open at dirfd
// (any fd of it: a duplicate is kept), path the file's path for messages.
func OpenAuditAt(dirfd int, path, name string, max int64) (*AuditFile, error) {
	if max <= 0 {
		max = DefaultAuditMax
	}
	if name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
		return nil, fmt.Errorf("%s: %w", path, ErrAuditNotRegular)
	}
	dir, err := unix.FcntlInt(uintptr(dirfd), unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return nil, err
	}
	// O_NOFOLLOW: a symlink planted at the path is refused (ELOOP), never
	// followed to a file the user's shell runs. O_NONBLOCK: a FIFO there
	// does not block the open; it is refused. Opened for reading too:
	// rotation copies it.
	f, err := openRegular(dir, name, path, os.O_RDWR|os.O_CREATE|os.O_APPEND)
	if err != nil {
		unix.Close(dir)
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		unix.Close(dir)
		return nil, err
	}
	// FILE.1 made now, empty if it was missing, so that rotation can
	// always rewrite it in place (rotate); one that is not a regular file
	// is refused now rather than at the first rotation.
	old, err := openRegular(dir, name+".1", path+".1", os.O_WRONLY|os.O_CREATE)
	if err != nil {
		f.Close()
		unix.Close(dir)
		return nil, err
	}
	old.Close()
	return &AuditFile{f: f, path: path, dir: dir, name: name, max: max, size: st.Size(), now: time.Now, runs: map[string]*refusalRun{},
		others: refusalRun{line: map[string]any{"error": fmt.Sprintf("refusals of more than %d kinds in one second", maxRuns)}}}, nil
}

// Path is the file's path as given.
func (a *AuditFile) Path() string { return a.path }

// Write appends one line (or counts it, see above).
func (a *AuditFile) Write(line []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return 0, os.ErrClosed
	}
	key, entry := refusalKey(line)
	now := a.now()
	if now.Sub(a.windowStart) >= coalesceEvery {
		a.flushRuns(now)
	}
	switch r := a.runs[key]; {
	case key == "":
	case r != nil:
		r.count++
		return len(line), nil
	case len(a.runs) >= maxRuns:
		if a.others.count == 0 {
			a.others.first = now
		}
		a.others.count++
		return len(line), nil
	default:
		a.runs[key] = &refusalRun{line: entry, first: now}
	}
	if err := a.append(line); err != nil {
		return 0, err
	}
	return len(line), nil
}

// flushRuns writes, for each kind of refusal counted in the window now
// ending, how many there were; a kind with none in it is no longer
// followed (its next refusal is a line of its own again).
func (a *AuditFile) flushRuns(now time.Time) {
	for _, k := range sortedRunKeys(a.runs) {
		r := a.runs[k]
		if r.count == 0 {
			delete(a.runs, k)
			continue
		}
		a.writeCount(r, now)
	}
	if a.others.count > 0 {
		a.writeCount(&a.others, now)
	}
	a.windowStart = now
}

// writeCount writes r's count as a "repeated" line and starts it again.
func (a *AuditFile) writeCount(r *refusalRun, now time.Time) {
	rec := map[string]any{
		"time":     now.UTC().Format(time.RFC3339Nano),
		"kind":     "repeated",
		"count":    r.count,
		"since":    r.first.UTC().Format(time.RFC3339Nano),
		"repeated": r.line,
	}
	if b, err := json.Marshal(rec); err == nil {
		a.append(append(b, '\n'))
	}
	r.count, r.first = 0, now
}

func sortedRunKeys(m map[string]*refusalRun) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// append writes a line, rotating first when it would pass the cap.
func (a *AuditFile) append(line []byte) error {
	if a.size > 0 && a.size+int64(len(line)) > a.max {
		if err := a.rotate(); err != nil {
			// Better a log that stops than one that fills the disk.
			return fmt.Errorf("audit log %s: cannot rotate: %w", a.path, err)
		}
	}
	n, err := a.f.Write(line)
	a.size += int64(n)
	return err
}

// rotate copies the file to FILE.1 (through a new temporary file renamed
// over it: a symlink at FILE.1 is replaced, not followed) and truncates
// the file itself, keeping its inode (see above).
//
// Where the directory cannot take the temporary file, FILE.1 is rewritten
// in place: a sandbox that may write the directory (the audit file in the
// workspace, uid 65534's own) made it read-only and every line after the
// cap was dropped (found by review). OpenAudit made FILE.1, so it exists;
// only the directory's mode is in the sandbox's hands, and the mode of
// FILE.1 itself is not (a protected path, read-only inside).
func (a *AuditFile) rotate() error {
	src := io.NewSectionReader(a.f, 0, a.size)
	err := a.rotateByRename(src)
	if err != nil {
		if _, serr := src.Seek(0, io.SeekStart); serr != nil {
			return serr
		}
		if ierr := a.rotateInPlace(src); ierr != nil {
			return fmt.Errorf("%v; in place: %w", err, ierr)
		}
	}
	if err := a.f.Truncate(0); err != nil {
		return err
	}
	a.size = 0
	return nil
}

func (a *AuditFile) rotateByRename(src io.Reader) error {
	var tmpName string
	var tmp *os.File
	for i := 0; ; i++ {
		var r [6]byte
		if _, err := rand.Read(r[:]); err != nil {
			return err
		}
		tmpName = fmt.Sprintf(".%s.rotate-%x", a.name, r)
		fd, err := unix.Openat(a.dir, tmpName, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if errors.Is(err, unix.EEXIST) && i < 16 {
			continue
		}
		if err != nil {
			return &os.PathError{Op: "create", Path: a.path + ".1", Err: err}
		}
		tmp = os.NewFile(uintptr(fd), tmpName)
		break
	}
	_, err := io.Copy(tmp, src)
	if err == nil {
		err = tmp.Chmod(0o600)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(a.dir, tmpName, a.dir, a.name+".1")
	}
	if err != nil {
		unix.Unlinkat(a.dir, tmpName, 0)
	}
	return err
}

// rotateInPlace overwrites FILE.1 with src: opened like the audit file
// itself (no symlink followed, a regular file only), never created.
func (a *AuditFile) rotateInPlace(src io.Reader) error {
	f, err := openRegular(a.dir, a.name+".1", a.path+".1", os.O_WRONLY)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err = io.Copy(f, src)
	return err
}

// openRegular opens path with flag, refusing a symlink (O_NOFOLLOW) and
// anything but a regular file (O_NONBLOCK first, so that a FIFO cannot
// stall the open), and sets it back to blocking.
func openRegular(dir int, name, path string, flag int) (*os.File, error) {
	fd, err := unix.Openat(dir, name, flag|syscall.O_CLOEXEC|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0o600)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.ENXIO) {
			return nil, fmt.Errorf("%s: %w", path, ErrAuditNotRegular)
		}
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, ErrAuditNotRegular)
	}
	// One name only: a second one, planted by an earlier sandbox in the
	// same workspace (`ln audit.log notes.txt`), is not covered by the
	// read-only bind over this name, and through it a later sandbox
	// empties the log and writes lines of its own (review 18).
	if n := st.Sys().(*syscall.Stat_t).Nlink; n > 1 {
		f.Close()
		return nil, fmt.Errorf("%s: %w (it has %d)", path, ErrAuditHardLinked, n)
	}
	unix.SetNonblock(int(f.Fd()), false)
	return f, nil
}

// Close writes the count of a run in progress and closes the file.
func (a *AuditFile) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return nil
	}
	a.flushRuns(a.now())
	err := a.f.Close()
	a.f = nil
	unix.Close(a.dir)
	return err
}

// refusalKey identifies a failed call for coalescing: the same session,
// kind, API, method or tool and error. Arguments and times differ in a
// loop; they are not part of the key. "" for a line that is no failure.
func refusalKey(line []byte) (string, map[string]any) {
	var e struct {
		OK      *bool  `json:"ok"`
		Kind    string `json:"kind"`
		Session string `json:"session"`
		API     string `json:"api"`
		Method  string `json:"method"`
		Tool    string `json:"tool"`
		Error   string `json:"error"`
	}
	if json.Unmarshal(line, &e) != nil || e.OK == nil || *e.OK {
		return "", nil
	}
	k, _ := json.Marshal([]string{e.Session, e.Kind, e.API, e.Method, e.Tool, e.Error})
	entry := map[string]any{"session": e.Session, "kind": e.Kind, "ok": false, "error": e.Error}
	for name, v := range map[string]string{"api": e.API, "method": e.Method, "tool": e.Tool} {
		if v != "" {
			entry[name] = v
		}
	}
	return string(k), entry
}
