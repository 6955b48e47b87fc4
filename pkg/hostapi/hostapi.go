// Package hostapi serves nsbox's built-in host APIs, memory and notepad, to
// sandboxes, and provides their tools.
//
// The stores live on the host, under DataDir (by default
// $XDG_DATA_HOME/nsbox, else ~/.local/share/nsbox): memory.db and
// notepad.db, each a bbolt file (0600, in a 0700 directory) opened for one
// operation at a time, so that several nsbox processes can use them
// together. Sandboxed code never touches them: the tools run inside the
// sandbox and ask the host through hostCall, and only the methods listed by
// Methods are ever registered.
//
// Typical wiring in a supervisor:
//
//	h, closeStores, err := hostapi.DefaultHandlers(dir)
//	...
//	defer closeStores()
//	policy.HostAPIs = hostapi.Methods()
//	s, err := sandbox.Start(ctx, policy, sandbox.WithHandlers(h))
//
// and in the worker (the same binary re-executed):
//
//	sandbox.Init(sandbox.WithWorkerTools(tools.NewRegistry(hostapi.Tools()...)))
package hostapi

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/nsbox/nsbox/pkg/hostapi/internal/hostcall"
	"github.com/nsbox/nsbox/pkg/hostapi/memory"
	"github.com/nsbox/nsbox/pkg/hostapi/notepad"
	"github.com/nsbox/nsbox/pkg/hostapi/store"
	"github.com/nsbox/nsbox/pkg/sandbox"
	"github.com/nsbox/nsbox/pkg/tools"
)

// DataDir returns nsbox's data directory: $XDG_DATA_HOME/nsbox, or
// $HOME/.local/share/nsbox when XDG_DATA_HOME is unset or not absolute (as
// the XDG base directory specification says). getenv is usually os.Getenv.
func DataDir(getenv func(string) string) (string, error) {
	if d := getenv("XDG_DATA_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "nsbox"), nil
	}
	if h := getenv("HOME"); h != "" && filepath.IsAbs(h) {
		return filepath.Join(h, ".local", "share", "nsbox"), nil
	}
	return "", errors.New("no data directory for nsbox's host APIs: set XDG_DATA_HOME or HOME to an absolute path")
}

// Stores are the host APIs' stores in one data directory.
type Stores struct {
	Memory  *memory.Memory
	Notepad *notepad.Notepad
}

// Open returns the stores in dataDir. Nothing is created on disk until the
// first write.
func Open(dataDir string, o store.Options) (*Stores, error) {
	if dataDir == "" || !filepath.IsAbs(dataDir) {
		return nil, fmt.Errorf("data directory %q must be an absolute path", dataDir)
	}
	m, err := memory.Open(dataDir, o)
	if err != nil {
		return nil, err
	}
	n, err := notepad.Open(dataDir, o)
	if err != nil {
		return nil, err
	}
	return &Stores{Memory: m, Notepad: n}, nil
}

// Register serves both APIs from s on h (the sandbox-reachable methods
// only: see Methods).
func Register(h *sandbox.Handlers, s *Stores) error {
	if err := memory.Register(h, s.Memory); err != nil {
		return err
	}
	return notepad.Register(h, s.Notepad)
}

// Methods lists every sandbox-reachable method ("memory.save", ...), for a
// policy's HostAPIs allowlist. Host-only operations (notepad Select and
// Clear) are not host API methods and never appear.
func Methods() []string {
	return append(memory.Methods(), notepad.Methods()...)
}

// Tools returns the memory and notepad tools (memory_save, document_read,
// ...). Each runs inside the sandbox and only makes a hostCall.
func Tools() []tools.Tool {
	ts := append(memory.Tools(), notepad.Tools()...)
	for _, t := range ts {
		if h, ok := t.(*hostcall.Tool); ok {
			if p, ok := presentation[h.Def.Name]; ok {
				h.Def = tools.Present(h.Def, p.title, p.ann)
			}
		}
	}
	return ts
}

// presentation gives each host API tool its title and MCP annotations:
// reads are read-only; a save, overwrite, delete or close replaces by name
// (repeating it does nothing more); a patch edits what is there. None
// reaches past the host's own stores.
var presentation = map[string]struct {
	title string
	ann   tools.Annotations
}{
	"memory_save":          {"Save memory", tools.Replaces},
	"memory_recall":        {"Recall memories", tools.ReadOnly},
	"memory_delete":        {"Delete memory", tools.Replaces},
	"document_read":        {"Read document", tools.ReadOnly},
	"document_overwrite":   {"Overwrite document", tools.Replaces},
	"document_patch":       {"Patch document", tools.Edits},
	"notepad_list_tabs":    {"List notepad tabs", tools.ReadOnly},
	"notepad_get_metadata": {"Notepad tab metadata", tools.ReadOnly},
	"notepad_get_content":  {"Notepad tab content", tools.ReadOnly},
	"notepad_close_tab":    {"Close notepad tab", tools.Replaces},
}

// DefaultHandlers returns handlers serving memory and notepad from the
// stores in dataDir (an absolute path, usually DataDir(os.Getenv)), for
// sandbox.WithHandlers. Nothing is created on disk until the first write.
// The returned close function releases the stores; as they are opened per
// operation it has nothing to release today, but callers should defer it.
func DefaultHandlers(dataDir string) (*sandbox.Handlers, func() error, error) {
	s, err := Open(dataDir, store.Options{})
	if err != nil {
		return nil, nil, err
	}
	h := sandbox.NewHandlers()
	if err := Register(h, s); err != nil {
		return nil, nil, err
	}
	return h, func() error { return nil }, nil
}
