package mcpserver

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// TokenFile is a bearer token made for one run of an HTTP server, in a file
// only its user can read. Remove deletes the file.
type TokenFile struct {
	// Path is the file's absolute path (its directory's symlinks
	// resolved): what a client reads, and what the sandboxes hide.
	Path  string
	Token string
	dir   *os.File
	name  string
}

// ErrTokenDir is a directory that cannot hold a token safely (another
// user's, or one others can enter).
var ErrTokenDir = errors.New("the directory for the bearer token must be yours and mode 0700")

// tokenBytes is the entropy of a made token: 256 bits, beyond guessing.
const tokenBytes = 32

// NewTokenFile makes a random token and writes it to a new file in dir
// (created 0700 if missing): mcp-http-PID-RANDOM.token, mode 0600.
func NewTokenFile(dir string) (*TokenFile, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("token directory %q: must be an absolute path", dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("token directory: %w", err)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("token directory: %w", err)
	}
	// O_NOFOLLOW: the directory checked below is the one written in, not
	// a link swapped in after EvalSymlinks.
	dfd, err := unix.Open(real, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("token directory %s: %w", real, err)
	}
	d := os.NewFile(uintptr(dfd), real)
	var st unix.Stat_t
	if err := unix.Fstat(dfd, &st); err != nil {
		d.Close()
		return nil, fmt.Errorf("token directory %s: %w", real, err)
	}
	// Only the server's user may list or enter the directory: another
	// user must not learn the file's name nor open it before its mode is
	// set (and cannot plant a file there for us to trust).
	if int(st.Uid) != os.Geteuid() || st.Mode&0o077 != 0 {
		d.Close()
		return nil, fmt.Errorf("%s (owner uid %d, mode %04o): %w", real, st.Uid, st.Mode&0o7777, ErrTokenDir)
	}
	removeStaleTokens(d)
	raw := make([]byte, tokenBytes)
	if _, err := rand.Read(raw); err != nil {
		d.Close()
		return nil, fmt.Errorf("making a bearer token: %w", err)
	}
	suffix := make([]byte, 4)
	rand.Read(suffix)
	t := &TokenFile{Token: hex.EncodeToString(raw), dir: d}
	t.name = fmt.Sprintf("mcp-http-%d-%s.token", os.Getpid(), hex.EncodeToString(suffix))
	t.Path = filepath.Join(real, t.name)
	// O_EXCL|O_NOFOLLOW: a new file of ours, never an existing file or a
	// link planted under the name; mode 0600 from the first byte.
	fd, err := unix.Openat(dfd, t.name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("token file %s: %w", t.Path, err)
	}
	f := os.NewFile(uintptr(fd), t.Path)
	_, werr := f.WriteString(t.Token + "\n")
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		t.Remove()
		return nil, fmt.Errorf("token file %s: %w", t.Path, werr)
	}
	return t, nil
}

// Remove deletes the token file (by name in the directory it was made in).
// It is idempotent.
func (t *TokenFile) Remove() error {
	if t == nil || t.dir == nil {
		return nil
	}
	err := unix.Unlinkat(int(t.dir.Fd()), t.name, 0)
	t.dir.Close()
	t.dir = nil
	if err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("removing token file %s: %w", t.Path, err)
	}
	return nil
}

// removeStaleTokens removes the token files of servers that are gone
// (killed before they could remove their own): a token nobody serves is
// no use, only a credential lying around. A file whose process id was
// reused is left for a later run.
func removeStaleTokens(d *os.File) {
	names, err := d.Readdirnames(-1)
	d.Seek(0, io.SeekStart)
	if err != nil {
		return
	}
	for _, n := range names {
		var pid int
		var rest string
		if _, err := fmt.Sscanf(n, "mcp-http-%d-%s", &pid, &rest); err != nil || pid <= 0 || !strings.HasSuffix(rest, ".token") {
			continue
		}
		if pid == os.Getpid() || !errors.Is(unix.Kill(pid, 0), unix.ESRCH) {
			continue
		}
		unix.Unlinkat(int(d.Fd()), n, 0)
	}
}
