package store

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors, for errors.Is. Every error the host APIs return wraps one
// of these (or is an I/O error naming its file).
var (
	// ErrCorrupt: the store file cannot be read as an nsbox store. It is
	// never repaired or replaced automatically.
	ErrCorrupt = errors.New("store is corrupt")
	// ErrBusy: another process held the store's lock for too long.
	ErrBusy = errors.New("store is busy")
	// ErrNotFound: no entry with the given key or id.
	ErrNotFound = errors.New("not found")
	// ErrTooLarge: a value exceeds a documented bound.
	ErrTooLarge = errors.New("too large")
	// ErrInvalid: an argument is missing or malformed.
	ErrInvalid = errors.New("invalid argument")
)

// CorruptError reports a store file that is not a readable nsbox store: a
// damaged file, another program's file, or a store of another kind.
type CorruptError struct {
	Path   string
	Reason string
	// MovedTo is where the file was moved when the store was asked to
	// move corrupt files aside (Options.MoveAsideCorrupt); MoveErr says why
	// that move failed.
	MovedTo string
	MoveErr error
	// file is the identity of the file found corrupt (seen), which
	// afterCorrupt moves only while it is still the one at Path.
	file fileID
}

// fileID is a file's device and inode; the zero value names none.
type fileID struct{ dev, ino uint64 }

func (e *CorruptError) Error() string {
	switch {
	case e.MovedTo != "":
		return fmt.Sprintf("store %s is unreadable: %s; it was moved to %s and the next write starts a new store", e.Path, e.Reason, e.MovedTo)
	case e.MoveErr != nil:
		return fmt.Sprintf("store %s is unreadable: %s; moving it aside failed (%v), the file was left in place", e.Path, e.Reason, e.MoveErr)
	}
	return fmt.Sprintf("store %s is unreadable: %s; the file was left untouched (move it aside to start a new store)", e.Path, e.Reason)
}

func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// BusyError reports a lock held by another process past the timeout.
type BusyError struct {
	Path   string
	Waited time.Duration
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("store %s is locked by another process (waited %s); try again", e.Path, e.Waited)
}

func (e *BusyError) Is(target error) bool { return target == ErrBusy }

// NotFoundError names what was not found: Kind is "memory" or "tab" (an
// empty tab ID: no tab is selected).
type NotFoundError struct {
	Kind string
	ID   string
}

func (e *NotFoundError) Error() string {
	switch e.Kind {
	case "memory":
		return fmt.Sprintf("no memory with key %q", e.ID)
	case "tab":
		if e.ID == "" {
			return "no tab is selected; give a tab id"
		}
		return fmt.Sprintf("no tab with id %q", e.ID)
	}
	return fmt.Sprintf("no %s %q", e.Kind, e.ID)
}

func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// TooLargeError reports a value over a documented bound, in bytes or items.
type TooLargeError struct {
	What  string // e.g. "document content"
	Size  int
	Limit int
	Unit  string // "bytes" or an item name such as "tabs"
}

func (e *TooLargeError) Error() string {
	unit := e.Unit
	if unit == "" {
		unit = "bytes"
	}
	return fmt.Sprintf("%s is too large: %d %s, the limit is %d %s", e.What, e.Size, unit, e.Limit, unit)
}

func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

// ArgError reports a bad argument; Field names it as the caller wrote it.
type ArgError struct {
	Field string
	Msg   string
}

func (e *ArgError) Error() string {
	if e.Field == "" {
		return "invalid arguments: " + e.Msg
	}
	return fmt.Sprintf("invalid argument %q: %s", e.Field, e.Msg)
}

func (e *ArgError) Is(target error) bool { return target == ErrInvalid }
