package sandbox

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// limitExecArg0 marks the short-lived re-exec of the binary that puts a
// command under the session's limits and then becomes the command: it moves
// itself into the limited cgroup (by the cgroup.procs fds it inherits) and
// sets the command's rlimits. Limits cannot be put on the worker itself, a
// long-lived Go process: a fork bomb would starve it of threads and the OOM
// killer could choose it. Go has no hook between fork and exec, hence the
// shim; it runs only when the session has limits.
const limitExecArg0 = "nsbox-limit-exec"

// isLimitExec reports whether this process is the limit shim. Its parent is
// the worker, PID 1 of the sandbox.
func isLimitExec() bool {
	return len(os.Args) >= 5 && os.Args[0] == limitExecArg0 && os.Getppid() == 1
}

// encodeRlimits is the shim's first argument: "res:cur:max,...".
func encodeRlimits(rl []rlimit) string {
	parts := make([]string, len(rl))
	for i, r := range rl {
		parts[i] = fmt.Sprintf("%d:%d:%d", r.Resource, r.Cur, r.Max)
	}
	return strings.Join(parts, ",")
}

func decodeRlimits(s string) ([]rlimit, error) {
	var out []rlimit
	for _, p := range strings.Split(s, ",") {
		if p == "" {
			continue
		}
		f := strings.Split(p, ":")
		if len(f) != 3 {
			return nil, fmt.Errorf("bad rlimit %q", p)
		}
		res, err1 := strconv.Atoi(f[0])
		cur, err2 := strconv.ParseUint(f[1], 10, 64)
		max, err3 := strconv.ParseUint(f[2], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("bad rlimit %q", p)
		}
		out = append(out, rlimit{Resource: res, Cur: cur, Max: max})
	}
	return out, nil
}

// runLimitExec applies the limits and execs the command: argv is
// [arg0, rlimits, cgroup fds, path, command argv...]. It never returns on
// success.
func runLimitExec() int {
	rl, err := decodeRlimits(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "nsbox:", err)
		return 125
	}
	for _, f := range strings.Split(os.Args[2], ",") {
		if f == "" {
			continue
		}
		fd, err := strconv.Atoi(f)
		if err != nil || fd < 3 {
			fmt.Fprintf(os.Stderr, "nsbox: bad cgroup fd %q\n", f)
			return 125
		}
		// "0" moves the writing process, with all its threads, into the
		// group; the fd is closed before exec so the command cannot move
		// anything anywhere.
		_, werr := unix.Write(fd, []byte("0"))
		unix.Close(fd)
		if werr != nil {
			fmt.Fprintf(os.Stderr, "nsbox: join the sandbox's cgroup: %v\n", werr)
			return 125
		}
	}
	path := os.Args[3]
	argv := os.Args[4:]
	// Everything execve needs is built before the limits exist: after
	// RLIMIT_DATA is lowered, this Go process may not map one more page.
	argvp, err := syscall.SlicePtrFromStrings(argv)
	if err != nil {
		return 125
	}
	envp, err := syscall.SlicePtrFromStrings(os.Environ())
	if err != nil {
		return 125
	}
	pathp, err := unix.BytePtrFromString(path)
	if err != nil {
		return 125
	}
	for _, r := range rl {
		// Hard limit = soft limit: the command cannot raise it back.
		if err := unix.Setrlimit(r.Resource, &unix.Rlimit{Cur: r.Cur, Max: r.Max}); err != nil {
			fmt.Fprintf(os.Stderr, "nsbox: set rlimit %d: %v\n", r.Resource, err)
			return 125
		}
	}
	_, _, errno := syscall.RawSyscall(unix.SYS_EXECVE, uintptr(unsafe.Pointer(pathp)),
		uintptr(unsafe.Pointer(&argvp[0])), uintptr(unsafe.Pointer(&envp[0])))
	switch errno {
	case unix.ENOENT:
		fmt.Fprintf(os.Stderr, "nsbox: %s: command not found\n", argv[0])
		return 127
	default:
		fmt.Fprintf(os.Stderr, "nsbox: %s: cannot execute: %v\n", argv[0], errno)
		return 126
	}
}

// threadCount is the number of threads of this process (the worker): they
// count against RLIMIT_NPROC in the sandbox's user namespace too.
func threadCount() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}
