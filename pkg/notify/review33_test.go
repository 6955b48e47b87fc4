package notify

import (
	"testing"

	"golang.org/x/sys/unix"
)

// Review 33: the Landlock backend's metadata gate, second round. Each test
// below fails on the code it was written against and passes once the
// weakness it names is fixed.

// TestReview33SharedAnonInodeAllowed
//
// Severity: LOW (root caller only, on kernels without the 2025 change
// "anon_inode: explicitly block ->setattr()" or its stable backports: the
// mode, group and times of an inode every process of the host shares).
//
// Weakness: MetaGate.allows lets a call by fd through, with no check of
// place, when the fd is on anon_inodefs (pseudoFile: "a pipe, a socket,
// an anonymous inode: no file of any directory"). A pipe and a socket have
// an inode each, but eventfd, epoll, timerfd, signalfd, inotify and most
// other anonymous fds share ONE inode, anon_inode_inode, owned by root and
// made at boot: it is the host's, as /dev/null is, and review 32 refused
// device nodes for exactly that reason. A root caller's command runs as
// uid 0, the owner of that inode; the gate makes fchmod, fchown(-1, 0) and
// futimens on it as the target with no capability, which the kernel
// allowed until 2025 (the upstream fix's own reproducer is fchmod and
// fchown on a signalfd). The change is seen by every process on the host
// (fstat of any eventfd, epoll or signalfd fd). The kernel under test
// refuses the call itself (EOPNOTSUPP), so the test checks the gate's
// decision, which is what must not depend on the kernel being patched.
//
// Attack: fd = eventfd(0, 0); fchmod(fd, 0755); futimens(fd, {0, 0}).
//
// Fix: in pseudoFile, let through only file systems whose every fd has an
// inode of its own (pipefs, sockfs; memfd's nlink 0 already passes); refuse
// anon_inodefs (EPERM, as for device nodes), or allow it only when the
// inode number differs from the shared anon inode's (one eventfd made by
// the supervisor at start tells that number).
func TestReview33SharedAnonInodeAllowed(t *testing.T) {
	ev, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		t.Skip(err)
	}
	defer unix.Close(ev)
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		t.Skip(err)
	}
	defer unix.Close(ep)
	var evSt, epSt unix.Statx_t
	flags := unix.AT_EMPTY_PATH | unix.AT_SYMLINK_NOFOLLOW
	mask := unix.STATX_TYPE | unix.STATX_INO | unix.STATX_NLINK
	if err := unix.Statx(ev, "", flags, mask, &evSt); err != nil {
		t.Fatal(err)
	}
	if err := unix.Statx(ep, "", flags, mask, &epSt); err != nil {
		t.Fatal(err)
	}
	// The setup this is about: two unrelated anonymous fds on one inode.
	if idOf(&evSt) != idOf(&epSt) {
		t.Skipf("eventfd and epoll have inodes of their own here (%d, %d)", evSt.Ino, epSt.Ino)
	}
	var fs unix.Statfs_t
	if err := unix.Fstatfs(ev, &fs); err != nil || fs.Type != anonInodeMagic {
		t.Skipf("eventfd is not on anon_inodefs here (%#x, %v)", fs.Type, err)
	}
	rw := t.TempDir()
	g := NewMetaGate([]MetaInode{inodeOf(t, rw)}, nil)
	if ok, _ := g.allows(ev, &evSt, -1); ok {
		t.Errorf("the gate allows fchmod/fchown/futimens on an eventfd: inode %d, which every epoll, eventfd, signalfd, timerfd and inotify fd of the host shares (a root caller's command owns it)", evSt.Ino)
	}
}
