package namespaces

/*
#include <stdlib.h>
#include "holder.h"
*/
import "C"

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The identity holder (holder.c): a long-lived process of the caller's
// whose user namespace H maps, each to itself, the host ids of the
// caller's full range, so that a worker created inside H has its maps
// written by a process of nsbox's (its stage) instead of newuidmap and
// newgidmap at every start.

// ErrHolderUnsuitable is wrapped when a holder's namespace does not map
// exactly the host ids an identity needs (the sub-id files changed since
// it started, or it is another program's).
var ErrHolderUnsuitable = errors.New("the identity holder's user namespace does not map this identity's host ids")

// HolderPath is where the caller's holder listens (holder.c
// nsbox_holder_path: in $XDG_RUNTIME_DIR when that is the caller's alone,
// else in /tmp/nsbox-UID, a directory of mode 0700).
func HolderPath() (string, error) {
	var buf [108]C.char
	if C.nsbox_holder_path(&buf[0], C.size_t(len(buf))) != 0 {
		return "", errors.New("the identity holder's socket path is too long")
	}
	return C.GoString(&buf[0]), nil
}

// holderDir makes (when it is /tmp/nsbox-UID) and checks the holder's
// directory: the caller's, not a symlink, no access for anyone else.
func holderDir() (string, error) {
	var buf [108]C.char
	if C.nsbox_holder_dir(&buf[0], C.size_t(len(buf))) != 0 {
		return "", errors.New("the identity holder's directory path is too long")
	}
	dir := C.GoString(&buf[0])
	if err := unix.Mkdir(dir, 0o700); err != nil && err != unix.EEXIST {
		return "", fmt.Errorf("make %s: %w", dir, err)
	}
	if dir == "/tmp/nsbox-"+strconv.Itoa(os.Geteuid()) {
		repairOwnDirMode(dir)
	}
	cdir := C.CString(dir)
	defer C.free(unsafe.Pointer(cdir))
	if C.nsbox_holder_dir_ok(cdir) == 0 {
		return "", fmt.Errorf("%s is not a directory of uid %d's alone (mode 0700): no identity holder", dir, os.Geteuid())
	}
	return dir, nil
}

// repairOwnDirMode gives dir, when it is a directory (not a symlink) of
// this effective uid, its mode 0700 back. Only this uid can have changed
// it, but that includes a Landlock sandbox's command, which runs as the
// caller: at mode 000 the holder's bind failed there and every root-less
// start fell back to newuidmap (found by review). By fd: the inode
// checked is the one changed.
func repairOwnDirMode(dir string) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR && int(st.Uid) == os.Geteuid() && st.Mode&0o7777 != 0o700 {
		unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), 0o700)
	}
}

// HolderDirProblem says why no holder can be started here (nil: one can,
// or its directory is still to be made).
func HolderDirProblem() error {
	var buf [108]C.char
	if C.nsbox_holder_dir(&buf[0], C.size_t(len(buf))) != 0 {
		return errors.New("the identity holder's directory path is too long")
	}
	dir := C.GoString(&buf[0])
	if _, err := os.Lstat(dir); os.IsNotExist(err) {
		return nil
	}
	cdir := C.CString(dir)
	defer C.free(unsafe.Pointer(cdir))
	if C.nsbox_holder_dir_ok(cdir) == 0 {
		return fmt.Errorf("%s is not a directory of uid %d's alone (mode 0700): no identity holder", dir, os.Geteuid())
	}
	return nil
}

// ErrHolderBusy: another start is starting a holder right now.
var ErrHolderBusy = errors.New("another start is starting the identity holder")

// Holder is a running holder: an fd of its user namespace and its pid.
type Holder struct {
	userns *os.File
	Pid    int
	Path   string
}

// ConnectHolder returns the caller's running holder, nil when none
// answers or the one that answers is not the caller's (holder.c checks
// the listener's uid and that the fd is a user namespace the caller owns).
func ConnectHolder() *Holder {
	path, err := HolderPath()
	if err != nil {
		return nil
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var pid C.int
	fd := C.nsbox_holder_connect(cpath, &pid)
	if fd < 0 {
		return nil
	}
	return &Holder{userns: os.NewFile(uintptr(fd), "holder userns"), Pid: int(pid), Path: path}
}

// Close drops the fd of the holder's namespace.
func (h *Holder) Close() {
	if h != nil {
		h.userns.Close()
	}
}

// Suits says whether sandboxes with id may be made in h: nil when h's
// namespace maps exactly the host ids of id's maps, each to itself.
func (h *Holder) Suits(id *Identity) error {
	if err := checkHolderMaps(h.Pid, id); err != nil {
		return err
	}
	// The maps read are h's only if the pid still names a process in h's
	// namespace (it may have exited and its number gone to another).
	var a, b unix.Stat_t
	if err := unix.Fstat(int(h.userns.Fd()), &a); err != nil {
		return err
	}
	if err := unix.Stat("/proc/"+strconv.Itoa(h.Pid)+"/ns/user", &b); err != nil || a.Ino != b.Ino || a.Dev != b.Dev {
		return fmt.Errorf("%w: holder pid %d is gone", ErrHolderUnsuitable, h.Pid)
	}
	return nil
}

// holderMaps is H's map for a sandbox map m: each of m's host ranges to
// itself, so that a map written from H means what the same lines mean
// from the host; and own, the caller's id, to itself if m leaves it out
// (a root-less full range has it already): the kernel makes a user
// namespace only for a creator whose ids its parent maps
// (user_namespaces(7)), and the stage keeps the caller's ids in H.
func holderMaps(m []IDRange, own uint32) []IDRange {
	out := make([]IDRange, 0, len(m)+1)
	covered := false
	for _, r := range m {
		out = append(out, IDRange{Inside: r.Outside, Outside: r.Outside, Count: r.Count})
		covered = covered || (own >= r.Outside && uint64(own) < uint64(r.Outside)+uint64(r.Count))
	}
	if !covered {
		out = append(out, IDRange{Inside: own, Outside: own, Count: 1})
	}
	return out
}

// checkHolderMaps reads the maps of pid's user namespace, as the host
// sees them, and checks that each host id of id's maps is mapped there to
// itself: then the lines the stage writes from there name the same host
// ids as from the host. The worker's namespace gets exactly id's lines
// whatever else the holder maps (the kernel takes no more than is
// written), so a holder of more ids is no risk; one that maps an id
// elsewhere or not at all is refused before anything is written.
func checkHolderMaps(pid int, id *Identity) error {
	dir := "/proc/" + strconv.Itoa(pid) + "/"
	for _, f := range []struct {
		file string
		need []IDRange
	}{{"uid_map", id.UIDMap}, {"gid_map", id.GIDMap}} {
		b, err := os.ReadFile(dir + f.file)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrHolderUnsuitable, err)
		}
		got, err := parseMap(b)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrHolderUnsuitable, f.file, err)
		}
		for _, r := range f.need {
			if !mapsToItself(got, r.Outside, r.Count) {
				return fmt.Errorf("%w: its %s (%v) does not map host ids %d to %d to themselves", ErrHolderUnsuitable, f.file, got, r.Outside, uint64(r.Outside)+uint64(r.Count)-1)
			}
		}
	}
	return nil
}

// mapsToItself: one line of m maps [start, start+count) to the same ids.
func mapsToItself(m []IDRange, start, count uint32) bool {
	for _, l := range m {
		if l.Inside == l.Outside && start >= l.Inside && uint64(start)+uint64(count) <= uint64(l.Inside)+uint64(l.Count) {
			return true
		}
	}
	return false
}

// parseMap reads the text of a uid_map or gid_map file.
func parseMap(b []byte) ([]IDRange, error) {
	var out []IDRange
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		f := bytes.Fields(l)
		if len(f) == 0 {
			continue
		}
		if len(f) != 3 {
			return nil, fmt.Errorf("malformed line %q", l)
		}
		var n [3]uint64
		for i := range f {
			v, err := strconv.ParseUint(string(f[i]), 10, 32)
			if err != nil {
				return nil, fmt.Errorf("malformed line %q", l)
			}
			n[i] = v
		}
		out = append(out, IDRange{Inside: uint32(n[0]), Outside: uint32(n[1]), Count: uint32(n[2])})
	}
	return out, nil
}

// StartHolder starts a holder for id's host ids that exits after idle
// without a connection, and returns once it listens. Its maps are written
// as a sandbox's would be (newuidmap and newgidmap for a root-less
// caller), once for the holder's life. It replaces a holder at the same
// path (one made for other ids), which goes on serving its connections
// until it is idle itself.
func StartHolder(id *Identity, idle time.Duration) (*Holder, error) {
	dir, err := holderDir()
	if err != nil {
		return nil, fmt.Errorf("start the identity holder: %w", err)
	}
	path, err := HolderPath()
	if err != nil {
		return nil, err
	}
	// One start at a time makes a holder: concurrent first starts would
	// each run the helpers again and leave the extra holders idling
	// (found by review). The lock is released when this returns; a start
	// that finds it taken goes on without a holder.
	lock, err := unix.Open(dir+"/nsbox-idholder.lock", unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("start the identity holder: %w", err)
	}
	defer unix.Close(lock)
	if err := unix.Flock(lock, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return nil, ErrHolderBusy
	}
	if h := ConnectHolder(); h != nil {
		if h.Suits(id) == nil {
			return h, nil // made by the start that held the lock before
		}
		h.Close()
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	sup := os.NewFile(uintptr(fds[0]), "holder")
	defer sup.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		unix.Close(fds[1])
		return nil, err
	}
	defer null.Close()
	secs := int(idle / time.Second)
	if secs < 1 {
		secs = 1
	}
	// Not tied to this process: no parent death signal, a session of its
	// own, "/" as its directory, and only /dev/null and its socket.
	pid, err := syscall.ForkExec("/proc/self/exe", []string{"nsbox-idholder", path, strconv.Itoa(secs)}, &syscall.ProcAttr{
		Dir: "/", Env: []string{"_NSBOX_IDHOLDER=1"},
		Files: []uintptr{null.Fd(), null.Fd(), null.Fd(), uintptr(fds[1])},
		Sys:   &syscall.SysProcAttr{Setsid: true},
	})
	unix.Close(fds[1])
	if err != nil {
		return nil, fmt.Errorf("start the identity holder: %w", err)
	}
	// Reaped when it exits, but never while newuidmap may still write to
	// /proc/PID (the number could name another process by then): the
	// maps are written, or failed, before this runs.
	mapped := make(chan struct{})
	defer close(mapped)
	go func() {
		<-mapped
		var ws syscall.WaitStatus
		for {
			if _, err := syscall.Wait4(pid, &ws, 0, nil); err != syscall.EINTR {
				return
			}
		}
	}()
	step := func(want byte) error {
		b := make([]byte, 1)
		n, err := sup.Read(b)
		if err == nil && (n != 1 || b[0] != want) {
			err = errors.New("it exited")
		}
		return err
	}
	if err := step('u'); err != nil {
		return nil, fmt.Errorf("start the identity holder: unshare: %w", err)
	}
	hid := &Identity{Mode: ModeFull, UIDMap: holderMaps(id.UIDMap, uint32(os.Geteuid())), GIDMap: holderMaps(id.GIDMap, uint32(os.Getegid())),
		Helper: id.Helper, NewUIDMap: id.NewUIDMap, NewGIDMap: id.NewGIDMap}
	if err := WriteMaps(pid, hid); err != nil {
		unix.Kill(pid, unix.SIGKILL)
		return nil, fmt.Errorf("start the identity holder: %w", err)
	}
	if _, err := sup.Write([]byte{'g'}); err != nil {
		return nil, fmt.Errorf("start the identity holder: %w", err)
	}
	if err := step('k'); err != nil {
		return nil, fmt.Errorf("start the identity holder: listen on %s: %w", path, err)
	}
	if h := ConnectHolder(); h != nil && h.Pid == pid {
		return h, nil
	} else if h != nil {
		h.Close()
	}
	return nil, fmt.Errorf("start the identity holder: it does not answer on %s", path)
}

// Stage is the process that made a worker inside a holder's namespace and
// writes its maps from there (holder.c); it is the caller's child.
type Stage struct {
	pid  int
	conn *os.File
	once sync.Once
}

type stageArgs struct{ userns, conn *os.File }

// SpawnInHolder is Spawn with the worker made inside h's user namespace:
// the same program, fds, namespaces and capabilities, the worker the
// calling thread's child as with Spawn (the parent death signal's thread
// too). The worker's maps are written by the Stage returned, which the
// caller must end with WriteMaps or Close.
func SpawnInHolder(o Options, a SpawnArgs, h *Holder) (*os.Process, *Stage, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, &SpawnError{Step: "stage socket", Err: err}
	}
	child := os.NewFile(uintptr(fds[1]), "stage")
	pid, err := spawn(o, a, &stageArgs{userns: h.userns, conn: child})
	child.Close()
	if err != nil {
		unix.Close(fds[0])
		return nil, nil, err
	}
	st := AdoptStage(pid, os.NewFile(uintptr(fds[0]), "stage"))
	wpid, err := st.report()
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	// Our own unreaped child (CLONE_PARENT): a pidfd for it, race-free.
	p, err := os.FindProcess(wpid)
	if err != nil {
		st.Close()
		unix.Kill(wpid, unix.SIGKILL)
		var ws unix.WaitStatus
		unix.Wait4(wpid, &ws, 0, nil)
		return nil, nil, err
	}
	return p, st, nil
}

// AdoptStage wraps a stage started by nsbox_spawn (prespawn.c does): pid
// the caller's child, conn the supervisor's end of its socket.
func AdoptStage(pid int, conn *os.File) *Stage { return &Stage{pid: pid, conn: conn} }

var stageSteps = map[int32]string{C.NSBOX_STAGE_JOIN: "join the identity holder's user namespace", C.NSBOX_STAGE_CLONE: "clone in the holder's namespace"}

// report reads the stage's first message: the worker's pid.
func (st *Stage) report() (int, error) {
	var r C.struct_nsbox_stage_report
	b := unsafe.Slice((*byte)(unsafe.Pointer(&r)), unsafe.Sizeof(r))
	n, err := st.conn.Read(b)
	if err != nil || n != len(b) {
		if err == nil {
			err = errors.New("the stage exited")
		}
		return 0, &SpawnError{Step: "stage", Err: err}
	}
	if r.step != 0 || r.pid <= 0 {
		step, ok := stageSteps[int32(r.step)]
		if !ok {
			step = fmt.Sprintf("stage step %d", int32(r.step))
		}
		return 0, &SpawnError{Step: step, Err: syscall.Errno(r.err)}
	}
	return int(r.pid), nil
}

// WriteMaps writes the maps of the stage's worker as id says, from the holder's namespace, once it has checked that the
// namespace maps id's host ids (ErrHolderUnsuitable otherwise: nothing is
// written, and the worker stays unmapped). The stage is ended either way.
func (st *Stage) WriteMaps(id *Identity) error {
	defer st.Close()
	// The stage is in H from its report on, and our unreaped child: its
	// maps are H's.
	if err := checkHolderMaps(st.pid, id); err != nil {
		return err
	}
	u, g := mapText(id.UIDMap), mapText(id.GIDMap)
	q := C.struct_nsbox_stage_maps{ulen: C.int32_t(len(u)), glen: C.int32_t(len(g))}
	if id.Mode == ModeSingle {
		q.deny_setgroups = 1
	}
	msg := append(append(unsafe.Slice((*byte)(unsafe.Pointer(&q)), unsafe.Sizeof(q))[:unsafe.Sizeof(q):unsafe.Sizeof(q)], u...), g...)
	if _, err := st.conn.Write(msg); err != nil {
		return &MapError{File: "the stage", Err: err}
	}
	var r C.struct_nsbox_stage_report
	b := unsafe.Slice((*byte)(unsafe.Pointer(&r)), unsafe.Sizeof(r))
	if n, err := st.conn.Read(b); err != nil || n != len(b) {
		if err == nil {
			err = errors.New("the stage exited")
		}
		return &MapError{File: "the stage", Err: err}
	}
	if r.step != 0 {
		file := map[int32]string{1: "setgroups", 2: "uid_map", 3: "gid_map"}[int32(r.step)]
		if file == "" {
			file = "the stage's request"
		}
		return &MapError{File: file, Err: syscall.Errno(r.err)}
	}
	return nil
}

// Close ends the stage (it exits when its socket closes) and reaps it.
func (st *Stage) Close() {
	st.once.Do(func() {
		st.conn.Close()
		var ws unix.WaitStatus
		for {
			if _, err := unix.Wait4(st.pid, &ws, 0, nil); err != unix.EINTR {
				break
			}
		}
	})
}
