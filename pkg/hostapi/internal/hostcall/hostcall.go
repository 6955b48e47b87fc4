// Package hostcall is the glue shared by the host APIs: strict decoding of
// hostile arguments, bounded plain-data results, registration, and tools
// whose only effect is a hostCall.
package hostcall

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/nsbox/nsbox/pkg/hostapi/store"
	"github.com/nsbox/nsbox/pkg/ipc"
	"github.com/nsbox/nsbox/pkg/sandbox"
	"github.com/nsbox/nsbox/pkg/tools"
)

// MaxResultBytes bounds the JSON text of one result. A program inside
// reaches the host through a socket that carries at most 4 MiB per message
// (pkg/sandbox bounds it), and a reply that does not fit would never
// arrive: the caller gets this clear error instead.
const MaxResultBytes = 3 << 20

// Method is one host API method. Fn gets the call's arguments (plain data,
// hostile) and returns a result made of JSON data only.
type Method struct {
	Name string
	Fn   func(ctx context.Context, args ipc.Value) (any, error)
}

// Register adds methods to h under api. Only the methods listed are
// reachable from a sandbox; host-only operations are never in the list.
func Register(h *sandbox.Handlers, api string, methods []Method) error {
	if h == nil {
		return errors.New("hostapi: nil handlers")
	}
	for _, m := range methods {
		fn := m.Fn
		err := h.Handle(api, m.Name, func(ctx context.Context, call sandbox.HostCall) (ipc.Value, error) {
			out, err := fn(ctx, call.Args)
			if err != nil {
				return nil, err
			}
			return Result(out)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// Names lists methods as "api.method".
func Names(api string, methods []Method) []string {
	out := make([]string, len(methods))
	for i, m := range methods {
		out[i] = api + "." + m.Name
	}
	return out
}

// Result converts v to plain data, bounded by MaxResultBytes. What crosses
// is v's JSON form, never v: ipc.Value cannot hold a host object.
func Result(v any) (ipc.Value, error) {
	val, err := ipc.ToValue(v)
	if err != nil {
		return nil, err
	}
	data, err := ipc.MarshalValue(val)
	if err != nil {
		return nil, err
	}
	if len(data) > MaxResultBytes {
		return nil, &store.TooLargeError{What: "the result", Size: len(data), Limit: MaxResultBytes}
	}
	return val, nil
}

// Fit returns the longest prefix of items whose JSON texts, together with
// room bytes for the rest of a result, stay within MaxResultBytes, and
// whether it had to cut. A list of records that are each within their own
// bound can still exceed the result's (1,000 memories of 16 KiB): the
// caller gets the ones that fit and says so, rather than an error that a
// smaller limit would have avoided.
func Fit[T any](items []T, room int) ([]T, bool, error) {
	left := MaxResultBytes - room
	for i, it := range items {
		val, err := ipc.ToValue(it)
		if err != nil {
			return nil, false, err
		}
		data, err := ipc.MarshalValue(val)
		if err != nil {
			return nil, false, err
		}
		left -= len(data) + 1 // and the comma between two
		if left < 0 {
			return items[:i], true, nil
		}
	}
	return items, false, nil
}

// Decode fills out from args, strictly: args must be a JSON object (or
// null, read as {}), and an unknown or mistyped field is an *ArgError that
// names it.
func Decode(args ipc.Value, out any) error {
	var data []byte
	switch args.(type) {
	case nil, ipc.Null:
		data = []byte("{}")
	case ipc.Map:
		var err error
		if data, err = ipc.MarshalValue(args); err != nil {
			return &store.ArgError{Msg: err.Error()}
		}
	default:
		return &store.ArgError{Msg: "arguments must be a JSON object"}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return &store.ArgError{Field: te.Field, Msg: fmt.Sprintf("want %s, got %s", jsonType(te.Type.String()), te.Value)}
		}
		if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return &store.ArgError{Field: strings.Trim(name, `"`), Msg: "unknown argument"}
		}
		return &store.ArgError{Msg: err.Error()}
	}
	return nil
}

func jsonType(goType string) string {
	switch {
	case goType == "string" || goType == "*string":
		return "a string"
	case goType == "bool" || goType == "*bool":
		return "a boolean"
	case strings.Contains(goType, "int"):
		return "an integer"
	case strings.Contains(goType, "float"):
		return "a number"
	case strings.HasPrefix(goType, "[]") || strings.HasPrefix(goType, "*[]"):
		return "an array"
	}
	return "an object"
}

// Tool is a tool whose whole effect is one hostCall: it runs inside the
// sandbox worker and never touches the store, which lives on the host.
type Tool struct {
	Def    tools.Definition
	API    string
	Method string
}

// Definition implements tools.Tool.
func (t *Tool) Definition() tools.Definition { return t.Def }

// Run implements tools.Tool: it forwards args (already validated against
// the schema) to the host API and returns its result as the output.
func (t *Tool) Run(ctx context.Context, env sandbox.ToolEnv, args json.RawMessage) tools.Result {
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	raw, err := env.HostCall(ctx, t.API, t.Method, args)
	if err != nil {
		return tools.Fail(err.Error())
	}
	var out any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			return tools.Fail(fmt.Sprintf("%s.%s: malformed reply from the host: %v", t.API, t.Method, err))
		}
	}
	return tools.OK(out)
}
