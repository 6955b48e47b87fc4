package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nsbox/nsbox/pkg/ipc"
)

// genericRegistrationSchema is register_tool's input schema when the
// embedder gives none.
var genericRegistrationSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "name": {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,64}$", "description": "the new tool's name"},
    "description": {"type": "string", "description": "what the tool does, for the model"},
    "parameters": {"type": "object", "description": "JSON schema of the tool's arguments (type object)"}
  },
  "required": ["name", "description"],
  "additionalProperties": true
}`)

var unregisterSchema = json.RawMessage(`{
  "type": "object",
  "properties": {"name": {"type": "string", "description": "the tool to remove"}},
  "required": ["name"],
  "additionalProperties": false
}`)

const registerDescription = `Define a new tool in this sandbox session. The tool's implementation runs inside the sandbox with the same confinement as run_script (no access outside the workspace, no network unless the policy allows it). Once registered it is listed by tools/list and can be called like any other tool until the session ends. Built-in tools cannot be replaced.`

func (s *Server) addRegistrationTools() {
	schema := s.cfg.RegistrationSchema
	if len(schema) == 0 {
		schema = genericRegistrationSchema
	}
	// Registering replaces a run-time tool of the same name; both change
	// only the session's tool set, and repeating them changes nothing more.
	f := false
	t := true
	if err := s.addTool(&mcp.Tool{
		Name:         RegisterToolName,
		Title:        "Register tool",
		Annotations:  &mcp.ToolAnnotations{Title: "Register tool", DestructiveHint: &t, IdempotentHint: true, OpenWorldHint: &f},
		Description:  registerDescription,
		InputSchema:  schema,
		OutputSchema: resultSchema,
	}, s.registerHandler); err != nil {
		s.log.Error("cannot serve register_tool", "error", err)
	}
	s.setSchema(RegisterToolName, schema)
	s.setSchema(UnregisterToolName, unregisterSchema)
	if err := s.addTool(&mcp.Tool{
		Name:         UnregisterToolName,
		Title:        "Unregister tool",
		Annotations:  &mcp.ToolAnnotations{Title: "Unregister tool", DestructiveHint: &t, IdempotentHint: true, OpenWorldHint: &f},
		Description:  "Remove a tool that was defined in this session with register_tool.",
		InputSchema:  unregisterSchema,
		OutputSchema: resultSchema,
	}, s.unregisterHandler); err != nil {
		s.log.Error("cannot serve unregister_tool", "error", err)
	}
}

func (s *Server) registerHandler(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	args, err := s.checkArgs(req.Params.Arguments)
	if err != nil {
		return nil, err
	}
	if res, err := s.validate(req, RegisterToolName, args); res != nil || err != nil {
		return res, err
	}
	ctx, done := s.callContext(ctx)
	defer done()
	var d struct {
		Name string `json:"name"`
	}
	json.Unmarshal(args, &d)
	begin := time.Now()
	sess, err := s.session(ctx)
	if err == nil {
		err = s.inTurn(ctx, func() error { return sess.RegisterTool(ctx, args) })
	}
	if err == nil {
		// Listed and callable before this call returns; the toolsChanged
		// event that follows finds nothing left to do.
		err = s.syncTools(ctx)
	}
	s.audit(RegisterToolName, args, err, time.Since(begin))
	if err != nil {
		return changeError("cannot register the tool", cause(ctx, err)), nil
	}
	return okResult(fmt.Sprintf("tool %q is registered: it is listed and can be called now", d.Name)), nil
}

func (s *Server) unregisterHandler(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	args, err := s.checkArgs(req.Params.Arguments)
	if err != nil {
		return nil, err
	}
	if res, err := s.validate(req, UnregisterToolName, args); res != nil || err != nil {
		return res, err
	}
	ctx, done := s.callContext(ctx)
	defer done()
	var d struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(args, &d); err != nil || d.Name == "" {
		return changeError("cannot remove the tool", errors.New(`"name" must be a tool name`)), nil
	}
	begin := time.Now()
	sess, err := s.session(ctx)
	if err == nil {
		err = s.inTurn(ctx, func() error { return sess.UnregisterTool(ctx, d.Name) })
	}
	if err == nil {
		err = s.syncTools(ctx)
	}
	s.audit(UnregisterToolName, args, err, time.Since(begin))
	if err != nil {
		return changeError("cannot remove the tool", cause(ctx, err)), nil
	}
	return okResult(fmt.Sprintf("tool %q is removed", d.Name)), nil
}

// inTurn runs fn, a request to the session, in a turn (see Server.turn).
func (s *Server) inTurn(ctx context.Context, fn func() error) error {
	release, err := s.turn(ctx)
	if err != nil {
		return err
	}
	defer release()
	return fn()
}

// changeError reports a registration the worker refused (its message says
// why) or a session that could not serve it.
func changeError(what string, err error) *mcp.CallToolResult {
	var re *ipc.RemoteError
	if errors.As(err, &re) {
		msg := what + ": " + re.Message
		sc, _ := json.Marshal(map[string]any{"success": false, "output": "", "error": msg})
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: msg}}, StructuredContent: json.RawMessage(sc), IsError: true}
	}
	return errorResult(err)
}

func okResult(text string) *mcp.CallToolResult {
	sc, _ := json.Marshal(map[string]any{"success": true, "output": text, "error": nil})
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: json.RawMessage(sc)}
}

// audit writes one line for a call of the server's own tools, in the
// session's audit format (kind "tool"), with auditArgs's redaction and
// bounds.
func (s *Server) audit(tool string, args json.RawMessage, err error, d time.Duration) {
	if s.cfg.Audit == nil {
		return
	}
	var a any
	if json.Unmarshal(args, &a) != nil {
		a = "<invalid JSON>"
	}
	entry := map[string]any{
		"time":        time.Now().UTC().Format(time.RFC3339Nano),
		"session":     s.cfg.AuditID,
		"kind":        "tool",
		"tool":        tool,
		"args":        auditArgs(a), // see audit.go: what is redacted and cut
		"ok":          err == nil,
		"duration_us": d.Microseconds(),
	}
	if err != nil {
		entry["error"] = err.Error()
	}
	line, merr := json.Marshal(entry)
	if merr != nil {
		return
	}
	s.auditMu.Lock()
	defer s.auditMu.Unlock()
	s.cfg.Audit.Write(append(line, '\n'))
}
