// Package landlock confines a process with the Landlock LSM (landlock(7)):
// file system rules by path (read, read-write, execute), TCP bind and
// connect rules (ABI 4), and the abstract unix socket and signal scopes
// (ABI 6). A Config is built into a ruleset by one process (Build, which
// opens every path by fd) and enforced by any process that holds the
// ruleset's fd (RestrictSelf), so a supervisor can prepare the rules and a
// child can apply them before its runtime starts threads.
//
// Degradation is best effort by ABI, and always said: Build drops what the
// running kernel cannot enforce and its Report lists what was dropped. A
// caller that needs a right it did not get refuses to run.
//
// It is a leaf package: it imports no other nsbox package.
package landlock

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// AccessFS is a set of LANDLOCK_ACCESS_FS_* rights.
type AccessFS uint64

// File system rights (landlock(7)); the ABI that introduced each is in
// fsABI.
const (
	Execute    AccessFS = unix.LANDLOCK_ACCESS_FS_EXECUTE
	WriteFile  AccessFS = unix.LANDLOCK_ACCESS_FS_WRITE_FILE
	ReadFile   AccessFS = unix.LANDLOCK_ACCESS_FS_READ_FILE
	ReadDir    AccessFS = unix.LANDLOCK_ACCESS_FS_READ_DIR
	RemoveDir  AccessFS = unix.LANDLOCK_ACCESS_FS_REMOVE_DIR
	RemoveFile AccessFS = unix.LANDLOCK_ACCESS_FS_REMOVE_FILE
	MakeChar   AccessFS = unix.LANDLOCK_ACCESS_FS_MAKE_CHAR
	MakeDir    AccessFS = unix.LANDLOCK_ACCESS_FS_MAKE_DIR
	MakeReg    AccessFS = unix.LANDLOCK_ACCESS_FS_MAKE_REG
	MakeSock   AccessFS = unix.LANDLOCK_ACCESS_FS_MAKE_SOCK
	MakeFifo   AccessFS = unix.LANDLOCK_ACCESS_FS_MAKE_FIFO
	MakeBlock  AccessFS = unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK
	MakeSym    AccessFS = unix.LANDLOCK_ACCESS_FS_MAKE_SYM
	Refer      AccessFS = unix.LANDLOCK_ACCESS_FS_REFER     // ABI 2
	Truncate   AccessFS = unix.LANDLOCK_ACCESS_FS_TRUNCATE  // ABI 3
	IoctlDev   AccessFS = unix.LANDLOCK_ACCESS_FS_IOCTL_DEV // ABI 5
)

// Convenient sets. ReadWrite is every right; the kernel's own checks (no
// CAP_MKNOD) still refuse device nodes.
const (
	ReadOnly  = ReadFile | ReadDir
	ReadExec  = ReadOnly | Execute
	ReadWrite = Execute | WriteFile | ReadFile | ReadDir | RemoveDir | RemoveFile |
		MakeChar | MakeDir | MakeReg | MakeSock | MakeFifo | MakeBlock | MakeSym |
		Refer | Truncate | IoctlDev
	// fileRights are the rights that apply to a file (not a directory):
	// the kernel refuses a rule on a file with any other.
	fileRights = Execute | WriteFile | ReadFile | Truncate | IoctlDev
)

// fsForABI is every file system right the given ABI knows.
func fsForABI(abi int) AccessFS {
	a := Execute | WriteFile | ReadFile | ReadDir | RemoveDir | RemoveFile |
		MakeChar | MakeDir | MakeReg | MakeSock | MakeFifo | MakeBlock | MakeSym
	if abi >= 2 {
		a |= Refer
	}
	if abi >= 3 {
		a |= Truncate
	}
	if abi >= 5 {
		a |= IoctlDev
	}
	return a
}

// AccessNet is a set of LANDLOCK_ACCESS_NET_* rights (ABI 4).
type AccessNet uint64

const (
	BindTCP    AccessNet = unix.LANDLOCK_ACCESS_NET_BIND_TCP
	ConnectTCP AccessNet = unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
)

// Scope is a set of LANDLOCK_SCOPE_* flags (ABI 6).
type Scope uint64

const (
	// ScopeAbstractUnix refuses connect and send to an abstract unix
	// socket created outside the domain (a --net host session's only
	// filter against the host's abstract sockets, such as X11's or a
	// D-Bus bus's).
	ScopeAbstractUnix Scope = unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
	// ScopeSignal refuses signals to processes outside the domain.
	ScopeSignal Scope = unix.LANDLOCK_SCOPE_SIGNAL
)

// Errors.
var (
	// ErrUnsupported: the kernel has no Landlock, or it is disabled at boot.
	ErrUnsupported = errors.New("landlock is not available")
	// ErrMissing: BestEffort is off and the kernel lacks a right the
	// Config asks for.
	ErrMissing = errors.New("landlock cannot enforce")
)

// ABI returns the Landlock ABI version of the running kernel (1 for 5.13;
// 6.18 has 7), or an error wrapping ErrUnsupported that says why there is
// none.
func ABI() (int, error) {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	switch {
	case errno == 0:
		return int(v), nil
	case errno == unix.ENOSYS:
		return 0, fmt.Errorf("%w: this kernel has no Landlock (before 5.13, or built without CONFIG_SECURITY_LANDLOCK), or a seccomp filter refuses landlock_create_ruleset", ErrUnsupported)
	case errno == unix.EOPNOTSUPP:
		return 0, fmt.Errorf("%w: Landlock is built in but not enabled at boot (add landlock to the lsm= kernel parameter)", ErrUnsupported)
	case errno == unix.EPERM:
		return 0, fmt.Errorf("%w: a seccomp filter refuses landlock_create_ruleset", ErrUnsupported)
	}
	return 0, fmt.Errorf("%w: landlock_create_ruleset: %v", ErrUnsupported, errno)
}

// PathRule grants Access beneath Path (a directory) or on Path (a file).
// Path is absolute and already resolved: Build opens it with
// RESOLVE_NO_SYMLINKS, so a symlink anywhere in it fails the rule rather
// than redirecting it.
type PathRule struct {
	Path   string   `json:"path"`
	Access AccessFS `json:"access"`
}

// Config is what a ruleset handles and allows. Everything of a handled
// kind that no rule allows is denied.
type Config struct {
	// HandledFS is the file system rights the ruleset restricts; 0 leaves
	// the file system alone.
	HandledFS AccessFS
	// Paths are the file system rules.
	Paths []PathRule
	// HandledNet is the network rights restricted (ABI 4); with no
	// TCPPorts, every TCP bind or connect is refused.
	HandledNet AccessNet
	// TCPPorts allows binds or connects to these ports (ABI 4).
	TCPPorts []PortRule
	// Scoped are the scopes applied (ABI 6).
	Scoped Scope
	// BestEffort drops what the kernel cannot enforce (listed in the
	// Report) instead of failing with ErrMissing.
	BestEffort bool
	// SkipMissing skips a path rule whose path does not exist, or whose
	// last component (and no other) is a symlink: a grant for a name that
	// Expand used only to split its parent (access through a symlink is
	// decided at its target). A symlink higher up is still an error.
	SkipMissing bool
}

// PortRule allows Access for one TCP port.
type PortRule struct {
	Port   uint16
	Access AccessNet
}

// Report says what a built ruleset enforces.
type Report struct {
	ABI        int       `json:"abi"`
	HandledFS  AccessFS  `json:"handledFS"`
	HandledNet AccessNet `json:"handledNet"`
	Scoped     Scope     `json:"scoped"`
	// Rules is the number of path rules added.
	Rules int `json:"rules"`
	// Dropped names, for users, each thing asked for that this kernel's
	// ABI cannot enforce.
	Dropped []string `json:"dropped,omitempty"`
}

// Ruleset is a built ruleset, held by its fd.
type Ruleset struct {
	fd     int
	Report Report
	// Writable are the inodes of the rules that grant WriteFile: the
	// very inodes the kernel holds the rules on (a rule is on an inode,
	// not a path), in order. A file is writable under the ruleset when
	// it is one of them or lies beneath one (landlock(7)).
	Writable []Inode
}

// Inode names an inode by its device (st_dev) and number.
type Inode struct{ Dev, Ino uint64 }

// FD is the ruleset's file descriptor (close-on-exec), for a child that
// applies it with RestrictFD.
func (r *Ruleset) FD() int { return r.fd }

// Close releases the ruleset; processes it restricted stay restricted.
func (r *Ruleset) Close() error {
	if r == nil || r.fd < 0 {
		return nil
	}
	err := unix.Close(r.fd)
	r.fd = -1
	return err
}

// RestrictSelf enforces the ruleset on the calling thread and every
// process and thread it creates from now on. The thread must have
// no_new_privs set (or CAP_SYS_ADMIN in its user namespace).
func (r *Ruleset) RestrictSelf() error { return RestrictFD(r.fd) }

// RestrictFD enforces the ruleset held by fd on the calling thread
// (landlock_restrict_self(2)). Other threads of the process are not
// restricted (before ABI 8's TSYNC): call it on the thread that creates
// every process to be confined, or before other threads exist.
func RestrictFD(fd int) error {
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(fd), 0, 0); errno != 0 {
		return fmt.Errorf("landlock_restrict_self: %w", errno)
	}
	return nil
}

// rulesetAttr is struct landlock_ruleset_attr with the ABI 6 scoped field
// (x/sys/unix's LandlockRulesetAttr has it as well on recent versions; the
// kernel reads only as many bytes as it is told, so older kernels accept
// the shorter prefix passed for them).
type rulesetAttr struct {
	handledFS  uint64
	handledNet uint64
	scoped     uint64
}

type pathBeneathAttr struct {
	allowed  uint64
	parentFD int32
}

type netPortAttr struct {
	allowed uint64
	port    uint64
}

// Build creates the ruleset of c for this kernel. Each path is opened by
// fd; a missing path is an error (callers skip optional ones first).
func Build(c Config) (*Ruleset, error) {
	abi, err := ABI()
	if err != nil {
		return nil, err
	}
	rep := Report{ABI: abi}
	fsAll := fsForABI(abi)
	if lost := c.HandledFS &^ fsAll; lost != 0 {
		if !c.BestEffort {
			return nil, fmt.Errorf("%w: file system rights %s need a newer kernel (ABI %d here)", ErrMissing, lost, abi)
		}
		rep.Dropped = append(rep.Dropped, fmt.Sprintf("file system rights %s (ABI %d)", lost, abi))
	}
	handledFS := c.HandledFS & fsAll
	handledNet := c.HandledNet
	if abi < 4 && handledNet != 0 {
		if !c.BestEffort {
			return nil, fmt.Errorf("%w: TCP bind and connect rules need ABI 4 (Linux 6.7); ABI %d here", ErrMissing, abi)
		}
		rep.Dropped = append(rep.Dropped, fmt.Sprintf("TCP bind/connect rules (need ABI 4, Linux 6.7; ABI %d here)", abi))
		handledNet = 0
	}
	scoped := c.Scoped
	if abi < 6 && scoped != 0 {
		if !c.BestEffort {
			return nil, fmt.Errorf("%w: the %s scopes need ABI 6 (Linux 6.12); ABI %d here", ErrMissing, scoped, abi)
		}
		rep.Dropped = append(rep.Dropped, fmt.Sprintf("%s scopes (need ABI 6, Linux 6.12; ABI %d here)", scoped, abi))
		scoped = 0
	}
	attr := rulesetAttr{handledFS: uint64(handledFS), handledNet: uint64(handledNet), scoped: uint64(scoped)}
	size := unsafe.Sizeof(attr)
	switch {
	case abi < 4:
		size = 8 // handled_access_fs only
	case abi < 6:
		size = 16
	}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if errno != 0 {
		return nil, fmt.Errorf("landlock_create_ruleset: %w", errno)
	}
	r := &Ruleset{fd: int(fd)}
	// The kernel opens its ruleset fds close-on-exec (landlock(7)).
	for _, p := range c.Paths {
		allowed := p.Access & handledFS
		if allowed == 0 {
			continue
		}
		in, err := addPathRule(r.fd, p.Path, allowed)
		if err != nil {
			if c.SkipMissing && (errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) && lastIsSymlink(p.Path)) {
				continue
			}
			r.Close()
			return nil, err
		}
		rep.Rules++
		if allowed&WriteFile != 0 {
			r.Writable = append(r.Writable, in)
		}
	}
	if handledNet != 0 {
		for _, p := range c.TCPPorts {
			na := netPortAttr{allowed: uint64(p.Access & handledNet), port: uint64(p.Port)}
			if na.allowed == 0 {
				continue
			}
			if _, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(r.fd), ruleNetPort, uintptr(unsafe.Pointer(&na)), 0, 0, 0); errno != 0 {
				r.Close()
				return nil, fmt.Errorf("landlock rule for TCP port %d: %w", p.Port, errno)
			}
		}
	}
	rep.HandledFS, rep.HandledNet, rep.Scoped = handledFS, handledNet, scoped
	r.Report = rep
	return r, nil
}

// addPathRule opens path without following any symlink (openat2
// RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS: a component swapped for a
// symlink after the policy was resolved fails the rule instead of granting
// rights on whatever it points to) and adds it to the ruleset.
// lastIsSymlink reports whether p's last component is a symlink and no
// component above it is one.
func lastIsSymlink(p string) bool {
	dir, name := filepath.Split(filepath.Clean(p))
	fd, err := unix.Openat2(unix.AT_FDCWD, dir, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	return unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
}

func addPathRule(rfd int, path string, allowed AccessFS) (Inode, error) {
	fd, err := unix.Openat2(unix.AT_FDCWD, path, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return Inode{}, &PathError{Path: path, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return Inode{}, &PathError{Path: path, Err: err}
	}
	in := Inode{Dev: st.Dev, Ino: st.Ino}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		// A rule on a file may only carry the rights of a file.
		allowed &= fileRights
		if allowed == 0 {
			return in, nil
		}
	}
	pb := pathBeneathAttr{allowed: uint64(allowed), parentFD: int32(fd)}
	if _, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(rfd), unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&pb)), 0, 0, 0); errno != 0 {
		return Inode{}, &PathError{Path: path, Err: errno}
	}
	return in, nil
}

// PathError is a path rule that could not be added.
type PathError struct {
	Path string
	Err  error
}

func (e *PathError) Error() string { return "landlock rule for " + e.Path + ": " + e.Err.Error() }
func (e *PathError) Unwrap() error { return e.Err }

// bitName names one bit of a Landlock bit set, for String.
type bitName struct {
	bit  uint64
	name string
}

var (
	fsNames = []bitName{
		{uint64(Execute), "execute"}, {uint64(WriteFile), "write_file"}, {uint64(ReadFile), "read_file"}, {uint64(ReadDir), "read_dir"},
		{uint64(RemoveDir), "remove_dir"}, {uint64(RemoveFile), "remove_file"}, {uint64(MakeChar), "make_char"}, {uint64(MakeDir), "make_dir"},
		{uint64(MakeReg), "make_reg"}, {uint64(MakeSock), "make_sock"}, {uint64(MakeFifo), "make_fifo"}, {uint64(MakeBlock), "make_block"},
		{uint64(MakeSym), "make_sym"}, {uint64(Refer), "refer"}, {uint64(Truncate), "truncate"}, {uint64(IoctlDev), "ioctl_dev"},
	}
	netNames   = []bitName{{uint64(BindTCP), "bind_tcp"}, {uint64(ConnectTCP), "connect_tcp"}}
	scopeNames = []bitName{{uint64(ScopeAbstractUnix), "abstract_unix_socket"}, {uint64(ScopeSignal), "signal"}}
)

// bitNames lists the names of v's bits ("none" for none; an unnamed rest
// in hex).
func bitNames(v uint64, names []bitName) string {
	var out []string
	for _, n := range names {
		if v&n.bit != 0 {
			out = append(out, n.name)
			v &^= n.bit
		}
	}
	if v != 0 {
		out = append(out, fmt.Sprintf("%#x", v))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ",")
}

func (a AccessFS) String() string  { return bitNames(uint64(a), fsNames) }
func (a AccessNet) String() string { return bitNames(uint64(a), netNames) }
func (s Scope) String() string     { return bitNames(uint64(s), scopeNames) }

// ruleNetPort is LANDLOCK_RULE_NET_PORT (linux/landlock.h).
const ruleNetPort = 2
