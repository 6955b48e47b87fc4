package notepad

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/nsbox/nsbox/pkg/hostapi/internal/hostcall"
	"github.com/nsbox/nsbox/pkg/hostapi/store"
	"github.com/nsbox/nsbox/pkg/ipc"
	"github.com/nsbox/nsbox/pkg/sandbox"
	"github.com/nsbox/nsbox/pkg/tools"
)

// Arguments of the host API methods, as a sandbox sends them.
type (
	idArgs struct {
		ID string `json:"id"`
	}
	writeArgs struct {
		ID      string  `json:"id"`
		Title   *string `json:"title"`
		Content *string `json:"content"`
	}
	patchArgs struct {
		ID    string `json:"id"`
		Diff  string `json:"diff"`
		Edits []Edit `json:"edits"`
	}
)

// methods is the complete set of sandbox-reachable methods. Select and
// Clear are deliberately absent: a sandbox can neither change which tab the
// user looks at nor wipe the notepad, whatever its policy lists.
func methods(n *Notepad) []hostcall.Method {
	return []hostcall.Method{
		{Name: "list", Fn: func(ctx context.Context, raw ipc.Value) (any, error) {
			var a struct{}
			if err := hostcall.Decode(raw, &a); err != nil {
				return nil, err
			}
			tabs, sel, err := n.List(ctx)
			if err != nil {
				return nil, err
			}
			var selected any
			if sel != "" {
				selected = sel
			}
			return map[string]any{"tabs": tabs, "selected": selected}, nil
		}},
		{Name: "metadata", Fn: func(ctx context.Context, raw ipc.Value) (any, error) {
			var a idArgs
			if err := hostcall.Decode(raw, &a); err != nil {
				return nil, err
			}
			return n.Metadata(ctx, a.ID)
		}},
		{Name: "content", Fn: func(ctx context.Context, raw ipc.Value) (any, error) {
			var a idArgs
			if err := hostcall.Decode(raw, &a); err != nil {
				return nil, err
			}
			t, err := n.Get(ctx, a.ID)
			if err != nil {
				return nil, err
			}
			return map[string]any{"id": t.ID, "title": t.Title, "content": t.Content, "updated": t.Updated}, nil
		}},
		{Name: "write", Fn: func(ctx context.Context, raw ipc.Value) (any, error) {
			var a writeArgs
			if err := hostcall.Decode(raw, &a); err != nil {
				return nil, err
			}
			if a.Content == nil {
				return nil, missing("content")
			}
			m, created, err := n.Write(ctx, a.ID, a.Title, *a.Content)
			if err != nil {
				return nil, err
			}
			return map[string]any{"tab": m, "created": created}, nil
		}},
		{Name: "patch", Fn: func(ctx context.Context, raw ipc.Value) (any, error) {
			var a patchArgs
			if err := hostcall.Decode(raw, &a); err != nil {
				return nil, err
			}
			return n.Patch(ctx, a.ID, a.Diff, a.Edits)
		}},
		{Name: "close", Fn: func(ctx context.Context, raw ipc.Value) (any, error) {
			var a idArgs
			if err := hostcall.Decode(raw, &a); err != nil {
				return nil, err
			}
			if a.ID == "" {
				return nil, missing("id")
			}
			if err := n.Close(ctx, a.ID); err != nil {
				return nil, err
			}
			return map[string]any{"closed": a.ID}, nil
		}},
	}
}

// Methods lists the sandbox-reachable methods as "notepad.METHOD", for a
// policy's HostAPIs allowlist.
func Methods() []string { return hostcall.Names(API, methods(nil)) }

// Register serves the notepad API from n on h: only the methods of
// Methods(), never the host-only Select and Clear.
func Register(h *sandbox.Handlers, n *Notepad) error {
	return hostcall.Register(h, API, methods(n))
}

const idSchema = `{"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$", "description": "Tab id, e.g. \"tab-1\"."}`

// Tools returns the notepad tools. They run inside the sandbox and reach the
// notepad only through hostCall, so the session's policy must allow the
// methods of Methods().
func Tools() []tools.Tool {
	def := func(method, name, desc, params string) tools.Tool {
		return &hostcall.Tool{API: API, Method: method, Def: tools.Definition{Name: name, Description: desc, Parameters: json.RawMessage(params)}}
	}
	return []tools.Tool{
		def("content", "document_read",
			"Read a document of the notepad: the selected tab, or the tab with the given id.",
			`{"type": "object", "properties": {"id": `+idSchema+`}, "additionalProperties": false}`),
		def("write", "document_overwrite",
			"Replace the whole content of a document (the selected tab, or the tab with the given id), creating it when it does not exist. At most 2 MiB.",
			`{"type": "object", "properties": {
  "id": `+idSchema+`,
  "title": {"type": "string", "maxLength": 256, "description": "New title (optional)."},
  "content": {"type": "string", "description": "The complete new content."}
}, "required": ["content"], "additionalProperties": false}`),
		def("patch", "document_patch",
			"Change part of a document (the selected tab, or the tab with the given id) with a unified diff, or with a list of search/replace edits. All or nothing: on failure the error names the hunk or edit that does not apply.",
			`{"type": "object", "properties": {
  "id": `+idSchema+`,
  "diff": {"type": "string", "description": "A unified diff with @@ -a,b +c,d @@ hunks."},
  "edits": {"type": "array", "minItems": 1, "maxItems": `+strconv.Itoa(MaxEdits)+`, "items": {"type": "object", "properties": {
    "search": {"type": "string", "minLength": 1, "description": "Exact text to find; must occur once unless all is true."},
    "replace": {"type": "string", "description": "Replacement text."},
    "all": {"type": "boolean", "description": "Replace every occurrence."}
  }, "required": ["search", "replace"], "additionalProperties": false}}
}, "additionalProperties": false}`),
		def("list", "notepad_list_tabs",
			"List the notepad's tabs (id, title, size, timestamps) and which one is selected.",
			`{"type": "object", "properties": {}, "additionalProperties": false}`),
		def("metadata", "notepad_get_metadata",
			"Get a tab's metadata (title, size in bytes, lines, timestamps) without its content.",
			`{"type": "object", "properties": {"id": `+idSchema+`}, "required": ["id"], "additionalProperties": false}`),
		def("content", "notepad_get_content",
			"Get the content of the tab with the given id.",
			`{"type": "object", "properties": {"id": `+idSchema+`}, "required": ["id"], "additionalProperties": false}`),
		def("close", "notepad_close_tab",
			"Close (delete) the tab with the given id.",
			`{"type": "object", "properties": {"id": `+idSchema+`}, "required": ["id"], "additionalProperties": false}`),
	}
}

func missing(field string) error {
	return &store.ArgError{Field: field, Msg: "is required"}
}
