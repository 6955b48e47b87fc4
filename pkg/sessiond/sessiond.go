// Package sessiond keeps named tool sessions for the CLI: a small per-user
// daemon holds one sandbox (pkg/sandbox Session) alive between
// `nsbox tools call --session NAME` invocations and serves them over a unix
// socket. This package is the leaf the daemon and its clients share: the
// private runtime directory, the session records, the socket (same-uid
// peers only) and the request protocol. It starts no sandbox itself.
package sessiond

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

var (
	// ErrNoSession is matched when no live session has the name.
	ErrNoSession = errors.New("no such session")
	// ErrExists is matched when a live session already has the name.
	ErrExists = errors.New("a session of that name is running")
	// ErrUnsafeDir is matched when the runtime directory is not private.
	ErrUnsafeDir = errors.New("the runtime directory is not private")
)

// maxMessage bounds one request or response (a tool's arguments, its
// result).
const maxMessage = 64 << 20

// ValidName reports whether s can name a session: 1 to 64 of a-z A-Z 0-9
// _ . -, not starting with a dot (the name is a file name in the runtime
// directory: no "/", no "..", no hidden files).
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > 64 || s[0] == '.' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// Dir is the runtime directory of the sessions of one user.
type Dir struct {
	Path string
}

// RuntimeDir returns the user's private session directory, creating it:
// $XDG_RUNTIME_DIR/nsbox-sessions when XDG_RUNTIME_DIR is set (a tmpfs the
// system empties at logout and reboot), else /tmp/nsbox-sessions-UID.
//
// Security: the directory must be ours, a real directory (not a symlink),
// and mode 0700, or it is refused: in the shared /tmp another user could
// have made it first (to read our sockets' names or plant a socket of
// theirs). Mkdir with 0700 under umask, then Lstat-and-check, closes the
// race: if someone else made it, the check fails.
//
// Only two places, whatever the environment: $XDG_RUNTIME_DIR when it is
// the standard /run/user/UID, else /tmp (not $TMPDIR). Every sandbox
// hides both (SandboxedDirs); a place that followed the environment (a
// session started with another TMPDIR or XDG_RUNTIME_DIR) was one a later
// sandbox did not know to hide, and reached (reviews 47, 49).
func RuntimeDir(getenv func(string) string) (*Dir, error) {
	uid := os.Geteuid()
	var dir string
	if x := getenv("XDG_RUNTIME_DIR"); x != "" && filepath.Clean(x) == runUserDir(uid) {
		if st, err := os.Stat(x); err == nil && st.IsDir() && owner(st) == uid {
			dir = filepath.Join(x, "nsbox-sessions")
		}
	}
	if dir == "" {
		dir = tmpSessionsDir(uid)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("session directory %s: %w", dir, err)
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return nil, fmt.Errorf("session directory %s: %w", dir, err)
	}
	if !st.IsDir() || owner(st) != uid || st.Mode().Perm() != 0o700 {
		return nil, fmt.Errorf("%w: %s must be a directory of uid %d with mode 0700 (it is %v, uid %d); remove it", ErrUnsafeDir, dir, uid, st.Mode(), owner(st))
	}
	return &Dir{Path: dir}, nil
}

// runUserRoot and tmpRoot are /run/user and /tmp; tests move them.
var runUserRoot, tmpRoot = "/run/user", "/tmp"

func runUserDir(uid int) string { return filepath.Join(runUserRoot, strconv.Itoa(uid)) }
func tmpSessionsDir(uid int) string {
	return filepath.Join(tmpRoot, "nsbox-sessions-"+strconv.Itoa(uid))
}

// SandboxedDirs makes the session directory of this environment
// (RuntimeDir) and /tmp's (0700), and returns the first ("" when it is
// not safe to use) and the two places a session of this user may keep its
// socket, /run/user/UID/nsbox-sessions and /tmp/nsbox-sessions-UID, that
// exist: every sandbox hides them both, whichever environment started the
// session (a shell without XDG_RUNTIME_DIR: cron, an MCP client, env -i;
// review 47). Made first, so that no sandbox with a writable /tmp can make
// one and own it.
func SandboxedDirs(getenv func(string) string) (own string, all []string) {
	uid := os.Geteuid()
	if d, err := RuntimeDir(getenv); err == nil {
		own = d.Path
	}
	os.Mkdir(tmpSessionsDir(uid), 0o700)
	for _, d := range []string{filepath.Join(runUserDir(uid), "nsbox-sessions"), tmpSessionsDir(uid)} {
		if st, err := os.Lstat(d); err == nil && st.IsDir() {
			all = append(all, d)
		}
	}
	return own, all
}

func owner(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// Socket is the path of session name's socket.
func (d *Dir) Socket(name string) string { return filepath.Join(d.Path, name+".sock") }

func (d *Dir) record(name string) string { return filepath.Join(d.Path, name+".json") }

// Lock takes the session's lock for the life of its daemon: a second
// daemon of the same name (two `tools call --session` racing to start it)
// fails with ErrExists before it starts a sandbox. The kernel drops the
// lock when the daemon dies, however it dies.
func (d *Dir) Lock(name string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(d.Path, name+".lock"), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %q", ErrExists, name)
		}
		return nil, err
	}
	return f, nil
}

// Unlock removes the lock file of a daemon that is ending and releases its
// lock. (A daemon starting meanwhile either failed on the old lock, or
// creates and locks a new file.)
func (d *Dir) Unlock(name string, f *os.File) {
	os.Remove(filepath.Join(d.Path, name+".lock"))
	f.Close()
}

// Log is the path of session name's daemon log.
func (d *Dir) Log(name string) string { return filepath.Join(d.Path, name+".log") }

// Info describes a running session.
type Info struct {
	Name      string    `json:"name"`
	PID       int       `json:"pid"`
	Owner     int       `json:"owner,omitempty"`
	Workspace string    `json:"workspace"`
	Profile   string    `json:"profile"`
	Started   time.Time `json:"started"`
	Idle      string    `json:"idle_timeout"`
	BootID    string    `json:"boot_id"`
}

// BootID is this boot's id (/proc/sys/kernel/random/boot_id): a session
// recorded under another boot id is a leftover of an earlier boot.
func BootID() string {
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b))
}

// WriteInfo records a session (atomically: a reader never sees half).
func (d *Dir) WriteInfo(in Info) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	tmp := d.record(in.Name) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, d.record(in.Name))
}

// Remove deletes a session's socket, record and log.
func (d *Dir) Remove(name string) {
	os.Remove(d.Socket(name))
	os.Remove(d.record(name))
	os.Remove(d.Log(name))
}

// Lookup returns the record of a live session. A record left by an earlier
// boot, or by a daemon that is gone, is removed and reported as
// ErrNoSession.
func (d *Dir) Lookup(name string) (*Info, error) {
	if !ValidName(name) {
		return nil, fmt.Errorf("invalid session name %q (1 to 64 of a-z A-Z 0-9 _ . -, not starting with a dot)", name)
	}
	b, err := os.ReadFile(d.record(name))
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Lstat(d.Socket(name)); serr == nil && !alive(d.Socket(name)) {
			d.Remove(name)
		}
		return nil, fmt.Errorf("%w: %q", ErrNoSession, name)
	}
	if err != nil {
		return nil, err
	}
	var in Info
	if err := json.Unmarshal(b, &in); err != nil || in.BootID != BootID() || !alive(d.Socket(name)) {
		d.Remove(name)
		return nil, fmt.Errorf("%w: %q", ErrNoSession, name)
	}
	return &in, nil
}

// List returns the live sessions, by name.
func (d *Dir) List() ([]Info, error) {
	ents, err := os.ReadDir(d.Path)
	if err != nil {
		return nil, err
	}
	var out []Info
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !ValidName(name) {
			continue
		}
		if in, err := d.Lookup(name); err == nil {
			out = append(out, *in)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// alive reports whether a daemon answers on the socket.
func alive(sock string) bool {
	c, err := net.DialTimeout("unix", sock, 2*time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// Request is one message to the daemon.
type Request struct {
	// Op is "call", "ping" or "stop".
	Op        string          `json:"op"`
	Tool      string          `json:"tool,omitempty"`
	Args      json.RawMessage `json:"args,omitempty"`
	TimeoutMs int64           `json:"timeout_ms,omitempty"`
}

// Response is the daemon's answer.
type Response struct {
	// Result is the tool's result object (op call).
	Result json.RawMessage `json:"result,omitempty"`
	// Error is set when the daemon could not run the call.
	Error string `json:"error,omitempty"`
	Info  *Info  `json:"info,omitempty"`
	// Report is what the session's end said (op stop): the git and
	// agent-file audit's lines, which the caller prints.
	Report []string `json:"report,omitempty"`
}

// Listen makes the session's socket. Only the directory's owner can reach
// it (0700 directory, 0600 socket); Accept checks each peer's uid too.
func (d *Dir) Listen(name string) (*Listener, error) {
	sock := d.Socket(name)
	if alive(sock) {
		return nil, fmt.Errorf("%w: %q", ErrExists, name)
	}
	os.Remove(sock) // a stale socket of a daemon that died
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return nil, err
	}
	l.SetUnlinkOnClose(false)
	// The 0700 directory is the boundary; the socket's own mode is a
	// second one (connect(2) needs write permission on it).
	if err := os.Chmod(sock, 0o600); err != nil {
		l.Close()
		return nil, err
	}
	return &Listener{l: l, uid: os.Geteuid()}, nil
}

// Listener accepts connections of the same user only.
type Listener struct {
	l   *net.UnixListener
	uid int
}

// Accept returns the next connection whose peer runs as our uid.
//
// Security: SO_PEERCRED is the kernel's record of who connected
// (unix(7)); a peer of another uid (root excepted by nothing: a root peer
// is refused too unless we are root) is closed unanswered. The 0700
// directory already keeps others out; this holds even if the socket was
// handed over or the directory's mode changed.
func (l *Listener) Accept() (*net.UnixConn, error) {
	for {
		c, err := l.l.AcceptUnix()
		if err != nil {
			return nil, err
		}
		if checkPeer(c, l.uid) != nil {
			c.Close()
			continue
		}
		return c, nil
	}
}

// Close stops listening.
func (l *Listener) Close() error { return l.l.Close() }

// SetDeadline bounds the next Accept.
func (l *Listener) SetDeadline(t time.Time) error { return l.l.SetDeadline(t) }

// errForeignPeer: the other end of a session's socket is not the user
// outside every sandbox.
var errForeignPeer = errors.New("the peer is not this user outside the sandboxes")

// checkPeer says whether the other end of c is a process of uid in this
// process's user namespace. The uid alone does not tell the user from a
// root-less sandbox of the user's: its commands run as the user's own host
// uid. One that reached the socket (a sandbox given the session directory
// as a writable place: `--rw /tmp` without $XDG_RUNTIME_DIR) drove every
// session of the user's past its own policy and timeout, and could have
// put its own socket in a session's place for the user's next call
// (review 44); a sandbox's processes are in a user namespace of its own.
// As the identity holder's stage checks its peer (pkg/namespaces).
func checkPeer(c *net.UnixConn, uid int) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var (
		cred  *unix.Ucred
		pidfd = -1
		cerr  error
	)
	if err := rc.Control(func(fd uintptr) {
		if cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); cerr == nil {
			// The peer itself, not whatever process has its number
			// later (SO_PEERPIDFD, Linux 6.5; else by number).
			if p, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PEERPIDFD); err == nil {
				pidfd = p
			}
		}
	}); err != nil {
		return err
	}
	if cerr != nil {
		return cerr
	}
	if pidfd < 0 {
		if pidfd, err = unix.PidfdOpen(int(cred.Pid), 0); err != nil {
			return fmt.Errorf("%w: pid %d: %v", errForeignPeer, cred.Pid, err)
		}
	}
	defer unix.Close(pidfd)
	if int(cred.Uid) != uid {
		return fmt.Errorf("%w: uid %d", errForeignPeer, cred.Uid)
	}
	var own, peer unix.Stat_t
	if err := unix.Stat("/proc/self/ns/user", &own); err != nil {
		return err
	}
	if err := unix.Stat("/proc/"+strconv.Itoa(int(cred.Pid))+"/ns/user", &peer); err != nil {
		return fmt.Errorf("%w: %v", errForeignPeer, err)
	}
	// The number named the peer while its namespace was read only if the
	// peer has not exited since (a pidfd polls readable once it has).
	if n, err := unix.Poll([]unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}, 0); err != nil || n != 0 {
		return fmt.Errorf("%w: it exited", errForeignPeer)
	}
	if own.Dev != peer.Dev || own.Ino != peer.Ino {
		return fmt.Errorf("%w: another user namespace (a sandbox)", errForeignPeer)
	}
	return nil
}

// dialChecked connects to a session's socket and checks that the daemon
// listening there is the user's own (checkPeer): a sandbox that could write
// in the session directory could put its own socket in a session's place,
// to read the user's next call and answer it.
func dialChecked(sock string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout("unix", sock, timeout)
	if err != nil {
		return nil, err
	}
	if err := checkPeer(c.(*net.UnixConn), os.Geteuid()); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// ReadRequest reads one request (one JSON object, bounded).
func ReadRequest(r io.Reader) (*Request, error) {
	var req Request
	if err := readMessage(r, &req); err != nil {
		return nil, err
	}
	return &req, nil
}

// WriteMessage writes a request or response as one JSON line.
func WriteMessage(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

func readMessage(r io.Reader, v any) error {
	br := bufio.NewReader(io.LimitReader(r, maxMessage+1))
	line, err := br.ReadBytes('\n')
	if len(line) > maxMessage {
		return fmt.Errorf("message over %d bytes", maxMessage)
	}
	if err != nil && !(errors.Is(err, io.EOF) && len(bytes.TrimSpace(line)) > 0) {
		return err
	}
	return json.Unmarshal(line, v)
}

// Call sends req to session name and returns the answer.
func (d *Dir) Call(name string, req Request) (*Response, error) {
	if _, err := d.Lookup(name); err != nil {
		return nil, err
	}
	c, err := dialChecked(d.Socket(name), 5*time.Second)
	if err != nil {
		return nil, fmt.Errorf("session %q: %w", name, err)
	}
	defer c.Close()
	if err := WriteMessage(c, req); err != nil {
		return nil, fmt.Errorf("session %q: %w", name, err)
	}
	var resp Response
	if err := readMessage(c, &resp); err != nil {
		return nil, fmt.Errorf("session %q: no answer (%v): the session's daemon may have died; see %s", name, err, d.Log(name))
	}
	return &resp, nil
}
