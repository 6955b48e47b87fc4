package mcpserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
//   - A loop of refused calls must not fill the disk: identical refusals in
//     a row are counted, not written (a "repeated" line at most once a
//     second), and the file is rotated at a size cap: FILE.1 holds the
//     previous part, so the log never takes more than twice the cap.

// DefaultAuditMax is the size at which the audit file is rotated.
const DefaultAuditMax = 64 << 20

// coalesceEvery is how often a run of identical refusals writes its count.
const coalesceEvery = time.Second

// AuditFile is an append-only, bounded JSON-lines audit log. Each Write
// must be one whole line (as the session's audit and Server.audit write
// them). It is safe for concurrent use.
type AuditFile struct {
	mu   sync.Mutex
	f    *os.File
	path string
	max  int64
	size int64

	// The run of identical refusals being counted.
	runKey   string
	runLine  map[string]any
	runCount int
	runFirst time.Time
	runFlush time.Time
	now      func() time.Time
}

// ErrAuditNotRegular refuses an audit path that is a symlink or not a
// regular file.
var ErrAuditNotRegular = errors.New("not a regular file (a symlink, a FIFO or a device is refused: name the file itself)")

// OpenAudit opens (creating it, mode 0600) the audit file at path, to be
// rotated at max bytes (0: DefaultAuditMax).
func OpenAudit(path string, max int64) (*AuditFile, error) {
	if max <= 0 {
		max = DefaultAuditMax
	}
	// O_NOFOLLOW: a symlink planted at the path is refused (ELOOP), never
	// followed to a file the user's shell runs. O_NONBLOCK: a FIFO there
	// does not block the open; it is refused below.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND|syscall.O_CLOEXEC|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0o600)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.ENXIO) {
			return nil, fmt.Errorf("%s: %w", path, ErrAuditNotRegular)
		}
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, ErrAuditNotRegular)
	}
	// Back to blocking writes (O_NONBLOCK has no effect on a regular file,
	// but say what is meant). Opened for reading too: rotation copies it.
	unix.SetNonblock(int(f.Fd()), false)
	return &AuditFile{f: f, path: path, max: max, size: st.Size(), now: time.Now}, nil
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
	if key != "" && key == a.runKey {
		a.runCount++
		if now.Sub(a.runFlush) >= coalesceEvery {
			a.flushRun(now)
		}
		return len(line), nil
	}
	a.flushRun(now)
	a.runKey, a.runLine, a.runCount, a.runFirst, a.runFlush = key, entry, 0, now, now
	if err := a.append(line); err != nil {
		return 0, err
	}
	return len(line), nil
}

// flushRun writes how many refusals of the current run were counted since
// the last such line.
func (a *AuditFile) flushRun(now time.Time) {
	if a.runCount == 0 {
		return
	}
	rec := map[string]any{
		"time":     now.UTC().Format(time.RFC3339Nano),
		"kind":     "repeated",
		"count":    a.runCount,
		"since":    a.runFirst.UTC().Format(time.RFC3339Nano),
		"repeated": a.runLine,
	}
	if b, err := json.Marshal(rec); err == nil {
		a.append(append(b, '\n'))
	}
	a.runCount, a.runFlush = 0, now
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
func (a *AuditFile) rotate() error {
	src := io.NewSectionReader(a.f, 0, a.size)
	dir, base := filepath.Split(a.path)
	tmp, err := os.CreateTemp(dir, "."+base+".rotate-*")
	if err != nil {
		return err
	}
	_, err = io.Copy(tmp, src)
	if err == nil {
		err = tmp.Chmod(0o600)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), a.path+".1")
	}
	if err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := a.f.Truncate(0); err != nil {
		return err
	}
	a.size = 0
	return nil
}

// Close writes the count of a run in progress and closes the file.
func (a *AuditFile) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return nil
	}
	a.flushRun(a.now())
	err := a.f.Close()
	a.f = nil
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
