package cgroups

import (
	"errors"
	"fmt"
)

// Sentinel errors, for errors.Is. Every error this package returns wraps one
// of them (or an *os.PathError / syscall.Errno from the kernel, wrapped).
var (
	// ErrInvalidLimit: a Limits field is out of range (see *LimitError).
	ErrInvalidLimit = errors.New("invalid resource limit")
	// ErrInvalidSize: ParseSize could not read a size (see *SizeError).
	ErrInvalidSize = errors.New("invalid size")
	// ErrInvalidID: the id given to New cannot be part of a cgroup name.
	ErrInvalidID = errors.New("invalid cgroup id")
	// ErrSetup: a cgroup could not be created or configured (see *SetupError).
	ErrSetup = errors.New("cgroup setup failed")
	// ErrCleanup: a group could not be emptied or removed (see *CleanupError).
	ErrCleanup = errors.New("cgroup cleanup failed")
	// ErrDestroyed: the Manager was already destroyed.
	ErrDestroyed = errors.New("cgroup manager already destroyed")
)

// LimitError says which Limits field is wrong and why, in words for users.
type LimitError struct {
	Field string // "memory", "pids", "cpu", "cputime"
	Value string // the value as given
	Msg   string // what is wrong and what is accepted
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%s limit %s: %s", e.Field, e.Value, e.Msg)
}

// Is makes errors.Is(err, ErrInvalidLimit) true.
func (e *LimitError) Is(target error) bool { return target == ErrInvalidLimit }

// SizeError is returned by ParseSize.
type SizeError struct {
	Input string
	Msg   string
}

func (e *SizeError) Error() string {
	return fmt.Sprintf("invalid size %q: %s", e.Input, e.Msg)
}

// Is makes errors.Is(err, ErrInvalidSize) true.
func (e *SizeError) Is(target error) bool { return target == ErrInvalidSize }

// SetupError names the mode, the step and the cgroup path that failed.
type SetupError struct {
	Mode Mode
	Step string // e.g. "mkdir", "enable controllers", "memory.max", "start scope"
	Path string
	Err  error
}

func (e *SetupError) Error() string {
	if e.Path != "" {
		return fmt.Sprintf("%s cgroup setup: %s %s: %v", e.Mode, e.Step, e.Path, e.Err)
	}
	return fmt.Sprintf("%s cgroup setup: %s: %v", e.Mode, e.Step, e.Err)
}

// Unwrap returns the underlying (usually kernel) error.
func (e *SetupError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrSetup) true.
func (e *SetupError) Is(target error) bool { return target == ErrSetup }

// CleanupError names a group that could not be emptied or removed.
type CleanupError struct {
	Path string
	Err  error
}

func (e *CleanupError) Error() string {
	return fmt.Sprintf("cannot remove cgroup %s: %v", e.Path, e.Err)
}

// Unwrap returns the underlying error.
func (e *CleanupError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrCleanup) true.
func (e *CleanupError) Is(target error) bool { return target == ErrCleanup }
