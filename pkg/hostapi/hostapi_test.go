package hostapi

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/pkg/hostapi/internal/hostcall"
	"github.com/nsbox/nsbox/pkg/hostapi/store"
	"github.com/nsbox/nsbox/pkg/ipc"
	"github.com/nsbox/nsbox/pkg/sandbox"
	"github.com/nsbox/nsbox/pkg/tools"
)

func TestDataDir(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"XDG_DATA_HOME": "/x/data", "HOME": "/home/u"}, "/x/data/nsbox"},
		{map[string]string{"XDG_DATA_HOME": "relative", "HOME": "/home/u"}, "/home/u/.local/share/nsbox"},
		{map[string]string{"HOME": "/home/u"}, "/home/u/.local/share/nsbox"},
	} {
		got, err := DataDir(env(c.env))
		if err != nil || got != c.want {
			t.Errorf("%v: %q %v, want %q", c.env, got, err, c.want)
		}
	}
	if _, err := DataDir(env(nil)); err == nil {
		t.Error("no HOME and no XDG_DATA_HOME: want an error")
	}
}

// Register registers exactly Methods(): the host-only notepad operations
// are not reachable, whatever a policy lists.
func TestRegisterOnlySandboxMethods(t *testing.T) {
	h, closeFn, err := DefaultHandlers(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	noop := func(context.Context, sandbox.HostCall) (ipc.Value, error) { return ipc.Null{}, nil }
	for _, m := range Methods() {
		api, method, _ := strings.Cut(m, ".")
		if err := h.Handle(api, method, noop); !errors.Is(err, sandbox.ErrHandlerExists) {
			t.Errorf("%s was not registered (%v)", m, err)
		}
	}
	for _, m := range []string{"notepad.select", "notepad.clear", "notepad.select_tab", "notepad.clear_all", "memory.wipe"} {
		api, method, _ := strings.Cut(m, ".")
		if err := h.Handle(api, method, noop); err != nil {
			t.Errorf("%s is registered: %v", m, err)
		}
	}
	if len(Methods()) != 10 {
		t.Errorf("Methods() = %v", Methods())
	}
	// Registering twice is an error, not a silent replacement.
	s, _ := Open(t.TempDir(), store.Options{})
	h2 := sandbox.NewHandlers()
	if err := Register(h2, s); err != nil {
		t.Fatal(err)
	}
	if err := Register(h2, s); !errors.Is(err, sandbox.ErrHandlerExists) {
		t.Errorf("second Register: %v", err)
	}
}

func TestDefaultHandlersCreatesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nsbox")
	if _, _, err := DefaultHandlers(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("DefaultHandlers created %s", dir)
	}
	if _, _, err := DefaultHandlers("relative/dir"); err == nil {
		t.Fatal("relative data dir accepted")
	}
}

// fakeEnv is a ToolEnv that records hostCalls and refuses everything else:
// the host API tools must do nothing but call the host.
type fakeEnv struct {
	t     *testing.T
	calls []string
	args  []json.RawMessage
	reply json.RawMessage
	err   error
}

func (e *fakeEnv) Workspace() string              { e.t.Error("tool asked for the workspace"); return "" }
func (e *fakeEnv) Settings() sandbox.ToolSettings { return sandbox.ToolSettings{} }
func (e *fakeEnv) Run(context.Context, sandbox.RunSpec) (sandbox.RunResult, error) {
	e.t.Error("tool started a process")
	return sandbox.RunResult{}, errors.New("no")
}
func (e *fakeEnv) HostCall(_ context.Context, api, method string, args any) (json.RawMessage, error) {
	e.calls = append(e.calls, api+"."+method)
	raw, err := json.Marshal(args)
	if err != nil {
		e.t.Fatal(err)
	}
	e.args = append(e.args, raw)
	return e.reply, e.err
}

func TestToolsOnlyCallTheHost(t *testing.T) {
	allowed := map[string]bool{}
	for _, m := range Methods() {
		allowed[m] = true
	}
	seen := map[string]bool{}
	for _, tl := range Tools() {
		name := tl.Definition().Name
		if seen[name] {
			t.Fatalf("tool %s defined twice", name)
		}
		seen[name] = true
		env := &fakeEnv{t: t, reply: json.RawMessage(`{"ok":{"n":1}}`)}
		args := json.RawMessage(`{"id":"tab-1","text":"x"}`)
		res := tl.Run(context.Background(), env, args)
		if len(env.calls) != 1 || !allowed[env.calls[0]] {
			t.Fatalf("%s made hostCalls %v; want one allowed method", name, env.calls)
		}
		if string(env.args[0]) != string(args) {
			t.Fatalf("%s changed its arguments: %s", name, env.args[0])
		}
		if !res.Success || res.Error != nil {
			t.Fatalf("%s: %+v", name, res)
		}
		out, _ := json.Marshal(res.Output)
		if string(out) != `{"ok":{"n":1}}` {
			t.Fatalf("%s output %s", name, out)
		}
		// A refusal from the host is the tool's error, verbatim.
		env = &fakeEnv{t: t, err: errors.New("host API notepad.close is not allowed by the policy")}
		res = tl.Run(context.Background(), env, nil)
		if res.Success || res.Error == nil || *res.Error != "host API notepad.close is not allowed by the policy" {
			t.Fatalf("%s failure: %+v", name, res)
		}
		if string(env.args[0]) != "{}" {
			t.Fatalf("%s: empty arguments sent as %s", name, env.args[0])
		}
	}
	if len(seen) != 10 {
		t.Fatalf("%d tools, want 10", len(seen))
	}
}

// The schemas compile, and accept and refuse what they should (the registry
// validates arguments with them before a tool runs).
func TestToolSchemas(t *testing.T) {
	byName := map[string]*tools.Schema{}
	for _, tl := range Tools() {
		d := tl.Definition()
		s, err := tools.CompileSchema(d.Name, d.Parameters)
		if err != nil {
			t.Fatalf("%s: %v", d.Name, err)
		}
		byName[d.Name] = s
	}
	for _, c := range []struct {
		tool, args string
		ok         bool
	}{
		{"memory_save", `{"text":"x","tags":["a"]}`, true},
		{"memory_save", `{"key":"k"}`, false},
		{"memory_save", `{"text":"x","extra":1}`, false},
		{"memory_recall", `{"query":"x","limit":5}`, true},
		{"memory_recall", `{"limit":0}`, false},
		{"memory_delete", `{}`, false},
		{"document_overwrite", `{"content":""}`, true},
		{"document_overwrite", `{"id":"../x","content":""}`, false},
		{"document_patch", `{"edits":[{"search":"a","replace":"b"}]}`, true},
		{"document_patch", `{"edits":[{"search":"a"}]}`, false},
		{"notepad_close_tab", `{"id":"tab-1"}`, true},
		{"notepad_close_tab", `{}`, false},
		{"notepad_list_tabs", `{}`, true},
	} {
		v, err := tools.DecodeArgs(json.RawMessage(c.args))
		if err == nil {
			err = byName[c.tool].Validate(v)
		}
		if (err == nil) != c.ok {
			t.Errorf("%s %s: valid=%v (%v), want %v", c.tool, c.args, err == nil, err, c.ok)
		}
	}
}

func TestResultBound(t *testing.T) {
	_, err := hostcall.Result(map[string]any{"content": strings.Repeat("\x01", hostcall.MaxResultBytes/6+1)})
	if !errors.Is(err, store.ErrTooLarge) || !strings.Contains(err.Error(), "the result is too large") {
		t.Fatalf("oversized result: %v", err)
	}
	if _, err := hostcall.Result(map[string]any{"f": func() {}}); err == nil {
		t.Fatal("a function became a result")
	}
}
