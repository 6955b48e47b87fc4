package sandbox

import "io"

// Option configures Start beyond the (plain data) Policy.
type Option func(*options)

type options struct {
	handlers *Handlers
	audit    io.Writer
	id       string
	// prestarted is a worker to adopt (WithPrestarted).
	prestarted *Prestarted
	// landlock: the Landlock backend instead of namespaces (WithLandlock).
	landlock bool
	// inet decides AF_INET/AF_INET6 socket calls (WithSocketHandler).
	inet SocketHandler
	// violations hears of refusals as they happen (WithViolations).
	violations func(*ViolationError)
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
