package sandbox

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrSandboxViolation is matched by every *ViolationError.
	ErrSandboxViolation = errors.New("sandbox violation")
	// ErrResourceLimit is matched by every *ResourceLimitError.
	ErrResourceLimit = errors.New("resource limit reached")
	// ErrUnavailable means sandboxing cannot work on this host; the wrapped
	// message says why and which knob fixes it.
	ErrUnavailable = errors.New("sandboxing unavailable")
	// ErrInterpreterNotFound means a script language has no interpreter
	// inside the sandbox. It is not a violation.
	ErrInterpreterNotFound = errors.New("interpreter not found")
	// ErrClosed is returned by a Session used after Close or after its
	// worker died.
	ErrClosed = errors.New("session closed")
	// ErrCommandNotFound means the command does not exist inside the
	// sandbox (exit code 127).
	ErrCommandNotFound = errors.New("command not found")
	// ErrNotExecutable means the command exists but cannot be executed
	// (exit code 126).
	ErrNotExecutable = errors.New("cannot execute")
	// ErrInvalidPolicy is matched by every *PolicyError.
	ErrInvalidPolicy = errors.New("invalid policy")
	// ErrWorkspaceNotVisible is Session.WorkspaceErr's: the directory the
	// tools are confined to does not exist inside the sandbox (a policy
	// that binds no workspace, run from /tmp, which is private inside).
	ErrWorkspaceNotVisible = errors.New("the workspace is not visible inside the sandbox")
	// ErrSeccompChanged: the seccomp profile file differs from the one
	// the policy was resolved with (Policy.SeccompSHA256).
	ErrSeccompChanged = errors.New("the file changed after the policy was resolved; run again")
	// ErrTeardownIncomplete is Session.Close's when a session without a
	// PID namespace (the Landlock backend) may have left processes
	// running: its worker could not confirm that it killed every one.
	ErrTeardownIncomplete = errors.New("the session's processes may have outlived it")
)

// ViolationError is an operation the sandbox refused.
type ViolationError struct {
	Operation string // e.g. "filesystem write", "network connect", "syscall"
	Path      string
	Detail    string
	// Host and Port name a refused network destination ("network
	// connect", "network lookup"; Port 0 for a lookup). Path is then
	// "host:port".
	Host string
	Port int
}

func (e *ViolationError) Error() string {
	msg := "sandbox violation: " + e.Operation
	if e.Path != "" {
		msg += " " + e.Path
	}
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// Is makes errors.Is(err, ErrSandboxViolation) true.
func (e *ViolationError) Is(target error) bool { return target == ErrSandboxViolation }

// ResourceLimitError is a limit that ended a command.
type ResourceLimitError struct {
	Resource string // "memory", "pids", "time", "cpu"
	Limit    string // human form, e.g. "256 MiB", "32", "1s"
	// Enforcer names the mechanism: "cgroup2", "cgroup1", "rlimit", "timer".
	Enforcer string
}

func (e *ResourceLimitError) Error() string {
	switch e.Resource {
	case "time":
		return fmt.Sprintf("killed: time limit %s reached", e.Limit)
	case "pids":
		return fmt.Sprintf("process limit %s reached", e.Limit)
	}
	return fmt.Sprintf("killed: %s limit %s reached", e.Resource, e.Limit)
}

// Is makes errors.Is(err, ErrResourceLimit) true.
func (e *ResourceLimitError) Is(target error) bool { return target == ErrResourceLimit }

// ErrPlanChanged is wrapped by a SetupError when a path of the policy
// changed on the host between its resolution and the build (a hidden file
// moved or replaced by a symlink: the build fails closed). Resolving the
// policy again and starting anew is the answer.
var ErrPlanChanged = errors.New("the host's files changed while the sandbox was built")

// planChangedError is the worker's message for ErrPlanChanged.
type planChangedError struct{ msg string }

func (e *planChangedError) Error() string        { return e.msg }
func (e *planChangedError) Is(target error) bool { return target == ErrPlanChanged }

// SetupError is a failure while building the sandbox, naming the step.
type SetupError struct {
	Step string
	Err  error
}

func (e *SetupError) Error() string {
	msg := e.Err.Error()
	// Mount errors already say what failed ("mount A on B: ..."): do not
	// repeat the step.
	if e.Step == "" || strings.HasPrefix(msg, e.Step) {
		return msg
	}
	return e.Step + ": " + msg
}

func (e *SetupError) Unwrap() error { return e.Err }

// PolicyError is a policy that fails validation, naming the field.
type PolicyError struct {
	Field string
	Msg   string
}

func (e *PolicyError) Error() string { return fmt.Sprintf("policy %s: %s", e.Field, e.Msg) }

// Is makes errors.Is(err, ErrInvalidPolicy) true.
func (e *PolicyError) Is(target error) bool { return target == ErrInvalidPolicy }
