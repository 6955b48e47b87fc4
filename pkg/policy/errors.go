package policy

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

var (
	// ErrInvalid is matched by every *Error: a policy that cannot be used.
	ErrInvalid = errors.New("invalid policy")
	// ErrProfileNotFound: no built-in or user profile has that name.
	ErrProfileNotFound = errors.New("profile not found")
	// ErrCycle: profiles extend each other in a loop.
	ErrCycle = errors.New("profile extend cycle")
	// ErrSymlinkLoop: a path's symlinks do not end.
	ErrSymlinkLoop = errors.New("symlink loop")
	// ErrUnsafeWorkspace: the workspace would make /, the home directory
	// or a system directory writable.
	ErrUnsafeWorkspace = errors.New("unsafe workspace")
	// ErrUnknownVariable: a path names a variable nsbox does not know
	// (${workspaceFolder} from another editor's config), or the workspace
	// names one that is unset.
	ErrUnknownVariable = errors.New("unknown variable")
	// ErrNotWritableDir: a shallow entry names no writable directory of
	// the run.
	ErrNotWritableDir = errors.New("not a writable directory")
	// ErrWritablePolicyFile: a profile or seccomp file lies in a
	// writable directory of the run outside its .nsbox/ directory, where
	// an earlier sandbox could have rewritten it.
	ErrWritablePolicyFile = errors.New("policy file in a writable directory")
	// ErrUntrustedPolicyFile: a project policy file (in a .nsbox/policy/
	// directory) whose bytes the user has not trusted (nsbox trust).
	ErrUntrustedPolicyFile = errors.New("untrusted project policy file")
)

// Error is a policy problem, for users: where it is (a file and line, the
// command line, or the built-in defaults), which key, and what is wrong.
type Error struct {
	// Source is a file path, "" for the command line, or "built-in
	// defaults".
	Source string
	// Line is 1-based, 0 when unknown or not from a file.
	Line int
	// Key is the dotted key ("limits.memory", "filesystem.rw[1]") or, for
	// the command line, the flag ("--memory").
	Key string
	Msg string
	// Err is the cause, for errors.Is/As (ErrCycle, ErrSymlinkLoop,
	// fs.ErrNotExist, a *cgroups.SizeError...); may be nil.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Source != "" {
		b.WriteString(e.Source)
		if e.Line > 0 {
			b.WriteString(":" + strconv.Itoa(e.Line))
		}
		b.WriteString(": ")
	}
	if e.Key != "" {
		b.WriteString(e.Key + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrInvalid) true for every *Error.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// Warning is a problem that does not stop a run (an unknown variable, an
// optional path that is missing, a loosening setting). Notes are
// informational; callers usually show them only on request (--dry-run).
type Warning struct {
	Source string `json:"source,omitempty"`
	Line   int    `json:"line,omitempty"`
	Key    string `json:"key,omitempty"`
	Msg    string `json:"msg"`
	Note   bool   `json:"note,omitempty"`
}

func (w Warning) String() string {
	e := Error{Source: w.Source, Line: w.Line, Key: w.Key, Msg: w.Msg}
	return e.Error()
}

func errorf(src *Layer, key string, cause error, format string, args ...any) *Error {
	e := &Error{Key: key, Msg: fmt.Sprintf(format, args...), Err: cause}
	if src != nil {
		e.Source, e.Line, e.Key = src.where(key)
	}
	return e
}
