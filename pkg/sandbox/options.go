package sandbox

import (
	"context"
	"io"
)

// Option configures Start beyond the (plain data) Policy.
type Option func(*options)

type options struct {
	handlers *Handlers
	audit    io.Writer
	id       string
	// prestarted is a worker to adopt (WithPrestarted).
	prestarted *Prestarted
	// inet decides AF_INET/AF_INET6 socket calls (WithSocketHandler).
	inet SocketHandler
	// violations hears of refusals as they happen (WithViolations).
	violations func(*ViolationError)
	// landlock: the Landlock backend instead of namespaces (WithLandlock).
	landlock bool
	// outerProc: bind the outer /proc read-only (WithOuterProc).
	outerProc bool
	// procFallback: the outer /proc when a fresh one is refused.
	procFallback bool
	// pooled: a Pool's session (withPooled).
	pooled bool
	// poolReplan and poolErrors configure a Pool; Start ignores them
	// (WithPoolReplan, WithPoolErrors in pool.go).
	poolReplan func(context.Context, error) (Policy, error)
	poolErrors func(*PoolFailure)
	poolBuilt  func()
	poolEnded  func()
}

// withPooled marks a Pool's sessions: their worker runs one command, or
// none, and waits idle before it (Pool). It runs its Go code on one
// processor (GOMAXPROCS=1): with the default, one per CPU, every
// processor's caches, and the threads that serve them, stay in each idle
// pooled worker (BenchmarkPoolIdlePSS: 1.52 MiB against 1.29 here), for a
// worker that never runs Go code in parallel on its one command's path.
func withPooled() Option { return func(o *options) { o.pooled = true } }

// WithProcFallback lets the namespace sandbox bind the outer /proc
// read-only (as WithOuterProc) when the kernel refuses a fresh one, in the
// same start; Session.NotIsolated then says so. backend.Native uses it.
func WithProcFallback() Option { return func(o *options) { o.procFallback = true } }

// WithOuterProc builds the namespace sandbox with the /proc nsbox itself
// sees bound read-only instead of a fresh one, for hosts whose kernel
// refuses a fresh /proc (an outer container's masked one, ErrProcRefused).
// Weaker than a fresh /proc: OuterProcGaps says how.
func WithOuterProc() Option { return func(o *options) { o.outerProc = true } }

// OuterProcGaps is what a sandbox built WithOuterProc does not isolate.
func OuterProcGaps() []string {
	return []string{
		"/proc is the outer container's, read-only: the sandbox sees the container's processes and their command lines (the kernel refuses a fresh /proc under the container's masked one)",
		"environ, root, cwd, memory and what the fds of those processes are (a same-uid caller can still list their fd numbers) are refused by the kernel's ptrace access check (the sandbox's user namespace is a child of theirs, with no CAP_SYS_PTRACE there), and again by the Landlock domain of the scopes step on Landlock ABI 6",
		"the network state of those processes is readable in /proc/PID/net (the kernel checks no ptrace access there): the container's TCP, UDP and unix sockets with their addresses and owners, its interfaces, addresses, counters, routes and neighbours, and the sockets of other sandboxes' network namespaces; the sandbox's own network stays private (network none or filtered)",
	}
}

// WithHandlers serves host API methods from h to the session's commands
// (only the methods the policy's HostAPIs allow). Session.Close waits for
// the handlers running for the session: a handler must not call Close of
// the session it serves and wait for it (that never returns); it may start
// it with `go s.Close()`.
func WithHandlers(h *Handlers) Option { return func(o *options) { o.handlers = h } }

// WithAudit writes one JSON line per hostCall (and tool call) to w, with
// secret-looking values redacted.
func WithAudit(w io.Writer) Option { return func(o *options) { o.audit = w } }

// WithID names the session in audit lines.
func WithID(id string) Option { return func(o *options) { o.id = id } }
