package mcpintegration

import (
	"encoding/json"
	"os/exec"

	"strings"
	"testing"
)

// nsbox tools list --format and --tools, and nsbox tools call's arguments
// as models send them, from the built binary. (Each format's rules are
// checked in depth in pkg/tools; here: what the command prints.)

func toolsList(t *testing.T, args ...string) []byte {
	t.Helper()
	out, err := exec.Command(nsboxBin(t), append([]string{"tools", "list"}, args...)...).Output()
	if err != nil {
		t.Fatalf("nsbox tools list %v: %v", args, err)
	}
	return out
}

func TestToolsListFormats(t *testing.T) {
	type obj = map[string]any
	for format, check := range map[string]func(t *testing.T, v any) string{
		"openai": func(t *testing.T, v any) string {
			f := v.(obj)["function"].(obj)
			return f["name"].(string)
		},
		"openai-strict": func(t *testing.T, v any) string {
			f := v.(obj)["function"].(obj)
			if f["strict"] != true {
				t.Errorf("%s: strict is %v", f["name"], f["strict"])
			}
			p := f["parameters"].(obj)
			if p["additionalProperties"] != false || len(p["required"].([]any)) != len(p["properties"].(obj)) {
				t.Errorf("%s: not closed and fully required: %v", f["name"], p)
			}
			return f["name"].(string)
		},
		"openai-responses": func(t *testing.T, v any) string {
			f := v.(obj)
			if f["type"] != "function" || f["strict"] != true || f["parameters"] == nil {
				t.Errorf("responses: %v", f)
			}
			return f["name"].(string)
		},
		"openai-realtime": func(t *testing.T, v any) string {
			f := v.(obj)
			if f["type"] != "function" || f["parameters"] == nil || f["function"] != nil {
				t.Errorf("realtime: %v", f)
			}
			return f["name"].(string)
		},
		"anthropic": func(t *testing.T, v any) string {
			f := v.(obj)
			if f["input_schema"].(obj)["type"] != "object" || f["parameters"] != nil {
				t.Errorf("anthropic: %v", f)
			}
			return f["name"].(string)
		},
		"ollama": func(t *testing.T, v any) string {
			f := v.(obj)["function"].(obj)
			for k := range f["parameters"].(obj) {
				if k != "type" && k != "properties" && k != "required" {
					t.Errorf("%s: parameters key %q is not Ollama's", f["name"], k)
				}
			}
			return f["name"].(string)
		},
		"mcp": func(t *testing.T, v any) string {
			f := v.(obj)
			if f["title"] == nil || len(f["annotations"].(obj)) != 4 {
				t.Errorf("mcp: %v lacks a title or annotations", f["name"])
			}
			return f["name"].(string)
		},
	} {
		t.Run(format, func(t *testing.T) {
			var list []any
			if err := json.Unmarshal(toolsList(t, "--format", format), &list); err != nil {
				t.Fatal(err)
			}
			if len(list) < len(builtinTools) {
				t.Fatalf("%d tools", len(list))
			}
			var names []string
			for _, v := range list {
				names = append(names, check(t, v))
			}
			if names[0] != "read_file" {
				t.Errorf("first tool %q", names[0])
			}
			var sub []any
			json.Unmarshal(toolsList(t, "--format", format, "--tools", "write_file,read_file"), &sub)
			if len(sub) != 2 || check(t, sub[0]) != "read_file" || check(t, sub[1]) != "write_file" {
				t.Errorf("--tools write_file,read_file: %v", sub)
			}
		})
	}
	var sess struct{ Tools []map[string]any }
	if err := json.Unmarshal(toolsList(t, "--format", "session"), &sess); err != nil || len(sess.Tools) < len(builtinTools) || sess.Tools[0]["parameters"] == nil {
		t.Fatalf("session: %v %v", err, sess)
	}
	out, err := exec.Command(nsboxBin(t), "tools", "list", "--tools", "read_file,nope").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), `unknown tool "nope"`) || !strings.Contains(string(out), "read_file") {
		t.Fatalf("unknown tool: exit %v, %q", err, out)
	}
}

// TestToolsCallModelArguments: "" for none, a strict model's nulls, the
// object as a JSON string; a syntax error names its byte.
func TestToolsCallModelArguments(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		h := newHome(t, u)
		h.writeFile(t, "notes.txt", "one\ntwo\n")
		call := func(args ...string) (map[string]any, int) {
			t.Helper()
			cmd := exec.Command(nsboxBin(t), append([]string{"tools", "call", "--workspace", h.ws}, args...)...)
			h.setup(cmd)
			out, err := cmd.Output()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			var r map[string]any
			if err := json.Unmarshal(out, &r); err != nil {
				t.Fatalf("tools call %v printed %q: %v", args, out, err)
			}
			return r, code
		}
		if r, code := call("list_directory", ""); code != 0 || !strings.Contains(strings.ToLower(toJSON(r)), "notes.txt") {
			t.Errorf(`list_directory "": exit %d, %v`, code, r)
		}
		if r, code := call("read_file", `{"path":"notes.txt","start_line":null,"end_line":null}`); code != 0 || !strings.Contains(toJSON(r), "two") {
			t.Errorf("read_file with a strict model's nulls: exit %d, %v", code, r)
		}
		if r, code := call("read_file", `"{\"path\":\"notes.txt\"}"`); code != 0 || !strings.Contains(toJSON(r), "one") {
			t.Errorf("read_file with the object as a string: exit %d, %v", code, r)
		}
		r, code := call("read_file", `{"path": "notes.txt",}`)
		if code != 1 || !strings.Contains(toJSON(r), "at byte 22") {
			t.Errorf("syntax error: exit %d, %v", code, r)
		}

	})
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
