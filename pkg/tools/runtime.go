package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/nsbox/nsbox/pkg/sandbox"
	"github.com/nsbox/nsbox/pkg/script"
)

// RuntimeDefinition is a tool registered at run time (Session.RegisterTool,
// or from inside a sandbox whose policy allows it): a definition plus an
// implementation that runs inside the sandbox. The implementation reads the
// arguments (JSON) on stdin; what it prints on stdout is the output (parsed
// as JSON when it is JSON); a non-zero exit is a failure whose error is its
// stderr.
type RuntimeDefinition struct {
	Name           string          `json:"name"`
	Description    string          `json:"description"`
	Parameters     json.RawMessage `json:"parameters,omitempty"`
	Implementation *Implementation `json:"implementation"`
	// Timeout in seconds (default: the call's timeout).
	Timeout float64 `json:"timeout,omitempty"`
}

// Implementation is an inline script or an argv.
type Implementation struct {
	Language string   `json:"language,omitempty"`
	Script   string   `json:"script,omitempty"`
	Argv     []string `json:"argv,omitempty"`
}

// Bounds of run-time definitions.
const (
	maxDescription = 8 << 10
	maxImplScript  = 1 << 20
	maxImplArgv    = 256
	maxDefinition  = 2 << 20
)

// runtimeTool is a registered RuntimeDefinition.
type runtimeTool struct {
	def  Definition
	impl Implementation
	lang script.Language
	secs float64
}

// ParseRuntimeTool validates a run-time definition: the name
// (^[a-zA-Z0-9_-]{1,64}$), the implementation, the bounds. The schema is
// compiled by Registry.Register.
func ParseRuntimeTool(raw json.RawMessage) (Tool, error) {
	if len(raw) > maxDefinition {
		return nil, fmt.Errorf("tool definition is %d bytes, more than %d", len(raw), maxDefinition)
	}
	var d RuntimeDefinition
	dec := json.NewDecoder(bytes.NewReader(raw))
	// Unknown fields are an error: a misspelled "implementation" must not
	// register a tool that does nothing.
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("tool definition: %v", err)
	}
	if !validName(d.Name) {
		return nil, fmt.Errorf("tool definition: invalid name %q (want 1 to 64 of a-z A-Z 0-9 _ -)", d.Name)
	}
	if len(d.Description) > maxDescription || !utf8.ValidString(d.Description) {
		return nil, fmt.Errorf("tool %q: description must be UTF-8 text of at most %d bytes", d.Name, maxDescription)
	}
	if d.Timeout < 0 {
		return nil, fmt.Errorf("tool %q: timeout must not be negative", d.Name)
	}
	t := &runtimeTool{def: Definition{Name: d.Name, Description: d.Description, Parameters: d.Parameters}, secs: d.Timeout}
	if len(bytes.TrimSpace(t.def.Parameters)) == 0 || string(bytes.TrimSpace(t.def.Parameters)) == "null" {
		t.def.Parameters = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	im := d.Implementation
	switch {
	case im == nil:
		return nil, fmt.Errorf("tool %q: missing implementation (an inline script {\"language\",\"script\"} or {\"argv\"})", d.Name)
	case len(im.Argv) > 0 && (im.Script != "" || im.Language != ""):
		return nil, fmt.Errorf("tool %q: implementation has both a script and an argv", d.Name)
	case len(im.Argv) > 0:
		if len(im.Argv) > maxImplArgv {
			return nil, fmt.Errorf("tool %q: implementation argv has more than %d words", d.Name, maxImplArgv)
		}
		for _, w := range im.Argv {
			if strings.ContainsRune(w, 0) {
				return nil, fmt.Errorf("tool %q: implementation argv contains a NUL byte", d.Name)
			}
		}
		if im.Argv[0] == "" {
			return nil, fmt.Errorf("tool %q: implementation argv[0] is empty", d.Name)
		}
	default:
		lang, err := script.LookupLanguage(im.Language)
		if err != nil {
			return nil, fmt.Errorf("tool %q: implementation: %v", d.Name, err)
		}
		if im.Script == "" || len(im.Script) > maxImplScript {
			return nil, fmt.Errorf("tool %q: implementation script must have 1 to %d bytes", d.Name, maxImplScript)
		}
		t.lang = lang
	}
	t.impl = *im
	return t, nil
}

func (t *runtimeTool) Definition() Definition { return t.def }

func (t *runtimeTool) Run(ctx context.Context, env sandbox.ToolEnv, args json.RawMessage) Result {
	timeout := defaultTimeout(env)
	if t.secs > 0 {
		timeout = seconds(t.secs)
	}
	timeout = callTimeout(ctx, timeout)
	dir := ""
	if env.Workspace() != "" {
		if root, err := openWorkspace(env); err == nil {
			dir = root.real
			root.Close()
		}
	}
	var (
		rr  sandbox.RunResult
		err error
	)
	if len(t.impl.Argv) > 0 {
		rr, err = env.Run(ctx, sandbox.RunSpec{Argv: t.impl.Argv, Dir: dir, Stdin: args, Timeout: timeout, MaxOutput: int64(budget(env)) * captureFactor})
	} else {
		rr, err = runInterpreter(ctx, env, t.lang, t.impl.Script, sandbox.RunSpec{Dir: dir, Stdin: args, Timeout: timeout, MaxOutput: int64(budget(env)) * captureFactor})
	}
	if errors.Is(err, sandbox.ErrInterpreterNotFound) {
		return failErr(err)
	}
	res := processResult("tool implementation", t.impl.name(), rr, err, timeout)
	out := bytes.TrimSpace(rr.Stdout)
	var output any = string(rr.Stdout)
	if len(out) > 0 && json.Valid(out) {
		output = json.RawMessage(out)
	}
	if res.Success {
		return OK(output)
	}
	// The implementation's own words, when it said something.
	if msg := strings.TrimSpace(string(rr.Stderr)); msg != "" && !rr.TimedOut {
		msg = shorten([]byte(msg), 4096)
		res.Error = &msg
	}
	res.Output = output
	return res
}

func (im Implementation) name() string {
	if len(im.Argv) > 0 {
		return im.Argv[0]
	}
	return im.Language
}
