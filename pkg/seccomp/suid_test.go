package seccomp

import (
	"testing"

	"golang.org/x/sys/unix"
)

// The default profile's set-id rules (RestrictSUIDSGID=): the verdict on
// each mode argument, decided by the compiled filter in the BPF
// interpreter. install_test.go runs filters in the kernel.

// setIDCase is a call and whether the set-id rules refuse it.
type setIDCase struct {
	name   string
	args   []uint64
	refuse bool
}

// setIDCases are the calls the set-id rules are judged on, for the
// default profile and the set-id filter (setid_test.go).
func setIDCases() []setIDCase {
	const (
		suid   = unix.S_ISUID
		sgid   = unix.S_ISGID
		high   = 0xffffffff00000000 // high bits must neither hide nor fake a bit
		creat  = unix.O_CREAT | unix.O_WRONLY
		tmpf   = unix.O_TMPFILE | unix.O_RDWR
		cwd    = uint64(0xffffff9c) // AT_FDCWD as the kernel's int
		refuse = true
		allow  = false
	)
	return []setIDCase{
		{"chmod", []uint64{0, 0o755}, allow},
		{"chmod", []uint64{0, 0o1777}, allow}, // sticky bit: /tmp-like dirs
		{"chmod", []uint64{0, suid | 0o755}, refuse},
		{"chmod", []uint64{0, sgid | 0o755}, refuse},
		{"chmod", []uint64{0, high | suid}, refuse},
		{"chmod", []uint64{0, high | 0o755}, allow},
		{"fchmod", []uint64{3, 0o644}, allow},
		{"fchmod", []uint64{3, suid | 0o644}, refuse},
		{"fchmod", []uint64{3, sgid}, refuse},
		{"fchmodat", []uint64{cwd, 0, 0o700, 0}, allow},
		{"fchmodat", []uint64{cwd, 0, suid | 0o700, 0}, refuse},
		{"fchmodat", []uint64{cwd, 0, sgid | 0o700, 0}, refuse},
		// The mode is the third argument: a set-id bit elsewhere is
		// not a mode.
		{"fchmodat", []uint64{cwd, suid, 0o700, suid}, allow},
		{"fchmodat2", []uint64{cwd, 0, suid | 0o700, 0}, refuse},
		{"fchmodat2", []uint64{cwd, 0, sgid, unix.AT_SYMLINK_NOFOLLOW}, refuse},
		{"fchmodat2", []uint64{cwd, 0, 0o640, 0}, allow},
		{"mkdir", []uint64{0, 0o755}, allow},
		{"mkdir", []uint64{0, sgid | 0o775}, allow}, // setgid directory: group inheritance
		{"mkdir", []uint64{0, suid | 0o755}, refuse},
		{"mkdirat", []uint64{cwd, 0, sgid | 0o2775}, allow},
		{"mkdirat", []uint64{cwd, 0, suid | 0o755}, refuse},
		{"mknod", []uint64{0, unix.S_IFREG | 0o644, 0}, allow},
		{"mknod", []uint64{0, unix.S_IFREG | suid | 0o755, 0}, refuse},
		{"mknod", []uint64{0, unix.S_IFIFO | sgid | 0o644, 0}, refuse},
		{"mknodat", []uint64{cwd, 0, unix.S_IFREG | 0o600, 0}, allow},
		{"mknodat", []uint64{cwd, 0, unix.S_IFREG | suid | 0o755, 0}, refuse},
		{"mknodat", []uint64{cwd, 0, unix.S_IFREG | sgid | 0o755, 0}, refuse},
		{"creat", []uint64{0, 0o644}, allow},
		{"creat", []uint64{0, suid | 0o755}, refuse},
		{"creat", []uint64{0, sgid | 0o755}, refuse},
		{"open", []uint64{0, unix.O_RDONLY, suid | sgid}, allow}, // no file is made: the mode is ignored
		{"open", []uint64{0, creat, 0o644}, allow},
		{"open", []uint64{0, creat, suid | 0o755}, refuse},
		{"open", []uint64{0, creat | unix.O_EXCL, sgid | 0o755}, refuse},
		{"open", []uint64{0, tmpf, suid | 0o700}, refuse},
		{"openat", []uint64{cwd, 0, unix.O_RDONLY | unix.O_CLOEXEC, suid}, allow},
		{"openat", []uint64{cwd, 0, creat | unix.O_CLOEXEC, 0o600}, allow},
		{"openat", []uint64{cwd, 0, creat | unix.O_CLOEXEC, suid | 0o755}, refuse},
		{"openat", []uint64{cwd, 0, creat, high | sgid | 0o755}, refuse},
		{"openat", []uint64{cwd, 0, high | creat, suid}, refuse},
		{"openat", []uint64{cwd, 0, tmpf, sgid | 0o600}, refuse},
		{"openat", []uint64{cwd, 0, tmpf, 0o600}, allow},
	}
}

func TestDefaultRefusesSetIDModes(t *testing.T) {
	for _, o := range []Options{{}, {AllowUserns: true}} {
		f := compileDefault(t, o)
		for _, c := range setIDCases() {
			if _, ok := nativeNr(t, c.name); !ok {
				continue // open, creat, chmod, mkdir, mknod: not on aarch64
			}
			v := verdict(t, f, c.name, c.args...)
			want := uint32(retAllow)
			if c.refuse {
				want = retEPERM
			}
			if v != want {
				t.Errorf("%+v: %s%#o -> %s, want %s", o, c.name, c.args, verdictString(v), verdictString(want))
			}
		}
	}
}
