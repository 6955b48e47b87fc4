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

// rlimitExecArg0 marks the short-lived re-exec of the binary that sets a
// command's rlimits and then becomes the command. It is used only when
// limits fall back to rlimits (no usable cgroup): RLIMIT_AS, RLIMIT_CPU and
// RLIMIT_NPROC cannot be set on the worker itself, a long-lived Go process,
// without binding it too, and Go has no hook between fork and exec.
const rlimitExecArg0 = "nsbox-rlimit-exec"

// isRlimitExec reports whether this process is the rlimit shim. Its parent
// is the worker, PID 1 of the sandbox.
func isRlimitExec() bool {
	return len(os.Args) >= 4 && os.Args[0] == rlimitExecArg0 && os.Getppid() == 1
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

// runRlimitExec sets the limits and execs the command: argv is
// [arg0, limits, path, command argv...]. It never returns on success.
func runRlimitExec() int {
	rl, err := decodeRlimits(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "nsbox:", err)
		return 125
	}
	path := os.Args[2]
	argv := os.Args[3:]
	// Everything execve needs is built before the limits exist: after
	// RLIMIT_AS is lowered, this Go process may not map one more page.
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
