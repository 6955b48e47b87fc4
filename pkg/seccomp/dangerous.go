package seccomp

import (
	"fmt"
	"sort"

	libseccomp "github.com/seccomp/libseccomp-golang"
)

// dangerous are the syscalls every profile nsbox ships must refuse outright
// (EPERM, ENOSYS or a kill), whatever their arguments. The reason for each
// is the "comment" of its rule in profiles/seccomp/default.json. Names that
// do not exist on an architecture (iopl on arm64) are trivially refused
// there. Syscalls refused only for some arguments (clone and unshare with
// CLONE_NEW*, ioctl TIOCSTI/TIOCLINUX/TIOCSETD, personality) are tested
// separately.
var dangerous = []string{
	// kernel keyrings
	"keyctl", "add_key", "request_key",
	// kernel attack surface: eBPF, perf, userfaultfd, io_uring
	"bpf", "perf_event_open", "userfaultfd",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	// replacing or extending the kernel
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	// the mount table, old and new API
	"mount", "umount2", "pivot_root", "chroot",
	"fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "open_tree_attr", "mount_setattr",
	// host-wide state
	"swapon", "swapoff", "reboot", "acct", "quotactl", "quotactl_fd", "syslog", "vhangup",
	"settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
	// other processes
	"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "process_madvise", "kcmp",
	// namespaces and file handles
	"setns", "clone3", "open_by_handle_at", "name_to_handle_at", "lookup_dcookie",
	// x86 hardware and legacy interfaces
	"iopl", "ioperm", "modify_ldt", "uselib",
}

// DangerousSet returns the syscall names that every shipped profile must
// deny, sorted. Tests check it against every profile in profiles/seccomp;
// `nsbox status` reports it.
func DangerousSet() []string {
	out := append([]string(nil), dangerous...)
	sort.Strings(out)
	return out
}

// Version is the version of the libseccomp library nsbox is linked with,
// e.g. "2.5.4".
func Version() string {
	major, minor, micro := libseccomp.GetLibraryVersion()
	return fmt.Sprintf("%d.%d.%d", major, minor, micro)
}

// Opens lists what the compiled filter f lets through that the default
// profile closes: each call of DangerousSet that f does not refuse on the
// native ABI (any argument), and "new user namespaces" when
// unshare(CLONE_NEWUSER) goes through. A profile of the user's that opens
// any is a loosening, said so as --seccomp unconfined is.
func Opens(f *Filter) []string {
	native, err := libseccomp.GetNativeArch()
	if err != nil {
		return nil
	}
	info := archInfoOf(native)
	if info.audit == 0 {
		return nil
	}
	var out []string
	passes := func(name string, args [6]uint64) bool {
		nr, _, ok := syscallNr(name, native)
		return ok && breaks(f.verdict(nr+int32(info.nrBase), info.audit, args), true) == ""
	}
	for _, name := range DangerousSet() {
		if passes(name, [6]uint64{}) {
			out = append(out, name)
		}
	}
	if passes("unshare", [6]uint64{cloneNewUser}) {
		out = append(out, "new user namespaces")
	}
	return out
}
