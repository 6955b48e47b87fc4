package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"time"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

// Builtin returns nsbox's built-in tools: the five workspace tools,
// run_script and edit_file.
func Builtin() []Tool {
	return []Tool{
		readFileTool{},
		writeFileTool{},
		listDirectoryTool{},
		runCommandTool{},
		searchFilesTool{},
		runScriptTool{},
		editFileTool{},
	}
}

// settings returns the policy's tool bounds (zero values: the defaults).
func settings(env sandbox.ToolEnv) sandbox.ToolSettings {
	if env == nil {
		return sandbox.ToolSettings{}
	}
	return env.Settings()
}

func maxOutput(env sandbox.ToolEnv) int64 {
	if m := settings(env).MaxOutput; m > 0 {
		return m
	}
	return DefaultMaxOutput
}

func maxResults(env sandbox.ToolEnv) int {
	if m := settings(env).MaxResults; m > 0 {
		return m
	}
	return DefaultMaxResults
}

func defaultTimeout(env sandbox.ToolEnv) time.Duration {
	if t := settings(env).Timeout; t > 0 {
		return t
	}
	return DefaultTimeout
}

// openWorkspace opens the session's workspace as the confinement root.
func openWorkspace(env sandbox.ToolEnv) (*Root, error) {
	if env == nil || env.Workspace() == "" {
		return nil, errors.New("this session has no workspace")
	}
	root, err := OpenRoot(env.Workspace())
	if err != nil {
		return nil, err
	}
	root.SetProtected(env.Settings().ProtectedPatterns)
	return root, nil
}

// decode reads validated arguments into v.
//
// The arguments passed the schema already; what can still fail is a value
// the schema allows but the Go field cannot hold (an integer over 64 bits):
// said in the argument's terms, never with Go's type names, and without
// quoting the value whole.
func decode(args json.RawMessage, v any) error {
	err := json.Unmarshal(args, v)
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		got := clipString(strings.TrimPrefix(te.Value, "number "), maxQuoted)
		switch te.Type.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			return &ArgumentError{Field: te.Field, Msg: fmt.Sprintf("must be an integer from %d to %d, got %s", math.MinInt64, math.MaxInt64, got)}
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			return &ArgumentError{Field: te.Field, Msg: fmt.Sprintf("must be an integer from 0 to %d, got %s", uint64(math.MaxUint64), got)}
		}
		return &ArgumentError{Field: te.Field, Msg: "has the wrong type (" + got + ")"}
	}
	return &ArgumentError{Msg: clipMessage(err.Error())}
}

// failErr is Fail with an error's message.
func failErr(err error) Result { return Fail(err.Error()) }

// seconds converts a timeout argument in seconds.
func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// callTimeout is the time a process may run: the tool's own bound, never
// past the call's deadline.
func callTimeout(ctx context.Context, want time.Duration) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl); left < want {
			want = left
		}
	}
	if want < time.Millisecond {
		want = time.Millisecond
	}
	return want
}
