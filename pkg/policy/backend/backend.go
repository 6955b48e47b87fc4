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
	"strings"
	"sync"

	"github.com/nsbox/nsbox/pkg/landlock"
	"github.com/nsbox/nsbox/pkg/sandbox"
)

// Backend is one way to run sandboxed commands.
type Backend interface {
	// Name is what --backend NAME selects ("native", "landlock", "none").
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

// registry holds the backends by name; Register adds to it.
var registry = struct {
	sync.Mutex
	byName map[string]Backend
}{byName: map[string]Backend{}}

func init() {
	for _, b := range []Backend{Native{}, Landlock{}, None{}} {
		if err := Register(b); err != nil {
			panic(err) // the built-in names are distinct
		}
	}
}

// ErrDuplicate is a Register of a name that is taken.
var ErrDuplicate = errors.New("a backend of that name is registered")

// Register adds a backend that "auto" and --backend NAME can choose. Its
// Priority places it: lower is tried first (native 10, landlock 20, none
// 1000). A backend whose Isolates is false is only ever chosen by name, or
// by "auto" with backend_fallback, like none.
func Register(b Backend) error {
	registry.Lock()
	defer registry.Unlock()
	name := b.Name()
	if name == "" || name == "auto" || name == "required" {
		return fmt.Errorf("backend name %q is reserved", name)
	}
	if _, ok := registry.byName[name]; ok {
		return fmt.Errorf("%w: %q", ErrDuplicate, name)
	}
	registry.byName[name] = b
	return nil
}

// All returns the registered backends in priority order (then by name).
func All() []Backend {
	registry.Lock()
	b := make([]Backend, 0, len(registry.byName))
	for _, x := range registry.byName {
		b = append(b, x)
	}
	registry.Unlock()
	sort.Slice(b, func(i, j int) bool {
		if b[i].Priority() != b[j].Priority() {
			return b[i].Priority() < b[j].Priority()
		}
		return b[i].Name() < b[j].Name()
	})
	return b
}

// ByName finds a backend.
func ByName(name string) (Backend, bool) {
	registry.Lock()
	defer registry.Unlock()
	b, ok := registry.byName[name]
	return b, ok
}

// Names lists the modes --backend accepts.
func Names() []string {
	out := []string{"auto", "required"}
	for _, b := range All() {
		out = append(out, b.Name())
	}
	return out
}

// Choice is what Choose decided.
type Choice struct {
	// Backend is tried first.
	Backend Backend
	// Fallback is Fallbacks[0], or nil.
	Fallback Backend
	// Fallbacks are tried in order when the one before turns out to be
	// unavailable: the weaker isolating backends for "auto" (landlock when
	// native cannot start), then none only with backend_fallback. Empty
	// for "required" and for a backend chosen by name.
	Fallbacks []Backend
	// Mode is the mode it was chosen by.
	Mode string
}

// ErrUnknownBackend is a mode that is not auto, required or a backend name.
var ErrUnknownBackend = errors.New("unknown backend")

// Choose picks the backend for mode ("auto", "required" or a backend name).
// With probe, backends are tested with Available and the first available
// one is chosen (an error when none is); without probe the first candidate
// is returned with the rest as Fallbacks, and the caller moves on to the
// next when Start fails and Unavailable says why.
//
// Invariants: "required" is the strongest backend (the lowest priority
// that isolates) and nothing else: it never falls back. Backend none is
// only ever chosen by its name, or by "auto" when fallback is true
// (backend_fallback in the user's config file).
func Choose(mode string, fallback, probe bool) (Choice, error) {
	c := Choice{Mode: mode}
	switch mode {
	case "auto", "required", "":
		var cands []Backend
		for _, b := range All() {
			if b.Isolates() {
				cands = append(cands, b)
			}
		}
		if mode == "required" && len(cands) > 1 {
			cands = cands[:1]
		}
		if mode != "required" && fallback {
			if n, ok := ByName("none"); ok {
				cands = append(cands, n)
			}
		}
		if len(cands) == 0 {
			return c, fmt.Errorf("%w: no sandboxing backend is registered", sandbox.ErrUnavailable)
		}
		var firstErr error
		if probe {
			for len(cands) > 0 {
				err := cands[0].Available()
				if err == nil {
					break
				}
				if firstErr == nil {
					firstErr = err
				}
				cands = cands[1:]
			}
			if len(cands) == 0 {
				return c, firstErr
			}
		}
		c.Backend, c.Fallbacks = cands[0], cands[1:]
		if len(c.Fallbacks) > 0 {
			c.Fallback = c.Fallbacks[0]
		}
		return c, nil
	}
	b, ok := ByName(mode)
	if !ok {
		return c, fmt.Errorf("%w %q: want one of %s", ErrUnknownBackend, mode, strings.Join(Names(), ", "))
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
	var se *sandbox.SetupError
	if startErr == nil || errors.Is(startErr, context.Canceled) || errors.Is(startErr, sandbox.ErrInvalidPolicy) ||
		!errors.Is(startErr, sandbox.ErrUnavailable) && !errors.As(startErr, &se) {
		return nil
	}
	// The backend's own probe decides, also for a start that failed in a
	// later step: a fresh /proc refused under a masked one fails the
	// namespace sandbox's "mount" step, not its clone.
	if err := b.Available(); err != nil {
		return err
	}
	if errors.Is(startErr, sandbox.ErrUnavailable) {
		return startErr
	}
	return nil
}

// Landlock runs the same worker without namespaces, confined by Landlock,
// seccomp, no_new_privs and the same limits (sandbox.WithLandlock): for
// containers and pods where user namespaces or a fresh /proc are refused.
// It is weaker; NotIsolated says how.
type Landlock struct{}

func (Landlock) Name() string   { return "landlock" }
func (Landlock) Priority() int  { return 20 }
func (Landlock) Isolates() bool { return true }

// Available needs a kernel with Landlock enabled and landlock_* syscalls
// that no outer seccomp profile refuses.
func (Landlock) Available() error { return sandbox.LandlockAvailable() }

func (Landlock) Start(ctx context.Context, p sandbox.Policy, opts ...sandbox.Option) (Session, error) {
	s, err := sandbox.Start(ctx, p, append(opts[:len(opts):len(opts)], sandbox.WithLandlock())...)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// NotIsolated lists what the backend leaves shared with the host on this
// kernel, with network none.
func (Landlock) NotIsolated() []string {
	abi, _ := landlockABI()
	return sandbox.LandlockGaps(abi, sandbox.NetworkNone)
}

// Gaps is implemented by a backend that isolates less than the native one:
// NotIsolated says what, for `nsbox status` and --json-status.
type Gaps interface {
	NotIsolated() []string
}

// NoneWarning is what every run under backend none must tell the user.
const NoneWarning = "backend none: the command runs WITHOUT a sandbox: it sees and may change everything you can, the network included; only the environment is cleared and the time limit applies"

func landlockABI() (int, error) { return landlock.ABI() }
