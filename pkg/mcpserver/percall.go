package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

// ToolRunner is what runs a tool: a session (every call in the same
// sandbox) or a pool (every call in a fresh one). *sandbox.Session and
// *sandbox.Pool implement it.
type ToolRunner interface {
	CallTool(ctx context.Context, name string, args json.RawMessage, timeout time.Duration) (json.RawMessage, error)
	Close() error
}

var (
	_ ToolRunner = (*sandbox.Session)(nil)
	_ ToolRunner = (*sandbox.Pool)(nil)
)

// ErrPerCallRegistration refuses register_tool and unregister_tool when
// every call runs in a fresh sandbox: a tool defined in one call's sandbox
// would be gone by the next.
var ErrPerCallRegistration = errors.New("tools cannot be defined at run time when every call runs in a fresh sandbox (isolation per-call); use isolation session")

// PerCall serves the tools of defs through r, which runs each call in a
// fresh sandbox (a *sandbox.Pool): the Session a Config.Start returns for
// per-call isolation. Its tool set is defs, fixed: no sandbox outlives a
// call to hold tools defined at run time, so RegisterTool and
// UnregisterTool fail with ErrPerCallRegistration. Closing it closes r.
func PerCall(r ToolRunner, defs json.RawMessage) Session {
	return &perCall{r: r, defs: defs}
}

type perCall struct {
	r    ToolRunner
	defs json.RawMessage
}

func (p *perCall) CallTool(ctx context.Context, name string, args json.RawMessage, timeout time.Duration) (json.RawMessage, error) {
	raw, err := p.r.CallTool(ctx, name, args, timeout)
	if errors.Is(err, sandbox.ErrClosed) {
		// The call's own sandbox ended under it (its PID 1 killed, a
		// limit): the next call gets another one from the pool, so this
		// must not read as the end of the server's session, which would
		// close the pool. The cause stays in the message.
		return nil, fmt.Errorf("the call's sandbox ended before the tool answered (%v); the next call runs in a fresh one", err)
	}
	return raw, err
}

func (p *perCall) ToolDefinitions(context.Context) (json.RawMessage, error) {
	if len(p.defs) == 0 {
		return json.RawMessage("[]"), nil
	}
	return p.defs, nil
}

// OnToolsChanged: the tool set never changes.
func (p *perCall) OnToolsChanged(func(sandbox.ToolsChanged)) func() { return func() {} }

func (p *perCall) RegisterTool(context.Context, json.RawMessage) error {
	return ErrPerCallRegistration
}

func (p *perCall) UnregisterTool(context.Context, string) error {
	return ErrPerCallRegistration
}

func (p *perCall) Close() error { return p.r.Close() }
