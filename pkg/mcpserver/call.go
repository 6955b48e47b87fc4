package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nsbox/nsbox/pkg/sandbox"
	"github.com/nsbox/nsbox/pkg/tools"
)

// resultSchema is the output schema of every tool: the structured content
// is the tool's result object.
var resultSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "success": {"type": "boolean", "description": "whether the tool did what was asked"},
    "output": {"description": "the tool's output (text or JSON)"},
    "error": {"type": ["string", "null"], "description": "why it failed, for users and models"},
    "reason": {"type": "string", "description": "why the call failed, when nsbox can tell: invalid_arguments, violation, timeout, resource_limit, canceled, unavailable, session_ended"}
  },
  "required": ["success"]
}`)

// toMCPTool maps a session definition {name, description, parameters} to an
// MCP tool {name, title, description, inputSchema, annotations}.
func toMCPTool(d Definition) (*mcp.Tool, error) {
	schema, err := inputSchema(d.Parameters)
	if err != nil {
		return nil, err
	}
	t := &mcp.Tool{
		Name:         d.Name,
		Title:        d.Title,
		Description:  d.Description,
		InputSchema:  schema,
		OutputSchema: resultSchema,
	}
	if a := d.Annotations; a != nil {
		destructive, openWorld := a.DestructiveHint, a.OpenWorldHint
		t.Annotations = &mcp.ToolAnnotations{
			Title:           d.Title,
			ReadOnlyHint:    a.ReadOnlyHint,
			DestructiveHint: &destructive,
			IdempotentHint:  a.IdempotentHint,
			OpenWorldHint:   &openWorld,
		}
	}
	return t, nil
}

// inputSchema returns the parameters as an MCP input schema, which must be
// a JSON object schema of type "object" (an empty one means any object).
func inputSchema(params json.RawMessage) (json.RawMessage, error) {
	p := bytes.TrimSpace(params)
	if len(p) == 0 || string(p) == "null" {
		return json.RawMessage(`{"type":"object","properties":{}}`), nil
	}
	var m map[string]any
	if err := json.Unmarshal(p, &m); err != nil {
		return nil, errors.New("parameters: not a JSON schema object")
	}
	switch t := m["type"]; t {
	case "object":
		return json.RawMessage(p), nil
	case nil:
		m["type"] = "object"
		return json.Marshal(m)
	default:
		return nil, fmt.Errorf("parameters: type is %v, MCP needs \"object\"", t)
	}
}

// checkArgs returns the arguments of a call as a JSON object, or the
// JSON-RPC error for arguments that are no object or are too large.
func (s *Server) checkArgs(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) > s.cfg.MaxArgs {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
			Message: fmt.Sprintf("arguments too large: %s (the limit is %s)", humanBytes(int64(len(raw))), humanBytes(int64(s.cfg.MaxArgs)))}
	}
	a := bytes.TrimSpace(raw)
	if len(a) == 0 || string(a) == "null" {
		return json.RawMessage("{}"), nil
	}
	if a[0] != '{' {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: `"arguments" must be a JSON object`}
	}
	return a, nil
}

// validationVersion is the first protocol version in which arguments that
// fail the input schema are a tool execution error (isError, which the
// model sees and can correct) rather than a JSON-RPC error (SEP-1303).
const validationVersion = "2025-11-25"

// protocolVersion is the version a request speaks: its own (per-request
// protocol), else the session's negotiated one.
func protocolVersion(req *mcp.CallToolRequest) string {
	if v, ok := req.Params.Meta[mcp.MetaKeyProtocolVersion].(string); ok && v != "" {
		return v
	}
	if req.Session != nil {
		if ip := req.Session.InitializeParams(); ip != nil {
			return ip.ProtocolVersion
		}
	}
	return ""
}

// validate checks the arguments against the tool's input schema, with the
// validator the worker uses, before anything is sent to the sandbox (or a
// sandbox is started for a call that cannot run). A failure is answered as
// the negotiated protocol version says.
func (s *Server) validate(req *mcp.CallToolRequest, name string, args json.RawMessage) (*mcp.CallToolResult, error) {
	v, ok := s.schemas.Load(name)
	if !ok {
		return nil, nil
	}
	decoded, err := tools.DecodeArgs(args)
	if err == nil {
		err = v.(*tools.Schema).Validate(decoded)
	}
	if err == nil {
		return nil, nil
	}
	msg := fmt.Sprintf("invalid arguments for %s: %v", name, err)
	if protocolVersion(req) >= validationVersion {
		sc, _ := json.Marshal(map[string]any{"success": false, "output": "", "error": msg, "reason": ReasonInvalidArguments})
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: msg}}, StructuredContent: json.RawMessage(sc), IsError: true}, nil
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msg}
}

// setSchema compiles the input schema of a served tool for validate. A
// schema that does not compile is left to the worker, which refuses the
// tool's calls with its own message.
func (s *Server) setSchema(name string, params json.RawMessage) {
	sch, err := tools.CompileSchema(name, params)
	if err != nil {
		s.schemas.Delete(name)
		return
	}
	s.schemas.Store(name, sch)
}

// sessionToolHandler runs one of the session's tools.
func (s *Server) sessionToolHandler(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args, err := s.checkArgs(req.Params.Arguments)
		if err != nil {
			return nil, err
		}
		if res, err := s.validate(req, name, args); res != nil || err != nil {
			return res, err
		}
		ctx, done := s.callContext(ctx)
		defer done()
		sess, err := s.session(ctx)
		if err != nil {
			return errorResult(cause(ctx, err)), nil
		}
		stop := s.progress(ctx, req, name)
		// Queued behind the session's in-flight bound; the wait is the
		// call's (cancellable, and reported as progress).
		release, err := s.turn(ctx)
		if err != nil {
			stop()
			return errorResult(cause(ctx, err)), nil
		}
		raw, err := sess.CallTool(ctx, name, args, s.cfg.Timeout)
		release()
		stop()
		if err != nil {
			err = cause(ctx, err)
			if errors.Is(err, sandbox.ErrClosed) && s.life.Err() == nil {
				s.dropSession(sess)
			}
			return errorResult(err), nil
		}
		return toolResult(raw), nil
	}
}

// progress sends notifications/progress while a call runs, when the client
// gave the call a progress token. stop returns once no more are sent.
func (s *Server) progress(ctx context.Context, req *mcp.CallToolRequest, name string) (stop func()) {
	token := req.Params.GetProgressToken()
	if token == nil || req.Session == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		start := time.Now()
		t := time.NewTicker(s.cfg.ProgressInterval)
		defer t.Stop()
		last := 0.0
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				el := time.Since(start)
				// Seconds elapsed: it grows with every notification, as
				// the specification requires; the total is unknown.
				p := math.Max(math.Round(el.Seconds()*1000)/1000, last+0.001)
				last = p
				req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
					ProgressToken: token,
					Progress:      p,
					Message:       fmt.Sprintf("%s running for %s", name, el.Round(time.Second)),
				})
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

// callResult is the result object of every tool.
type callResult struct {
	Success bool            `json:"success"`
	Output  json.RawMessage `json:"output"`
	Error   *string         `json:"error"`
}

// toolResult maps a tool's result object to MCP: the object itself as
// structured content, a readable text (the output, or the error followed by
// any output) as content, and isError when it did not succeed.
func toolResult(raw json.RawMessage) *mcp.CallToolResult {
	var r callResult
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &r) != nil {
		return errorResult(fmt.Errorf("the tool returned a malformed result"))
	}
	text := renderOutput(r.Output)
	if !r.Success {
		msg := "the tool failed"
		if r.Error != nil && *r.Error != "" {
			msg = *r.Error
		}
		if text != "" {
			text = msg + "\n\n" + text
		} else {
			text = msg
		}
	} else if text == "" {
		text = "(no output)"
	}
	if !r.Success {
		raw = withReason(raw, r.Output)
	}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: text}},
		StructuredContent: raw,
		IsError:           !r.Success,
	}
}

// withReason types a failure the result shows to be a timeout (a command's
// output says timed_out, docs/tools.md) when the tool gave no reason itself.
func withReason(raw, output json.RawMessage) json.RawMessage {
	var o struct {
		TimedOut bool `json:"timed_out"`
	}
	if len(output) == 0 || output[0] != '{' || json.Unmarshal(output, &o) != nil || !o.TimedOut {
		return raw
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return raw
	}
	if _, ok := m["reason"]; ok {
		return raw
	}
	m["reason"] = json.RawMessage(`"` + ReasonTimeout + `"`)
	b, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return b
}

// renderOutput shows an output to a reader: text as it is, anything else
// as indented JSON.
func renderOutput(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var str string
	if json.Unmarshal(raw, &str) == nil {
		return str
	}
	var buf bytes.Buffer
	if json.Indent(&buf, raw, "", "  ") != nil {
		return string(raw)
	}
	return buf.String()
}

// Reasons, in the structured content of a failed call, that nsbox can tell.
const (
	ReasonViolation        = "violation"
	ReasonInvalidArguments = "invalid_arguments"
	ReasonTimeout          = "timeout"
	ReasonResourceLimit    = "resource_limit"
	ReasonCanceled         = "canceled"
	ReasonUnavailable      = "unavailable"
	ReasonSessionEnded     = "session_ended"
	ReasonServerClosing    = "server_closing"
	ReasonError            = "error"
)

// Classify returns the reason and a message for users of an error of
// Session.CallTool or of starting the session.
func Classify(err error) (reason, msg string) {
	var (
		ve *sandbox.ViolationError
		rl *sandbox.ResourceLimitError
		se *StartError
		ps *sandbox.PoolStartError
	)
	switch {
	case errors.As(err, &ve):
		return ReasonViolation, ve.Error()
	case errors.As(err, &rl):
		if rl.Resource == "time" {
			return ReasonTimeout, "timeout: " + rl.Error()
		}
		return ReasonResourceLimit, "resource limit: " + rl.Error()
	case errors.Is(err, context.DeadlineExceeded):
		return ReasonTimeout, "timeout: the call took too long and was stopped"
	case errors.Is(err, context.Canceled):
		return ReasonCanceled, "the call was canceled"
	case errors.As(err, &se):
		return ReasonUnavailable, se.Error()
	case errors.As(err, &ps):
		// Per-call isolation: no fresh sandbox could be had for this call.
		return ReasonUnavailable, ps.Error()
	case errors.Is(err, sandbox.ErrClosed):
		return ReasonSessionEnded, "the sandbox session ended unexpectedly; the next call starts a new one " +
			"(files in the workspace are kept; /tmp and tools registered at run time are not)"
	case errors.Is(err, ErrClosed):
		return ReasonServerClosing, err.Error()
	}
	return ReasonError, "the sandbox could not run the tool: " + err.Error()
}

// errorResult is a failed call the tool itself did not answer.
func errorResult(err error) *mcp.CallToolResult {
	reason, msg := Classify(err)
	sc, _ := json.Marshal(map[string]any{"success": false, "output": "", "error": msg, "reason": reason})
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: msg}},
		StructuredContent: json.RawMessage(sc),
		IsError:           true,
	}
}
