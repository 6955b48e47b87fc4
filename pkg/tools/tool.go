// Package tools holds nsbox's tool registry: definitions in the
// function-calling format, argument validation against JSON schemas, and
// implementations that run inside the sandbox worker (never in the host
// process).
package tools

import (
	"context"
	"encoding/json"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

// Definition describes a tool: its name, what it does, and the JSON schema
// of its arguments.
type Definition struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	// Title is a short name for people (MCP's title); Annotations tell a
	// client what calling the tool does (annotations.go). Both optional.
	Title       string       `json:"title,omitempty"`
	Annotations *Annotations `json:"annotations,omitempty"`
}

// Result is every tool's answer.
type Result struct {
	Success bool    `json:"success"`
	Output  any     `json:"output"`
	Error   *string `json:"error"`
	// Reason types a failure nsbox can tell: ReasonTimeout, ReasonOOM,
	// ReasonPids, ReasonViolation or ReasonCanceled; absent otherwise
	// (a tool's own failure, such as a command's non-zero exit).
	Reason string `json:"reason,omitempty"`
}

// Reasons of a failed call, the same in nsbox tools call, MCP and the Go
// API (sandbox.Session.CallTool): the sandbox's own names.
const (
	ReasonTimeout   = string(sandbox.ReasonTimeout)
	ReasonOOM       = string(sandbox.ReasonOOM)
	ReasonPids      = string(sandbox.ReasonPids)
	ReasonViolation = string(sandbox.ReasonViolation)
	ReasonCanceled  = string(sandbox.ReasonCanceled)
)

// OK returns a successful result.
func OK(output any) Result { return Result{Success: true, Output: output} }

// Fail returns a failed result with a message for users (and models).
func Fail(msg string) Result { return Result{Success: false, Output: "", Error: &msg} }

// Tool is one tool. Run executes inside the sandbox worker; args have been
// validated against Definition().Parameters before Run is called.
type Tool interface {
	Definition() Definition
	Run(ctx context.Context, env sandbox.ToolEnv, args json.RawMessage) Result
}
