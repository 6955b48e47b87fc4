package notify

import (
	"bytes"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// fdinfoCache keeps /proc/TID/fdinfo/N files open, by thread and fd
// number, for the close-on-exec flag an installed socket must keep
// (perform, InstallFD). Opening that file walks /proc and checks ptrace
// access: ~10–20 µs here, on the path of every filtered connect. An open
// fdinfo file is evaluated at each read (seq_show in fs/proc/fd.c looks
// the number up in the thread's fd table then), so a pread at 0 of the
// cached file reads the flags of whatever the thread's fd N is now, in
// ~1.5 µs. A program that connects in a loop reuses its fd number, and
// hits.
//
// A cached file names one thread for good: its inode holds the thread's
// struct pid, not its number, so after the thread ends a read fails with
// ENOENT (the entry is dropped and the path opened afresh), and never
// reads another process that reused the id. The access check was made at
// open, as for an uncached read. At most maxFdinfos files are kept;
// Server.Close closes them.
type fdinfoCache struct {
	mu sync.Mutex // held across a cached read: no file is closed under a reader
	m  map[fdinfoKey]int
}

type fdinfoKey struct{ tid, fd int }

const maxFdinfos = 64

// cloexec reports whether the target's fd c.FD has FD_CLOEXEC.
func (fc *fdinfoCache) cloexec(c *SockCall) (bool, error) {
	var buf [512]byte // pos, flags, mnt_id, ino and a socket's few lines
	key := fdinfoKey{c.Pid, c.FD}
	fc.mu.Lock()
	if f, ok := fc.m[key]; ok {
		n, err := unix.Pread(f, buf[:], 0)
		if err == nil {
			fc.mu.Unlock()
			return parseFdinfoCloexec(buf[:n])
		}
		// The thread ended (or the number is closed now): drop it.
		delete(fc.m, key)
		unix.Close(f)
	}
	fc.mu.Unlock()

	// Beneath the thread's own /proc/TID (c.proc, held since the socket
	// was taken): by number, a thread gone meanwhile could be another
	// process that took its id (found by review).
	var f int
	var err error
	if c.proc != nil {
		f, err = unix.Openat(c.proc.dir, "fdinfo/"+strconv.Itoa(c.FD), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	} else {
		f, err = unix.Open("/proc/"+strconv.Itoa(c.Pid)+"/fdinfo/"+strconv.Itoa(c.FD), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return false, err
	}
	n, err := unix.Pread(f, buf[:], 0)
	if err != nil {
		unix.Close(f)
		return false, err
	}
	fc.mu.Lock()
	if fc.m == nil {
		fc.m = map[fdinfoKey]int{}
	}
	if _, dup := fc.m[key]; dup {
		unix.Close(f) // another goroutine cached it meanwhile
	} else {
		if len(fc.m) >= maxFdinfos {
			for k, old := range fc.m { // one, any: bounded, not LRU
				delete(fc.m, k)
				unix.Close(old)
				break
			}
		}
		fc.m[key] = f
	}
	fc.mu.Unlock()
	return parseFdinfoCloexec(buf[:n])
}

// close closes the cached files (Server.Close, once no call is handled).
func (fc *fdinfoCache) close() {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	for _, f := range fc.m {
		unix.Close(f)
	}
	fc.m = nil
}

// parseFdinfoCloexec reads the "flags:" line of an fdinfo file: octal
// open flags, O_CLOEXEC among them when the fd table entry has it.
func parseFdinfoCloexec(b []byte) (bool, error) {
	fl, _, err := parseFdinfo(b)
	return fl&unix.O_CLOEXEC != 0, err
}

// parseFdinfo reads an fdinfo file (proc(5)): the open flags of its
// "flags:" line (octal) and the inode number of its "ino:" line (since
// Linux 5.14; 0 where the kernel does not say). An fdinfo without a
// flags line is ENOENT.
//
// Security: only the kernel's own lines are read. It prints them first
// (fs/proc/fd.c: pos, flags, mnt_id, ino since 5.14), then lock lines
// and the lines of the file's type, which can hold text the process
// chose (a dma-buf's name, set with DMA_BUF_SET_NAME, newlines kept): a
// forged later "flags:" without O_PATH, or an "ino:" of the file the gate
// opened, must not count (review 54). The scan stops at the first line
// that is not one of the four.
func parseFdinfo(b []byte) (flags, ino uint64, err error) {
	found := false
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte("\n"))
		if v, ok := bytes.CutPrefix(line, []byte("flags:")); ok && !found {
			if flags, err = strconv.ParseUint(string(bytes.TrimSpace(v)), 8, 64); err != nil {
				return 0, 0, err
			}
			found = true
		} else if v, ok := bytes.CutPrefix(line, []byte("ino:")); ok {
			ino, _ = strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
			break // the kernel's last line
		} else if !bytes.HasPrefix(line, []byte("pos:")) && !bytes.HasPrefix(line, []byte("mnt_id:")) {
			break // past the kernel's lines
		}
	}
	if !found {
		return 0, 0, unix.ENOENT
	}
	return flags, ino, nil
}
