package main

import (
	"context"
	"fmt"

	"github.com/nsbox/nsbox/pkg/policy/backend"
	"github.com/nsbox/nsbox/pkg/sandbox"
)

// startForTools starts the session that serves tools (nsbox mcp, nsbox
// tools call) under the backend mode: landlock when named, native when
// named or required, and for auto native first, then landlock when native
// cannot start here (backend.Unavailable says why).
func startForTools(ctx context.Context, mode string, p sandbox.Policy, opts []sandbox.Option) (*sandbox.Session, error) {
	if mode == "landlock" {
		return sandbox.Start(ctx, p, append(opts[:len(opts):len(opts)], sandbox.WithLandlock())...)
	}
	s, err := sandbox.Start(ctx, p, append(opts[:len(opts):len(opts)], sandbox.WithProcFallback())...)
	if err == nil || (mode != "auto" && mode != "") {
		return s, err
	}
	reason := backend.Unavailable(backend.Native{}, err)
	if reason == nil || (backend.Landlock{}).Available() != nil {
		return s, err
	}
	fmt.Fprintf(msgs, "nsbox: note: backend native: %s; serving tools under backend landlock, which isolates less (see `nsbox status`)\n", unavailableError(reason))
	return sandbox.Start(ctx, p, append(opts[:len(opts):len(opts)], sandbox.WithLandlock())...)
}
