// Package backend runs a resolved policy: with the native namespace sandbox
// (pkg/sandbox), or, only when explicitly chosen or allowed, with no
// isolation at all. It also inspects the host for `nsbox status`. Like every
// pkg/ package it never prints or exits: warnings are returned as data.
package backend

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

// Backend is one way to run sandboxed commands.
type Backend interface {
	// Name is "native" or "none".
	Name() string
	// Priority orders backends for "auto": lower is tried first.
	Priority() int
	// Isolates is false for a backend that does not sandbox anything.
	Isolates() bool
	// Available says whether the backend works here and, if not, the
	// exact reason (wrapping sandbox.ErrUnavailable).
	Available() error
	// Start begins a session under p.
	Start(ctx context.Context, p sandbox.Policy, opts ...sandbox.Option) (Session, error)
}

// Session runs commands; *sandbox.Session is one.
type Session interface {
	Exec(ctx context.Context, c sandbox.Command) (sandbox.Result, error)
	Close() error
	Pid() int
}

// Native is the namespace sandbox of pkg/sandbox.
type Native struct{}

func (Native) Name() string   { return "native" }
func (Native) Priority() int  { return 10 }
func (Native) Isolates() bool { return true }

// Available creates the sandbox's namespaces once in a short-lived child
// (sandbox.Available, cached for the process): the only test that also
// catches a container's seccomp profile or an LSM refusing them.
func (Native) Available() error { return sandbox.Available() }

func (Native) Start(ctx context.Context, p sandbox.Policy, opts ...sandbox.Option) (Session, error) {
	s, err := sandbox.Start(ctx, p, opts...)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// All returns the known backends in priority order.
func All() []Backend {
	b := []Backend{Native{}, None{}}
	sort.SliceStable(b, func(i, j int) bool { return b[i].Priority() < b[j].Priority() })
	return b
}

// ByName finds a backend.
func ByName(name string) (Backend, bool) {
	for _, b := range All() {
		if b.Name() == name {
			return b, true
		}
	}
	return nil, false
}

// Choice is what Choose decided.
type Choice struct {
	// Backend is tried first.
	Backend Backend
	// Fallback is used when Backend turns out to be unavailable; nil when
	// running without isolation is not allowed.
	Fallback Backend
	// Mode is the mode it was chosen by.
	Mode string
}

// ErrUnknownBackend is a mode that is not auto, required or a backend name.
var ErrUnknownBackend = errors.New("unknown backend")

// Choose picks the backend for mode ("auto", "required" or a backend name).
// With probe, backends are tested with Available and an unavailable choice
// is an error (or, for auto with fallback allowed, backend none); without
// probe the first candidate is returned and the caller falls back when
// Start reports sandbox.ErrUnavailable (Unavailable says how).
//
// Invariant: backend none is only ever chosen by its name, or by "auto"
// when fallback is true (backend_fallback in the user's config file).
func Choose(mode string, fallback, probe bool) (Choice, error) {
	c := Choice{Mode: mode}
	switch mode {
	case "auto", "required", "":
		var first Backend
		var firstErr error
		for _, b := range All() {
			if !b.Isolates() {
				continue
			}
			if first == nil {
				first = b
			}
			if !probe {
				break
			}
			if err := b.Available(); err != nil {
				if firstErr == nil {
					firstErr = err
				}
				continue
			}
			first, firstErr = b, nil
			break
		}
		if mode != "required" && fallback {
			c.Fallback = None{}
		}
		if firstErr != nil {
			if c.Fallback != nil {
				c.Backend, c.Fallback = c.Fallback, nil
				return c, nil
			}
			return c, firstErr
		}
		c.Backend = first
		return c, nil
	}
	b, ok := ByName(mode)
	if !ok {
		return c, fmt.Errorf("%w %q: want auto, required, native or none", ErrUnknownBackend, mode)
	}
	if probe {
		if err := b.Available(); err != nil {
			return c, err
		}
	}
	c.Backend = b
	return c, nil
}

// Unavailable turns a Start error into the exact reason sandboxing does not
// work here, or returns nil when err is something else. It asks the
// backend's own probe, whose message names the host knob.
func Unavailable(b Backend, startErr error) error {
	if !errors.Is(startErr, sandbox.ErrUnavailable) {
		return nil
	}
	if err := b.Available(); err != nil {
		return err
	}
	return startErr
}

// NoneWarning is what every run under backend none must tell the user.
const NoneWarning = "backend none: the command runs WITHOUT a sandbox: it sees and may change everything you can, the network included; only the environment is cleared and the time limit applies"
