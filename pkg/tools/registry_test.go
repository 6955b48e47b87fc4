package tools

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

func TestBuiltinSchemasCompile(t *testing.T) {
	r := NewBuiltinRegistry()
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{"read_file", "write_file", "list_directory", "run_command", "search_files", "run_script", "edit_file"}
	got := r.List()
	if len(got) != len(want) {
		t.Fatalf("%d tools, want %d", len(got), len(want))
	}
	for i, d := range got {
		if d.Name != want[i] || d.Description == "" {
			t.Errorf("tool %d = %q (%q)", i, d.Name, d.Description)
		}
	}
}

func TestArgumentValidation(t *testing.T) {
	ws := t.TempDir()
	mustWrite(t, ws+"/a.txt", "a\n")
	r := NewBuiltinRegistry()
	env := &hostEnv{ws: ws}
	cases := []struct{ tool, args, want string }{
		{"read_file", `{"path":5}`, `argument "path": expected string, got number`},
		{"read_file", `{}`, `argument "path" is required`},
		{"read_file", `{"path":"a.txt","bogus":1}`, `argument "bogus" is not a known argument`},
		{"read_file", `{"path":"a.txt","start_line":0}`, `argument "start_line"`},
		{"read_file", `{"path":"a.txt","start_line":1.5}`, `argument "start_line": expected integer, got number`},
		{"read_file", `[1,2]`, `arguments: expected an object, got array`},
		{"read_file", `{"path":`, `arguments: not valid JSON`},
		{"run_command", `{"argv":"ls"}`, `argument "argv": expected array, got string`},
		{"run_command", `{"argv":["ls",3]}`, `argument "argv[1]": expected string, got number`},
		{"run_script", `{"language":"cobol","script":"x"}`, `argument "language": must be one of`},
		{"write_file", `{"path":"x"}`, `argument "content" is required`},
		{"nope", `{}`, `unknown tool "nope"`},
	}
	for _, c := range cases {
		res := call(t, r, env, c.tool, c.args)
		if res.Success || !strings.Contains(errText(res), c.want) {
			t.Errorf("%s %s: success=%v error=%q, want %q", c.tool, c.args, res.Success, errText(res), c.want)
		}
	}
	// null and absent arguments are {}.
	res := call(t, r, env, "list_directory", `null`)
	if !res.Success {
		t.Errorf("list_directory null: %s", errText(res))
	}
}

type panicTool struct{}

func (panicTool) Definition() Definition {
	return Definition{Name: "boom", Description: "panics", Parameters: json.RawMessage(`{"type":"object"}`)}
}
func (panicTool) Run(ctx context.Context, env sandbox.ToolEnv, args json.RawMessage) Result {
	var m map[string]int
	m["x"] = 1 // nil map write
	return OK(nil)
}

type stuckTool struct{}

func (stuckTool) Definition() Definition {
	return Definition{Name: "stuck", Description: "ignores its context", Parameters: json.RawMessage(`{"type":"object"}`)}
}
func (stuckTool) Run(ctx context.Context, env sandbox.ToolEnv, args json.RawMessage) Result {
	time.Sleep(time.Minute)
	return OK(nil)
}

func TestPanicAndTimeoutAreResults(t *testing.T) {
	r := NewRegistry(panicTool{}, stuckTool{})
	res := call(t, r, nil, "boom", `{}`)
	if res.Success || !strings.Contains(errText(res), "internal error") {
		t.Fatalf("panic: %v %q", res.Success, errText(res))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	raw, _ := r.Call(ctx, nil, "stuck", nil)
	if time.Since(start) > timeoutGrace+2*time.Second || !strings.Contains(string(raw), "timed out") {
		t.Fatalf("stuck tool: %s after %s", raw, time.Since(start))
	}
	// The policy's timeout applies when the call has none.
	start = time.Now()
	raw, _ = r.Call(context.Background(), &hostEnv{s: sandbox.ToolSettings{Timeout: 100 * time.Millisecond}}, "stuck", nil)
	if time.Since(start) > timeoutGrace+2*time.Second || !strings.Contains(string(raw), "timed out after 100ms") {
		t.Fatalf("policy timeout: %s after %s", raw, time.Since(start))
	}
}

func TestRegisterRuntimeTools(t *testing.T) {
	r := NewBuiltinRegistry()
	bad := map[string]string{
		`{"name":"read_file","description":"x","implementation":{"argv":["cat"]}}`:                                          "built in and cannot be replaced",
		`{"name":"bad name","description":"x","implementation":{"argv":["cat"]}}`:                                           "invalid name",
		`{"name":"` + strings.Repeat("a", 65) + `","implementation":{"argv":["cat"]}}`:                                      "invalid name",
		`{"name":"t1","description":"x"}`:                                                                                   "missing implementation",
		`{"name":"t1","implementation":{"language":"cobol","script":"x"}}`:                                                  "unsupported language",
		`{"name":"t1","implementation":{"language":"python","script":""}}`:                                                  "script must have",
		`{"name":"t1","implementation":{"language":"python","script":"x","argv":["y"]}}`:                                    "both a script and an argv",
		`{"name":"t1","implementation":{"argv":["cat"]},"parameters":{"type":"string"}}`:                                    `"type" must be "object"`,
		`{"name":"t1","implementation":{"argv":["cat"]},"parameters":{"type":"object","properties":{"a":{"type":"nope"}}}}`: "invalid JSON schema",
		`{"name":"t1","implementation":{"argv":["cat"]},"parameters":{"$ref":"file:///etc/passwd"}}`:                        "invalid JSON schema",
		`{"name":"t1","implementation":{"argv":["cat"]},"implemntation":1}`:                                                 "unknown field",
	}
	for def, want := range bad {
		if err := r.Register(json.RawMessage(def)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Register(%s) = %v, want an error containing %q", def, err, want)
		}
	}
	if err := r.Unregister("read_file"); err == nil || !strings.Contains(err.Error(), "built in") {
		t.Errorf("Unregister(read_file) = %v", err)
	}
	if err := r.Unregister("nope"); err == nil {
		t.Error("Unregister(nope) succeeded")
	}

	ws := t.TempDir()
	env := &hostEnv{ws: ws}
	def := `{"name":"add","description":"adds a and b","parameters":{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]},
	  "implementation":{"language":"python","script":"import json,sys\nd=json.load(sys.stdin)\nprint(json.dumps({\"sum\": d[\"a\"]+d[\"b\"]}))"}}`
	if err := r.Register(json.RawMessage(def)); err != nil {
		t.Fatal(err)
	}
	if l := r.List(); l[len(l)-1].Name != "add" {
		t.Fatalf("add not listed: %v", l)
	}
	res := call(t, r, env, "add", `{"a":2,"b":40}`)
	if !res.Success || field(t, res, "sum") != float64(42) {
		t.Fatalf("add: %v %q", res.Output, errText(res))
	}
	res = call(t, r, env, "add", `{"a":"2","b":40}`)
	if res.Success || !strings.Contains(errText(res), `argument "a": expected number, got string`) {
		t.Fatalf("add with a string: %v %q", res.Success, errText(res))
	}
	// An argv implementation; plain text output; a failing one.
	if err := r.Register(json.RawMessage(`{"name":"echoargs","implementation":{"argv":["cat"]}}`)); err != nil {
		t.Fatal(err)
	}
	res = call(t, r, env, "echoargs", `{"x":1}`)
	if !res.Success || field(t, res, "x") != float64(1) {
		t.Fatalf("echoargs: %v %q", res.Output, errText(res))
	}
	if err := r.Register(json.RawMessage(`{"name":"fails","implementation":{"language":"bash","script":"echo partial; echo broken >&2; exit 3"}}`)); err != nil {
		t.Fatal(err)
	}
	res = call(t, r, env, "fails", `{}`)
	if res.Success || errText(res) != "broken" || res.Output != "partial\n" {
		t.Fatalf("fails: %v %q %q", res.Success, res.Output, errText(res))
	}
	// Run-time tools can be replaced and removed.
	if err := r.Register(json.RawMessage(`{"name":"fails","implementation":{"argv":["true"]}}`)); err != nil {
		t.Fatal(err)
	}
	if err := r.Unregister("fails"); err != nil {
		t.Fatal(err)
	}
	if res := call(t, r, env, "fails", `{}`); res.Success {
		t.Fatal("unregistered tool still callable")
	}
}

func TestFormats(t *testing.T) {
	defs := NewBuiltinRegistry().List()
	for _, f := range []string{FormatOpenAI, FormatOllama} {
		raw, err := FormatDefinitions(defs, f)
		if err != nil {
			t.Fatal(err)
		}
		var out []struct {
			Type     string `json:"type"`
			Function struct {
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		}
		if err := json.Unmarshal(raw, &out); err != nil || len(out) != len(defs) || out[0].Type != "function" || out[0].Function.Name != "read_file" || len(out[0].Function.Parameters) == 0 {
			t.Fatalf("%s: %v %s", f, err, raw)
		}
	}
	raw, err := FormatDefinitions(defs, FormatMCP)
	if err != nil {
		t.Fatal(err)
	}
	var mcp []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &mcp); err != nil || len(mcp) != len(defs) || mcp[0]["inputSchema"] == nil || mcp[0]["name"] == nil {
		t.Fatalf("mcp: %v %s", err, raw)
	}
	if _, err := FormatDefinitions(defs, "xml"); err == nil {
		t.Fatal("unknown format accepted")
	}
}
