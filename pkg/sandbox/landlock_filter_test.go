package sandbox

import (
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/nsbox/nsbox/pkg/notify"
	"golang.org/x/sys/unix"
)

// runBPF evaluates a classic BPF seccomp program (the instructions
// socketFilter and commandFilterLandlock emit) on one call.
func runBPF(t *testing.T, prog []unix.SockFilter, nr int, args ...uint64) uint32 {
	t.Helper()
	arch, err := auditArch()
	if err != nil {
		t.Skip(err)
	}
	data := make([]byte, 64)
	binary.LittleEndian.PutUint32(data[0:], uint32(nr))
	binary.LittleEndian.PutUint32(data[4:], arch)
	for i, a := range args {
		binary.LittleEndian.PutUint64(data[16+8*i:], a)
	}
	var acc uint32
	for pc := 0; pc < len(prog); pc++ {
		in := prog[pc]
		switch in.Code {
		case unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
			acc = binary.LittleEndian.Uint32(data[in.K:])
		case unix.BPF_ALU | unix.BPF_AND | unix.BPF_K:
			acc &= in.K
		case unix.BPF_JMP | unix.BPF_JA:
			pc += int(in.K)
		case unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K:
			if acc == in.K {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		case unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K:
			if acc&in.K != 0 {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		case unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K:
			if acc >= in.K {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		case unix.BPF_RET | unix.BPF_K:
			return in.K
		default:
			t.Fatalf("instruction %#x not interpreted", in.Code)
		}
	}
	t.Fatal("the program ran off its end")
	return 0
}

func TestCommandFilterLandlock(t *testing.T) {
	const worker = 4242
	deny := unix.SECCOMP_RET_ERRNO | uint32(unix.EACCES)
	neg := func(v int) uint64 { return uint64(uint32(int32(v))) }
	for _, none := range []bool{true, false} {
		prog, err := commandFilterLandlock(none, metaOff, worker, []int{worker + 1, worker + 7})
		if err != nil {
			t.Fatal(err)
		}
		bindConnect := uint32(unix.SECCOMP_RET_ALLOW)
		if none {
			bindConnect = deny
		}
		cases := []struct {
			name string
			nr   int
			args []uint64
			want uint32
		}{
			{"prlimit64 of self", unix.SYS_PRLIMIT64, []uint64{0, unix.RLIMIT_NOFILE}, unix.SECCOMP_RET_ALLOW},
			{"prlimit64 of a worker thread", unix.SYS_PRLIMIT64, []uint64{worker + 3, unix.RLIMIT_NOFILE}, deny},
			{"F_SETOWN worker", unix.SYS_FCNTL, []uint64{3, unix.F_SETOWN, worker}, deny},
			{"F_SETOWN worker's group", unix.SYS_FCNTL, []uint64{3, unix.F_SETOWN, neg(-worker)}, deny},
			{"F_SETOWN another", unix.SYS_FCNTL, []uint64{3, unix.F_SETOWN, 77}, unix.SECCOMP_RET_ALLOW},
			{"F_SETOWN_EX", unix.SYS_FCNTL, []uint64{3, unix.F_SETOWN_EX, 0x7fff0000}, deny},
			{"F_GETFL", unix.SYS_FCNTL, []uint64{3, unix.F_GETFL}, unix.SECCOMP_RET_ALLOW},
			{"FIOSETOWN", unix.SYS_IOCTL, []uint64{3, ioctlFIOSETOWN, 0x7fff0000}, deny},
			{"SIOCSPGRP", unix.SYS_IOCTL, []uint64{3, ioctlSIOCSPGRP, 0x7fff0000}, deny},
			{"TCGETS", unix.SYS_IOCTL, []uint64{0, unix.TCGETS, 0x7fff0000}, unix.SECCOMP_RET_ALLOW},
			{"kill(-1)", unix.SYS_KILL, []uint64{neg(-1), 9}, deny},
			{"kill of a child", unix.SYS_KILL, []uint64{77, 9}, unix.SECCOMP_RET_ALLOW},
			{"kill of a listed worker thread", unix.SYS_KILL, []uint64{worker + 7, 9}, deny},
			{"sigqueue to a listed worker thread", unix.SYS_RT_SIGQUEUEINFO, []uint64{worker + 1, 9, 0}, deny},
			{"socketpair stream", unix.SYS_SOCKETPAIR, []uint64{unix.AF_UNIX, unix.SOCK_STREAM | unix.SOCK_CLOEXEC}, unix.SECCOMP_RET_ALLOW},
			{"socketpair seqpacket", unix.SYS_SOCKETPAIR, []uint64{unix.AF_UNIX, unix.SOCK_SEQPACKET}, unix.SECCOMP_RET_ALLOW},
			{"socketpair dgram", unix.SYS_SOCKETPAIR, []uint64{unix.AF_UNIX, unix.SOCK_DGRAM | unix.SOCK_NONBLOCK}, deny},
			{"socketpair raw (a dgram)", unix.SYS_SOCKETPAIR, []uint64{unix.AF_UNIX, unix.SOCK_RAW}, deny},
			{"bind", unix.SYS_BIND, []uint64{3, 0x7fff0000, 12}, bindConnect},
			{"connect", unix.SYS_CONNECT, []uint64{3, 0x7fff0000, 12}, bindConnect},
			{"read", unix.SYS_READ, []uint64{0, 0, 0}, unix.SECCOMP_RET_ALLOW},
		}
		for _, c := range cases {
			if got := runBPF(t, prog, c.nr, c.args...); got != c.want {
				t.Errorf("network none %v: %s: %#x, want %#x", none, c.name, got, c.want)
			}
		}
	}
}

func TestSocketFilterKillAll(t *testing.T) {
	const worker = 4242
	deny := unix.SECCOMP_RET_ERRNO | uint32(unix.EACCES)
	all := uint64(0xffffffff)
	for _, scoped := range []bool{false, true} {
		prog, err := socketFilter(true, worker, scoped)
		if err != nil {
			t.Fatal(err)
		}
		// Without the scope kill(-1) would reach every process of the
		// uid; with it, only the session's (the worker's fail-closed
		// kill), and commands are refused it by their own filter.
		want := deny
		if scoped {
			want = unix.SECCOMP_RET_ALLOW
		}
		if got := runBPF(t, prog, unix.SYS_KILL, all, 9); got != want {
			t.Errorf("scoped %v: kill(-1): %#x, want %#x", scoped, got, want)
		}
		if got := runBPF(t, prog, unix.SYS_KILL, worker, 9); got != deny {
			t.Errorf("scoped %v: kill(worker): %#x", scoped, got)
		}
		if got := runBPF(t, prog, unix.SYS_SOCKET, unix.AF_UNIX, unix.SOCK_STREAM); got != deny {
			t.Errorf("scoped %v: socket: %#x", scoped, got)
		}
	}
}

// killDescendants fails closed: when the children cannot be listed it
// kills the process groups of the commands it knows and says so, instead
// of taking "no children" for an answer.
func TestKillDescendantsFailsClosed(t *testing.T) {
	cmd := exec.Command("/bin/sleep", "300")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	defer cmd.Process.Kill()
	unlisted := errors.New("too many open files")
	err := killDescendantsOf(func() ([]int, error) { return nil, unlisted }, false, []int{cmd.Process.Pid})
	if !errors.Is(err, unlisted) {
		t.Errorf("an unreadable list of children was not reported: %v", err)
	}
	// killDescendants reaps what died: the status may be gone already,
	// and then so is the process (a sleep of 300 s ends by the kill only).
	st, werr := cmd.Process.Wait()
	switch {
	case werr != nil:
		if err := syscall.Kill(cmd.Process.Pid, 0); err != syscall.ESRCH {
			t.Errorf("the known command was not killed: %v", err)
		}
	case st.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL:
		t.Errorf("the known command was not killed: %v", st)
	}
}

// The metadata rules of the commands' filter (reviews 24, 25, 29, 30):
// System V IPC, a mode granting group or other write, any extended
// attribute write, a group other than -1 or the caller's own, and the
// inode-flag calls are refused; the rest passes.
func TestCommandFilterLandlockMetadata(t *testing.T) {
	prog, err := commandFilterLandlock(true, metaOff, 4242, nil)
	if err != nil {
		t.Fatal(err)
	}
	const (
		allow  = unix.SECCOMP_RET_ALLOW
		eacces = unix.SECCOMP_RET_ERRNO | uint32(unix.EACCES)
		eperm  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
		enotsp = unix.SECCOMP_RET_ERRNO | uint32(unix.EOPNOTSUPP)
	)
	egid := uint64(os.Getegid())
	for _, c := range []struct {
		name string
		nr   int
		args []uint64
		want uint32
	}{
		{"shmget", unix.SYS_SHMGET, nil, eacces},
		{"shmat", unix.SYS_SHMAT, nil, eacces},
		{"mq_open", unix.SYS_MQ_OPEN, nil, eacces},
		{"fchmod 0755", unix.SYS_FCHMOD, []uint64{3, 0o755}, allow},
		{"fchmod 0644", unix.SYS_FCHMOD, []uint64{3, 0o644}, allow},
		{"fchmod 0666", unix.SYS_FCHMOD, []uint64{3, 0o666}, eacces},
		{"fchmodat 0620", unix.SYS_FCHMODAT, []uint64{0, 0, 0o620}, eacces},
		{"fchmodat2 0602", unix.SYS_FCHMODAT2, []uint64{0, 0, 0o602, 0}, eacces},
		{"fchmodat 0700", unix.SYS_FCHMODAT, []uint64{0, 0, 0o700}, allow},
		{"setxattr", unix.SYS_SETXATTR, nil, enotsp},
		{"fremovexattr", unix.SYS_FREMOVEXATTR, nil, enotsp},
		{"fchown keep", unix.SYS_FCHOWN, []uint64{3, 0xffffffff, 0xffffffff}, allow},
		{"fchown own group", unix.SYS_FCHOWN, []uint64{3, 0xffffffff, egid}, allow},
		{"fchown other group", unix.SYS_FCHOWN, []uint64{3, 0xffffffff, egid + 1}, eperm},
		{"fchownat other group", unix.SYS_FCHOWNAT, []uint64{0, 0, 0xffffffff, egid + 1, 0}, eperm},
		{"fchownat own group", unix.SYS_FCHOWNAT, []uint64{0, 0, 0xffffffff, egid, 0}, allow},
		{"file_setattr", unix.SYS_FILE_SETATTR, nil, eperm},
		{"FS_IOC_SETFLAGS", unix.SYS_IOCTL, []uint64{3, unix.FS_IOC_SETFLAGS}, eperm},
		{"FS_IOC_FSSETXATTR", unix.SYS_IOCTL, []uint64{3, fsIocFssetxattr}, eperm},
		{"FS_IOC_GETFLAGS", unix.SYS_IOCTL, []uint64{3, unix.FS_IOC_GETFLAGS}, allow},
		{"FS_IOC_ENABLE_VERITY", unix.SYS_IOCTL, []uint64{3, unix.FS_IOC_ENABLE_VERITY}, eperm},
		{"FS_IOC_SET_ENCRYPTION_POLICY", unix.SYS_IOCTL, []uint64{3, unix.FS_IOC_SET_ENCRYPTION_POLICY}, eperm},
		{"BTRFS_IOC_SUBVOL_SETFLAGS", unix.SYS_IOCTL, []uint64{3, btrfsIocSubvolSetflag}, eperm},
		{"FIONREAD", unix.SYS_IOCTL, []uint64{3, 0x541b}, allow},
	} {
		if got := runBPF(t, prog, c.nr, c.args...); got != c.want {
			t.Errorf("%s: %#x, want %#x", c.name, got, c.want)
		}
	}
}

// With the metadata gate, every mode change (group- or other-writable
// ones too: the gate refuses them outside the writable places) and every
// time change go to the supervisor (SECCOMP_RET_USER_NOTIF).
func TestCommandFilterLandlockMetadataGate(t *testing.T) {
	prog, err := commandFilterLandlock(true, metaRootless, 4242, nil)
	if err != nil {
		t.Fatal(err)
	}
	const (
		notif  = unix.SECCOMP_RET_USER_NOTIF
		eacces = unix.SECCOMP_RET_ERRNO | uint32(unix.EACCES)
		allow  = unix.SECCOMP_RET_ALLOW
	)
	for _, c := range []struct {
		name string
		nr   int
		args []uint64
		want uint32
	}{
		{"fchmod 0755", unix.SYS_FCHMOD, []uint64{3, 0o755}, notif},
		{"fchmod 0666", unix.SYS_FCHMOD, []uint64{3, 0o666}, notif},
		{"fchmodat 0600", unix.SYS_FCHMODAT, []uint64{0, 0, 0o600}, notif},
		{"fchmodat2 0620", unix.SYS_FCHMODAT2, []uint64{0, 0, 0o620, 0}, notif},
		{"utimensat", unix.SYS_UTIMENSAT, []uint64{0, 0, 0, 0}, notif},
		{"fchown keep", unix.SYS_FCHOWN, []uint64{3, 0xffffffff, 0xffffffff}, notif},
		{"fchownat own group", unix.SYS_FCHOWNAT, []uint64{0, 0, 0xffffffff, uint64(os.Getegid()), 0}, notif},
		{"fchownat other group", unix.SYS_FCHOWNAT, []uint64{0, 0, 0xffffffff, uint64(os.Getegid()) + 1, 0}, unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
		{"openat", unix.SYS_OPENAT, nil, allow},
		{"prctl dumpable 0", unix.SYS_PRCTL, []uint64{unix.PR_SET_DUMPABLE, 0}, unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
		{"prctl dumpable 1", unix.SYS_PRCTL, []uint64{unix.PR_SET_DUMPABLE, 1}, allow},
		{"prctl name", unix.SYS_PRCTL, []uint64{unix.PR_SET_NAME, 0}, allow},
	} {
		if got := runBPF(t, prog, c.nr, c.args...); got != c.want {
			t.Errorf("%s: %#x, want %#x", c.name, got, c.want)
		}
	}
	_, _, utimes := notify.MetaCalls()
	for _, nr := range utimes {
		if got := runBPF(t, prog, int(nr)); got != notif {
			t.Errorf("time call %d: %#x, want notify", nr, got)
		}
	}
}
