// Package store is the embedded, file-backed store behind nsbox's host APIs
// (memory, notepad), and the errors they share.
//
// A store is one bbolt file (go.etcd.io/bbolt: pure Go, one file, ACID
// transactions, an advisory file lock). It is opened for one operation and
// closed right after, so that several nsbox processes (a CLI listing memories
// while a session saves one) interleave instead of locking each other out:
// bbolt holds an exclusive flock for as long as a writable handle is open.
// Operations queue on a lock file next to the store (NAME.lock; see
// lockFile), exclusive for writers, shared for readers. Readers never create
// the store; the first write creates the directory (0700) and the file
// (0600).
//
// A file that cannot be read as a store of the expected kind is reported as
// a *CorruptError naming it, and is never repaired, truncated or replaced.
package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"sync"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	"golang.org/x/sys/unix"
)

// DefaultLockTimeout is how long an operation waits for another process's
// lock before it fails with a *BusyError.
const DefaultLockTimeout = 10 * time.Second

// Options tune a Store.
type Options struct {
	// LockTimeout bounds the wait for another process's lock
	// (0: DefaultLockTimeout).
	LockTimeout time.Duration
	// MoveAsideCorrupt renames a store file found corrupt to
	// NAME.corrupt-TIMESTAMP (same directory), so that the next write
	// starts a new, empty store. The operation still fails with the
	// *CorruptError, whose MovedTo names the new path. Off by default: a
	// damaged store is the user's data, kept where it is until they ask.
	MoveAsideCorrupt bool
}

// Store is one store file. It holds no open file between operations and is
// safe for concurrent use by many goroutines and processes.
type Store struct {
	path    string
	kind    string
	timeout time.Duration
	mu      *sync.RWMutex
	// moveAside: Options.MoveAsideCorrupt.
	moveAside bool
}

// formatBucket holds the marker that says which kind of store a file is.
const (
	formatBucket = "nsbox"
	formatKey    = "format"
)

// processLocks serialises the operations of this process on one file:
// flock(2) would do it too (two opens conflict even in one process), but
// only by polling.
var (
	processLocksMu sync.Mutex
	processLocks   = map[string]*sync.RWMutex{}
)

func processLock(path string) *sync.RWMutex {
	processLocksMu.Lock()
	defer processLocksMu.Unlock()
	l, ok := processLocks[path]
	if !ok {
		l = &sync.RWMutex{}
		processLocks[path] = l
	}
	return l
}

// New returns the store at path holding data of kind (e.g. "memory"). It
// touches nothing on disk: the file is created by the first write.
func New(path, kind string, o Options) (*Store, error) {
	if path == "" || !filepath.IsAbs(path) {
		return nil, fmt.Errorf("store path %q must be absolute", path)
	}
	if kind == "" {
		return nil, errors.New("store kind is empty")
	}
	path = filepath.Clean(path)
	t := o.LockTimeout
	if t <= 0 {
		t = DefaultLockTimeout
	}
	return &Store{path: path, kind: kind, timeout: t, mu: processLock(path), moveAside: o.MoveAsideCorrupt}, nil
}

// Path is the store file.
func (s *Store) Path() string { return s.path }

// View runs fn in a read-only transaction. A store that does not exist yet
// reads as empty, and nothing is created.
func (s *Store) View(ctx context.Context, fn func(*Tx) error) error {
	return s.afterCorrupt(s.view(ctx, fn))
}

func (s *Store) view(ctx context.Context, fn func(*Tx) error) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	// A store that was never written (no file, or an empty file left by a
	// first write that did not finish) reads as empty.
	if fi, err := os.Lstat(s.path); errors.Is(err, fs.ErrNotExist) || (err == nil && fi.Mode().IsRegular() && fi.Size() == 0) {
		return fn(&Tx{})
	}
	timeout := s.lockTimeout(ctx)
	l, err := lockStore(s.path+".lock", false, timeout)
	if err != nil {
		return s.lockErr(err, timeout)
	}
	defer l.unlock()
	defer s.seen(&err)
	db, err := s.open(timeout, true)
	if err != nil {
		return err
	}
	defer db.Close()
	return s.run(func() error {
		return db.View(func(btx *bolt.Tx) error {
			tx := &Tx{tx: btx}
			if err := s.checkFormat(tx, false); err != nil {
				return err
			}
			return fn(tx)
		})
	})
}

// Update runs fn in a read-write transaction: all of fn's changes are
// committed together, or none when fn returns an error.
func (s *Store) Update(ctx context.Context, fn func(*Tx) error) error {
	return s.afterCorrupt(s.update(ctx, fn))
}

func (s *Store) update(ctx context.Context, fn func(*Tx) error) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := ensureDir(filepath.Dir(s.path)); err != nil {
		return err
	}
	timeout := s.lockTimeout(ctx)
	l, err := lockStore(s.path+".lock", true, timeout)
	if err != nil {
		return s.lockErr(err, timeout)
	}
	defer l.unlock()
	defer s.seen(&err)
	db, err := s.open(timeout, false)
	if err != nil {
		return err
	}
	defer db.Close()
	return s.run(func() error {
		return db.Update(func(btx *bolt.Tx) error {
			tx := &Tx{tx: btx, writable: true}
			if err := s.checkFormat(tx, true); err != nil {
				return err
			}
			return fn(tx)
		})
	})
}

// seen gives a *CorruptError about the store's file in *err the identity
// of the file there now, while the operation's lock is still held: the
// file it found corrupt.
func (s *Store) seen(err *error) {
	var ce *CorruptError
	if errors.As(*err, &ce) && ce.Path == s.path && ce.file == (fileID{}) {
		ce.file = idOf(s.path)
	}
}

// idOf is the identity of the file at path (no link followed); zero when
// there is none.
func idOf(path string) fileID {
	var st syscall.Stat_t
	if syscall.Lstat(path, &st) != nil {
		return fileID{}
	}
	return fileID{uint64(st.Dev), st.Ino}
}

// corrupt is a *CorruptError about the store's file.
func (s *Store) corrupt(reason string) *CorruptError {
	return &CorruptError{Path: s.path, Reason: reason}
}

// afterCorrupt moves the store's file aside when err says it is corrupt and
// the store was asked to (Options.MoveAsideCorrupt).
func (s *Store) afterCorrupt(err error) error {
	var ce *CorruptError
	if !s.moveAside || !errors.As(err, &ce) || ce.Path != s.path {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Under the writers' lock: no other nsbox process is inside the file.
	l, lerr := lockStore(s.path+".lock", true, s.timeout)
	if lerr != nil {
		return err
	}
	defer l.unlock()
	// Only the file found corrupt: another process may have moved it
	// away since, and a new, healthy store been written in its place,
	// which this rename then hid as corrupt (review 50).
	if ce.file == (fileID{}) || idOf(s.path) != ce.file {
		return err
	}
	to := s.path + ".corrupt-" + time.Now().UTC().Format("20060102T150405.000000000Z")
	// rename(2) moves the name, never the data: a symbolic link or FIFO at
	// the store's name is moved as it is, nothing it points to is touched.
	if rerr := os.Rename(s.path, to); rerr != nil {
		ce.MoveErr = rerr
		return ce
	}
	ce.MovedTo = to
	return ce
}

// run turns a panic inside bbolt (how it reacts to some damaged pages) into
// a *CorruptError; the transaction has been rolled back by then.
//
// Second line of defence behind checkStoreFile: a fault in the mapped file
// (SIGBUS past its end, SIGSEGV past the mapping) is a fatal runtime error
// that no recover() catches, unless this goroutine asked for a panic
// instead (runtime/debug.SetPanicOnFault). bbolt touches the mapping only on
// the goroutine that runs the transaction, which is this one.
func (s *Store) run(fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = s.corrupt(fmt.Sprintf("damaged data (%v)", r))
		}
	}()
	return fn()
}

// lockTimeout is the store's lock timeout, shortened to ctx's deadline.
func (s *Store) lockTimeout(ctx context.Context) time.Duration {
	timeout := s.timeout
	if d, ok := ctx.Deadline(); ok {
		if left := time.Until(d); left < timeout {
			timeout = max(left, time.Millisecond)
		}
	}
	return timeout
}

func (s *Store) lockErr(err error, timeout time.Duration) error {
	if errors.Is(err, errLockTimeout) {
		return &BusyError{Path: s.path, Waited: timeout}
	}
	return err
}

// open opens the bbolt file; the caller holds the lock file, so bbolt's own
// lock only waits for other programs.
func (s *Store) open(timeout time.Duration, readOnly bool) (*bolt.DB, error) {
	var (
		db  *bolt.DB
		err error
	)
	// Even an open can panic on a damaged file.
	perr := s.run(func() error {
		db, err = bolt.Open(s.path, 0o600, &bolt.Options{
			ReadOnly: readOnly,
			Timeout:  timeout,
			OpenFile: openStoreFile,
		})
		return nil
	})
	if perr != nil {
		return nil, perr
	}
	if err == nil {
		return db, nil
	}
	var ce *CorruptError
	var pe *fs.PathError
	switch {
	case errors.As(err, &ce):
		return nil, ce
	case errors.Is(err, berrors.ErrTimeout):
		return nil, &BusyError{Path: s.path, Waited: timeout}
	case errors.Is(err, berrors.ErrInvalid):
		return nil, &CorruptError{Path: s.path, Reason: "not a bbolt database (invalid meta pages)"}
	case errors.Is(err, berrors.ErrVersionMismatch):
		return nil, &CorruptError{Path: s.path, Reason: "written by an incompatible bbolt version"}
	case errors.Is(err, berrors.ErrChecksum):
		return nil, &CorruptError{Path: s.path, Reason: "checksum mismatch in the meta pages"}
	case errors.As(err, &pe):
		return nil, err // names the file already
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return nil, fmt.Errorf("open store %s: %w", s.path, err)
	}
	// bbolt's other open errors are about the file's content (for example
	// "file size too small" for a truncated file).
	return nil, &CorruptError{Path: s.path, Reason: err.Error()}
}

// checkFormat refuses a file that holds another kind of data: a bbolt file
// of another program, or the notepad store opened as the memory store.
func (s *Store) checkFormat(tx *Tx, write bool) error {
	want := "nsbox-" + s.kind + "/1"
	b := tx.tx.Bucket([]byte(formatBucket))
	if b == nil {
		empty := true
		tx.tx.ForEach(func([]byte, *bolt.Bucket) error { empty = false; return errStop })
		if !empty {
			return &CorruptError{Path: s.path, Reason: "not an nsbox " + s.kind + " store (no format marker)"}
		}
		if !write {
			return nil
		}
		nb, err := tx.tx.CreateBucket([]byte(formatBucket))
		if err != nil {
			return err
		}
		return nb.Put([]byte(formatKey), []byte(want))
	}
	if got := string(b.Get([]byte(formatKey))); got != want {
		return &CorruptError{Path: s.path, Reason: fmt.Sprintf("holds %q, not an nsbox %s store", got, s.kind)}
	}
	return nil
}

var errStop = errors.New("stop")

// openStoreFile is how bbolt opens the file. The store's name is a fixed
// file in the user's data directory, but a directory a sandbox could once
// write to must not turn it into something else:
func openStoreFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	// O_NOFOLLOW: a symlink at the store's name is refused, never followed
	// (it could point the host's writes at any file of the user).
	// O_NONBLOCK: a FIFO there cannot hang the host process.
	f, err := os.OpenFile(name, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, perm)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, &CorruptError{Path: name, Reason: "it is a symbolic link, which nsbox does not follow"}
		}
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, &CorruptError{Path: name, Reason: "not a regular file (" + fi.Mode().Type().String() + ")"}
	}
	// The file's structure is checked with plain reads before bbolt maps
	// it: bbolt follows page ids and offsets unchecked, and a truncated or
	// damaged file would fault in the mapping and kill the process (a
	// notepad call would take the whole MCP server and its sandbox down).
	if err := checkStoreFile(f); err != nil {
		f.Close()
		return nil, &CorruptError{Path: name, Reason: err.Error()}
	}
	// The store holds what agents saved: private to its owner (0600).
	if flag&(os.O_WRONLY|os.O_RDWR) != 0 && fi.Mode().Perm()&0o077 != 0 {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == os.Geteuid() {
			f.Chmod(0o600)
		}
	}
	return f, nil
}

// ensureDir creates the store's directory 0700, and tightens it to 0700
// when it is ours and open to others: what agents save is private.
func ensureDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create store directory: %w", err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("store directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("store directory %s is not a directory", dir)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == os.Geteuid() {
			return tightenDir(dir)
		}
	}
	return nil
}

// tightenDir makes dir mode 0700, through an fd of dir itself, and only
// when no symlink leads there: a store directory in a workspace whose
// name (or a directory above it) an earlier sandbox made a link to a
// host directory had root chmod that directory 0700 (review 71:
// `state -> /usr/lib` would have locked every user out of it). A store
// directory reached through a link keeps its mode, and the user is told.
func tightenDir(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("store directory: %w", err)
	}
	fd, err := unix.Open(abs, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("store directory %s: %w (a symbolic link? give the directory it leads to)", dir, err)
	}
	defer unix.Close(fd)
	real, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil || real != filepath.Clean(abs) {
		return fmt.Errorf("store directory %s leads through a symbolic link to %s and others may read it: give %s itself, after chmod 700 %s", dir, real, real, real)
	}
	if err := unix.Fchmod(fd, 0o700); err != nil {
		return fmt.Errorf("store directory: %w", err)
	}
	return nil
}

// Tx is one transaction. Values returned by its methods are copies, valid
// after the transaction ends. The zero Tx (a store that does not exist) is
// empty and read-only.
type Tx struct {
	tx       *bolt.Tx
	writable bool
}

var errReadOnly = errors.New("store: write in a read-only transaction")

func (t *Tx) bucket(name string) *bolt.Bucket {
	if t.tx == nil {
		return nil
	}
	return t.tx.Bucket([]byte(name))
}

func (t *Tx) writeBucket(name string) (*bolt.Bucket, error) {
	if t.tx == nil || !t.writable {
		return nil, errReadOnly
	}
	return t.tx.CreateBucketIfNotExists([]byte(name))
}

// Get returns a copy of the value at key, or nil.
func (t *Tx) Get(bucket, key string) []byte {
	b := t.bucket(bucket)
	if b == nil {
		return nil
	}
	v := b.Get([]byte(key))
	if v == nil {
		return nil
	}
	return append([]byte{}, v...)
}

// Put stores val at key, creating the bucket when needed.
func (t *Tx) Put(bucket, key string, val []byte) error {
	b, err := t.writeBucket(bucket)
	if err != nil {
		return err
	}
	return b.Put([]byte(key), val)
}

// Delete removes key and reports whether it existed.
func (t *Tx) Delete(bucket, key string) (bool, error) {
	if !t.writable {
		return false, errReadOnly
	}
	b := t.bucket(bucket)
	if b == nil || b.Get([]byte(key)) == nil {
		return false, nil
	}
	return true, b.Delete([]byte(key))
}

// ForEachView calls fn for each key in order with its value as stored:
// valid only during fn, which must not keep it nor write in it. It reads
// the mapped file on the transaction's goroutine, under run's fault
// guard, and copies nothing: a list of a notepad's tabs copied 2 MiB a
// tab to read their metadata (review 40).
func (t *Tx) ForEachView(bucket string, fn func(key string, val []byte) error) error {
	b := t.bucket(bucket)
	if b == nil {
		return nil
	}
	return b.ForEach(func(k, v []byte) error {
		if v == nil { // a nested bucket: the host APIs make none
			return nil
		}
		return fn(string(k), v)
	})
}

// ForEach calls fn for each key in order, with a copy of its value.
func (t *Tx) ForEach(bucket string, fn func(key string, val []byte) error) error {
	return t.ForEachView(bucket, func(k string, v []byte) error { return fn(k, append([]byte{}, v...)) })
}

// Len counts the keys of bucket.
func (t *Tx) Len(bucket string) int {
	b := t.bucket(bucket)
	if b == nil {
		return 0
	}
	n := 0
	c := b.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		n++
	}
	return n
}

// NextSequence returns the next value of bucket's counter (1, 2, ...).
func (t *Tx) NextSequence(bucket string) (uint64, error) {
	b, err := t.writeBucket(bucket)
	if err != nil {
		return 0, err
	}
	return b.NextSequence()
}
