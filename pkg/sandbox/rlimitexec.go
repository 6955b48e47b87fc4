package sandbox

// The limit shim is C (rlimitexec.c), run by an ELF constructor before the
// Go runtime starts; this import makes cgo compile and link it. The package
// needs cgo anyway: pkg/seccomp links libseccomp.

// #cgo CFLAGS: -Wall -Wextra
import "C"

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// limitExecArg0 marks the short-lived re-exec of the binary that puts a
// command under the session's limits and then becomes the command: it moves
// itself into the limited cgroup (by the cgroup join fds it inherits) and
// sets the command's rlimits. Limits cannot be put on the worker itself, a
// long-lived Go process: a fork bomb would starve it of threads and the OOM
// killer could choose it. Go has no hook between fork and exec, hence the
// shim; it runs only when the session has limits. The shim is the
// constructor in rlimitexec.c, which takes over before the Go runtime
// starts, so a command pays an execve and a dynamic link, not a Go start.
// The name must equal shim_arg0 there.
const limitExecArg0 = "nsbox-limit-exec"

// limitExecLandlockArg0 is the shim's name under the Landlock backend,
// whose worker is not PID 1 (shim_arg0_landlock in rlimitexec.c).
const limitExecLandlockArg0 = "nsbox-limit-exec-landlock"

// isLimitExec reports whether this process was started as the limit shim:
// the same test as the C constructor's. Its parent is the worker, PID 1 of
// the sandbox.
func isLimitExec() bool {
	return len(os.Args) >= 5 && (os.Args[0] == limitExecArg0 && os.Getppid() == 1 || os.Args[0] == limitExecLandlockArg0)
}

// runLimitExec is reached only if the C shim did not take the process over,
// which a glibc build (the only one rlimitexec.c compiles for) rules out.
// It refuses: the command must not run without its limits, and the CLI
// must not parse the shim's arguments as its own.
func runLimitExec() int {
	fmt.Fprintln(os.Stderr, "nsbox: internal error: the limit shim did not run before Go")
	return 125
}

// encodeRlimits is the shim's first argument: "res:cur:max,...", which
// rlimitexec.c parses.
func encodeRlimits(rl []rlimit) string {
	parts := make([]string, len(rl))
	for i, r := range rl {
		parts[i] = fmt.Sprintf("%d:%d:%d", r.Resource, r.Cur, r.Max)
	}
	return strings.Join(parts, ",")
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
