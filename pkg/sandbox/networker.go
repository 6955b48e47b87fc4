package sandbox

import (
	"github.com/nsbox/nsbox/pkg/netfilter"
	"golang.org/x/sys/unix"
)

// bindResolver binds the filtered network's resolver sockets (UDP and TCP
// at netfilter.ResolverAddr) in the sandbox's network namespace; the
// handshake reply names them and the supervisor serves them. See
// netfilter.BindResolver for why the worker binds them.
func (w *worker) bindResolver() error {
	if !w.setup.Resolver {
		return nil
	}
	// Plain numbers, close-on-exec: no command inherits them;
	// closeResolver closes them.
	u, t, err := netfilter.BindResolver()
	if err != nil {
		return err
	}
	w.resolver = resolverFDs{UDP: u, TCP: t}
	return nil
}

// closeResolver drops the worker's copies once the supervisor took its
// own (it has when its first message after the handshake arrives): PID 1
// holds no socket of the resolver then, and only the supervisor answers.
func (w *worker) closeResolver() {
	if w.resolver.UDP > 0 {
		unix.Close(w.resolver.UDP)
	}
	if w.resolver.TCP > 0 {
		unix.Close(w.resolver.TCP)
	}
	w.resolver = resolverFDs{}
}
