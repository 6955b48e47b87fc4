package memory

import (
	"context"
	"encoding/json"

	"github.com/nsbox/nsbox/pkg/hostapi/internal/hostcall"
	"github.com/nsbox/nsbox/pkg/hostapi/store"
	"github.com/nsbox/nsbox/pkg/ipc"
	"github.com/nsbox/nsbox/pkg/sandbox"
	"github.com/nsbox/nsbox/pkg/tools"
)

// Arguments of the host API methods, as a sandbox sends them.
type (
	saveArgs struct {
		Key  string   `json:"key"`
		Text string   `json:"text"`
		Tags []string `json:"tags"`
	}
	recallArgs struct {
		Key   string   `json:"key"`
		Query string   `json:"query"`
		Tags  []string `json:"tags"`
		Limit int      `json:"limit"`
	}
	deleteArgs struct {
		Key string `json:"key"`
	}
	listArgs struct {
		Tag   string `json:"tag"`
		Limit int    `json:"limit"`
	}
)

// resultRoom is what a list's result holds besides its records (the
// field names, total, truncated).
const resultRoom = 256

// methods is the complete set of sandbox-reachable methods: whatever is not
// in this table cannot be called from a sandbox, whatever its policy says.
func methods(m *Memory) []hostcall.Method {
	return []hostcall.Method{
		{Name: "save", Fn: func(ctx context.Context, raw ipc.Value) (any, error) {
			var a saveArgs
			if err := hostcall.Decode(raw, &a); err != nil {
				return nil, err
			}
			rec, created, err := m.Save(ctx, a.Key, a.Text, a.Tags)
			if err != nil {
				return nil, err
			}
			return map[string]any{"key": rec.Key, "created": created, "tags": rec.Tags, "updated": rec.Updated}, nil
		}},
		{Name: "recall", Fn: func(ctx context.Context, raw ipc.Value) (any, error) {
			var a recallArgs
			if err := hostcall.Decode(raw, &a); err != nil {
				return nil, err
			}
			if a.Key != "" {
				if a.Query != "" {
					return nil, &store.ArgError{Field: "key", Msg: "give either a key or a query, not both"}
				}
				rec, err := m.Get(ctx, a.Key)
				if err != nil {
					return nil, err
				}
				return map[string]any{"results": []Match{{Record: rec, Score: 1}}}, nil
			}
			res, err := m.Recall(ctx, a.Query, a.Tags, a.Limit)
			if err != nil {
				return nil, err
			}
			res, cut, err := hostcall.Fit(res, resultRoom)
			if err != nil {
				return nil, err
			}
			return map[string]any{"results": res, "truncated": cut}, nil
		}},
		{Name: "delete", Fn: func(ctx context.Context, raw ipc.Value) (any, error) {
			var a deleteArgs
			if err := hostcall.Decode(raw, &a); err != nil {
				return nil, err
			}
			if err := m.Delete(ctx, a.Key); err != nil {
				return nil, err
			}
			return map[string]any{"deleted": a.Key}, nil
		}},
		{Name: "list", Fn: func(ctx context.Context, raw ipc.Value) (any, error) {
			var a listArgs
			if err := hostcall.Decode(raw, &a); err != nil {
				return nil, err
			}
			recs, total, err := m.List(ctx, a.Tag, a.Limit)
			if err != nil {
				return nil, err
			}
			recs, cut, err := hostcall.Fit(recs, resultRoom)
			if err != nil {
				return nil, err
			}
			return map[string]any{"memories": recs, "total": total, "truncated": cut}, nil
		}},
	}
}

// Methods lists the sandbox-reachable methods as "memory.METHOD", for a
// policy's HostAPIs allowlist.
func Methods() []string { return hostcall.Names(API, methods(nil)) }

// Register serves the memory API from m on h. Only the methods of Methods()
// are registered.
func Register(h *sandbox.Handlers, m *Memory) error {
	return hostcall.Register(h, API, methods(m))
}

// Tools returns memory_save, memory_recall and memory_delete. They run
// inside the sandbox and reach the store only through hostCall, so the
// session's policy must allow memory.save, memory.recall and memory.delete.
func Tools() []tools.Tool {
	return []tools.Tool{
		&hostcall.Tool{API: API, Method: "save", Def: tools.Definition{
			Name:        "memory_save",
			Description: "Save a short text to long-term memory, under a key (an existing memory with that key is replaced) or under a key derived from the text. Tags help recall. Memories persist across sessions.",
			Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "text": {"type": "string", "description": "What to remember (at most 16 KiB)."},
    "key":  {"type": "string", "description": "Optional key; omit to derive one from the text."},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 16, "description": "Optional labels, e.g. [\"project\", \"preference\"]."}
  },
  "required": ["text"],
  "additionalProperties": false
}`),
		}},
		&hostcall.Tool{API: API, Method: "recall", Def: tools.Definition{
			Name:        "memory_recall",
			Description: "Recall memories: by exact key, or by a text query (ranked, best match first), optionally only those with all the given tags.",
			Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "key":   {"type": "string", "description": "Exact key of one memory."},
    "query": {"type": "string", "description": "Words to search for."},
    "tags":  {"type": "array", "items": {"type": "string"}, "description": "Only memories carrying all these tags."},
    "limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "Most results to return (default 5)."}
  },
  "additionalProperties": false
}`),
		}},
		&hostcall.Tool{API: API, Method: "delete", Def: tools.Definition{
			Name:        "memory_delete",
			Description: "Delete the memory with the given key.",
			Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "key": {"type": "string", "description": "Key of the memory to delete."}
  },
  "required": ["key"],
  "additionalProperties": false
}`),
		}},
	}
}
