package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

// DefaultTimeout bounds a tool call when neither the call nor the policy
// (ToolSettings.Timeout) sets a timeout.
const DefaultTimeout = 30 * time.Second

// DefaultMaxOutput is the output budget of a call when the policy does not
// set one (ToolSettings.MaxOutput): about 30,000 characters, sized for a
// model's context (output.go).
const DefaultMaxOutput = 30000

// DefaultMaxResults bounds search results when the policy does not
// (ToolSettings.MaxResults).
const DefaultMaxResults = 50

// timeoutGrace is how long a tool whose deadline passed gets to return its
// own (more precise) result before the registry answers for it.
const timeoutGrace = 2 * time.Second

// validName reports whether s is a tool name: 1 to 64 of a-z A-Z 0-9 _ -,
// what the function-calling APIs accept (^[a-zA-Z0-9_-]{1,64}$). A loop,
// not that regexp: its bounded repetition compiles to 64 states, and every
// worker start validates the built-in tools.
func validName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Registry is a set of tools: the built-in ones it was made with, plus
// tools registered at run time. It implements sandbox.WorkerTools and is
// safe for concurrent use.
type Registry struct {
	mu      sync.RWMutex
	order   []string
	entries map[string]*entry
	errs    []error
	// held is what the run-time tools count against RuntimeToolBudget.
	held int
}

type entry struct {
	tool    Tool
	def     Definition
	builtin bool
	size    int // a run-time tool's definition, in bytes

	// Built-in schemas are compiled on first use, once: NewRegistry runs
	// in every nsbox process (it is handed to sandbox.Init), most of which
	// never call a tool.
	once   sync.Once
	schema *Schema
	err    error
}

func (e *entry) compiled() (*Schema, error) {
	e.once.Do(func() { e.schema, e.err = CompileSchema(e.def.Name, e.def.Parameters) })
	return e.schema, e.err
}

var _ sandbox.WorkerTools = (*Registry)(nil)

// NewRegistry returns a registry serving tools as its built-in set: they
// cannot be replaced or removed at run time. A tool with an invalid or
// duplicate name is left out and reported by Err.
func NewRegistry(tools ...Tool) *Registry {
	r := &Registry{entries: map[string]*entry{}}
	for _, t := range tools {
		def := t.Definition()
		switch {
		case !validName(def.Name):
			r.errs = append(r.errs, fmt.Errorf("tool %q: invalid name (want 1 to 64 of a-z A-Z 0-9 _ -)", def.Name))
			continue
		case r.entries[def.Name] != nil:
			r.errs = append(r.errs, fmt.Errorf("tool %q: defined twice", def.Name))
			continue
		}
		r.entries[def.Name] = &entry{tool: t, def: presentBuiltin(def), builtin: true}
		r.order = append(r.order, def.Name)
	}
	return r
}

// NewBuiltinRegistry is NewRegistry(Builtin()...) plus extra tools (host
// API tools, an embedder's own), all of them built in.
func NewBuiltinRegistry(extra ...Tool) *Registry {
	return NewRegistry(append(Builtin(), extra...)...)
}

// Err reports built-in tools that NewRegistry left out, and built-in
// schemas that do not compile.
func (r *Registry) Err() error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	errs := append([]error(nil), r.errs...)
	for _, n := range r.order {
		if e := r.entries[n]; e.builtin {
			if _, err := e.compiled(); err != nil {
				errs = append(errs, fmt.Errorf("tool %q: %w", n, err))
			}
		}
	}
	return errors.Join(errs...)
}

// List returns the current definitions, built-in tools first, in the order
// they were added.
func (r *Registry) List() []Definition {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Definition, 0, len(r.order))
	for _, n := range r.order {
		out = append(out, r.entries[n].def)
	}
	return out
}

// Definitions implements sandbox.WorkerTools: a JSON array of
// {name, description, parameters}.
func (r *Registry) Definitions() json.RawMessage {
	b, err := json.Marshal(r.List())
	if err != nil {
		return json.RawMessage("[]")
	}
	return b
}

// Call implements sandbox.WorkerTools. It always answers with a result
// object; every failure (unknown tool, bad arguments, a panic, a timeout)
// is a result with success:false, never a Go error or a crash.
func (r *Registry) Call(ctx context.Context, env sandbox.ToolEnv, name string, args json.RawMessage) (json.RawMessage, error) {
	return marshalResult(r.Invoke(ctx, env, name, args)), nil
}

// Invoke is Call returning the Result as a value.
func (r *Registry) Invoke(ctx context.Context, env sandbox.ToolEnv, name string, args json.RawMessage) Result {
	r.mu.RLock()
	e := r.entries[name]
	r.mu.RUnlock()
	if e == nil {
		return Fail(fmt.Sprintf("unknown tool %q (available: %s)", name, strings.Join(r.names(), ", ")))
	}
	schema, err := e.compiled()
	if err != nil {
		return Fail(fmt.Sprintf("tool %q cannot be called: %v", name, err))
	}
	// Arguments are validated before the tool sees them: a tool's Run may
	// rely on the types its schema declares.
	v, err := DecodeArgs(args)
	if err == nil {
		err = schema.Validate(v)
	}
	if err != nil {
		return Fail(err.Error())
	}
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}

	timeout := DefaultTimeout
	if env != nil && env.Settings().Timeout > 0 {
		timeout = env.Settings().Timeout
	}
	if dl, ok := ctx.Deadline(); ok {
		// A per-call timeout (the caller's context) wins over the policy.
		timeout = time.Until(dl)
	} else {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	return runGuarded(ctx, name, timeout, func() Result { return e.tool.Run(ctx, env, args) })
}

// runGuarded runs fn in its own goroutine so that neither a panic nor a
// tool that ignores its context can take the worker down or hang the call.
func runGuarded(ctx context.Context, name string, timeout time.Duration, fn func() Result) Result {
	done := make(chan Result, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- Fail(fmt.Sprintf("tool %q failed with an internal error: %v", name, p))
			}
		}()
		res := fn()
		if !res.Success && res.Reason == "" {
			// A tool that gave up on its context says why, whatever
			// its own words.
			switch {
			case errors.Is(ctx.Err(), context.DeadlineExceeded):
				res.Reason = ReasonTimeout
			case errors.Is(ctx.Err(), context.Canceled):
				res.Reason = ReasonCanceled
			}
		}
		done <- res
	}()
	select {
	case res := <-done:
		return res
	case <-ctx.Done():
	}
	t := time.NewTimer(timeoutGrace)
	defer t.Stop()
	select {
	case res := <-done:
		return res
	case <-t.C:
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return withReason(Fail(fmt.Sprintf("tool %q timed out after %s", name, roundDuration(timeout))), ReasonTimeout)
	}
	return withReason(Fail(fmt.Sprintf("tool %q was canceled", name)), ReasonCanceled)
}

func withReason(r Result, reason string) Result {
	r.Reason = reason
	return r
}

func (r *Registry) names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return append([]string(nil), r.order...)
}

// Register implements sandbox.WorkerTools: it adds (or replaces) a tool
// defined at run time, from a RuntimeDefinition in JSON. Built-in tools
// cannot be replaced.
func (r *Registry) Register(raw json.RawMessage) error {
	t, err := ParseRuntimeTool(raw)
	if err != nil {
		return err
	}
	def := t.Definition()
	schema, err := CompileSchema(def.Name, def.Parameters)
	if err != nil {
		return fmt.Errorf("tool %q: %w", def.Name, err)
	}
	// A definition counts its bytes and what its patterns compile to.
	e := &entry{tool: t, def: def, schema: schema, size: len(raw) + schema.patternInsts*patternInstCost}
	e.once.Do(func() {})
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.entries[def.Name]
	if old != nil && old.builtin {
		return fmt.Errorf("tool %q is built in and cannot be replaced", def.Name)
	}
	if old == nil && len(r.order) >= maxTools {
		return fmt.Errorf("%w: at most %d tools", ErrToolBudget, maxTools)
	}
	held := r.held + e.size
	if old != nil {
		held -= old.size
	}
	// Invariant: what programs inside make the worker hold is bounded.
	// Every registered definition stays in the worker (PID 1) and every
	// change sends a snapshot of all of them to the host; 256 definitions
	// of 2 MiB, re-registered in a loop, grew PID 1 to 1.4 GB under
	// --memory 64M.
	if held > RuntimeToolBudget {
		return fmt.Errorf("%w: tool %q (%s) would make the run-time tools of this session hold %s, more than %s; unregister tools or register smaller ones", ErrToolBudget, def.Name, byteSize(e.size), byteSize(held), byteSize(RuntimeToolBudget))
	}
	r.held = held
	r.entries[def.Name] = e
	if old == nil {
		r.order = append(r.order, def.Name)
	}
	return nil
}

// maxTools bounds the tool set a session can grow to.
const maxTools = 256

// RuntimeToolBudget bounds the bytes of the definitions (schemas,
// descriptions, implementation scripts) registered at run time that a
// session holds at once, their regular expressions counted at
// patternInstCost per estimated instruction: a replaced or unregistered
// tool gives its share back.
const RuntimeToolBudget = 4 << 20

// ErrToolBudget: a registration would pass the session's tool budget
// (RuntimeToolBudget, or the number of tools).
var ErrToolBudget = errors.New("tool budget of this session exhausted")

// byteSize writes n for a message: 512 B, 1.5 KiB, 4.0 MiB.
func byteSize(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// Unregister implements sandbox.WorkerTools.
func (r *Registry) Unregister(name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entries[name]
	switch {
	case e == nil:
		return fmt.Errorf("no tool named %q", name)
	case e.builtin:
		return fmt.Errorf("tool %q is built in and cannot be removed", name)
	}
	delete(r.entries, name)
	r.held -= e.size
	for i, n := range r.order {
		if n == name {
			r.order = append(r.order[:i], r.order[i+1:]...)
			break
		}
	}
	return nil
}

func marshalResult(res Result) json.RawMessage {
	b, err := json.Marshal(res)
	if err != nil {
		b, _ = json.Marshal(Fail("the tool's output cannot be encoded as JSON: " + err.Error()))
	}
	return b
}

// ParseDefinitions reads the plain definitions a session or a registry
// lists (a JSON array of {name, description, parameters}).
func ParseDefinitions(raw json.RawMessage) ([]Definition, error) {
	var defs []Definition
	if err := json.Unmarshal(raw, &defs); err != nil {
		return nil, fmt.Errorf("tool definitions: %v", err)
	}
	return defs, nil
}

func roundDuration(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}
