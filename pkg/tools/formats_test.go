package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
)

// everyTool is the built-in set plus schemas that exercise the rewrite:
// nested objects, arrays of objects, a required enum, a $ref, a schema
// without type, a free-form map that is optional.
func everyTool() []Definition {
	defs := NewBuiltinRegistry().List()
	return append(defs, Definition{Name: "shapes", Description: "x", Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "mode":  {"enum": ["a", "b"]},
    "opt":   {"type": "string", "enum": ["x", "y"], "minLength": 1},
    "any":   {"description": "anything"},
    "edits": {"type": "array", "minItems": 1, "items": {"type": "object", "properties": {"s": {"type": "string"}, "all": {"type": "boolean"}}, "required": ["s"]}},
    "ref":   {"$ref": "#/$defs/port"},
    "env":   {"type": "object", "additionalProperties": {"type": "string"}, "maxProperties": 4},
    "open":  {"type": "object", "properties": {"k": {"type": "integer", "default": 3}}}
  },
  "$defs": {"port": {"type": "integer", "maximum": 65535}},
  "required": ["mode"]
}`)})
}

// checkStrict is OpenAI strict mode's rules, written apart from the
// rewrite: every object closed (additionalProperties false) with required
// listing exactly its properties, only supported keywords, and a type (or
// anyOf, $ref, enum, const) on every schema.
func strictProblems(where string, s map[string]any) (out []string) {
	supported := map[string]bool{"type": true, "properties": true, "required": true, "additionalProperties": true,
		"items": true, "enum": true, "const": true, "anyOf": true, "description": true, "$ref": true, "$defs": true,
		"pattern": true, "minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true,
		"multipleOf": true, "minItems": true, "maxItems": true}
	for k := range s {
		if !supported[k] {
			out = append(out, fmt.Sprintf("%s: keyword %q is refused by strict mode", where, k))
		}
	}
	_, typed := s["type"]
	if !typed && s["anyOf"] == nil && s["$ref"] == nil && s["enum"] == nil && s["const"] == nil {
		out = append(out, fmt.Sprintf("%s: no type", where))
	}
	isObject := s["type"] == "object"
	if list, ok := s["type"].([]any); ok {
		for _, e := range list {
			isObject = isObject || e == "object"
		}
	}
	if isObject {
		if s["additionalProperties"] != false {
			out = append(out, fmt.Sprintf("%s: additionalProperties is %v, want false", where, s["additionalProperties"]))
		}
		props, _ := s["properties"].(map[string]any)
		var names, req []string
		for n := range props {
			names = append(names, n)
		}
		list, _ := s["required"].([]any)
		for _, r := range list {
			req = append(req, fmt.Sprint(r))
		}
		sort.Strings(names)
		sort.Strings(req)
		if fmt.Sprint(names) != fmt.Sprint(req) {
			out = append(out, fmt.Sprintf("%s: required %v, properties %v", where, req, names))
		}
		for n, p := range props {
			pm, _ := p.(map[string]any)
			out = append(out, strictProblems(where+"."+n, pm)...)
		}
	}
	if items, ok := s["items"].(map[string]any); ok {
		out = append(out, strictProblems(where+"[]", items)...)
	}
	for _, group := range []string{"$defs"} {
		if m, ok := s[group].(map[string]any); ok {
			for n, c := range m {
				out = append(out, strictProblems(where+"/"+group+"/"+n, c.(map[string]any))...)
			}
		}
	}
	if list, ok := s["anyOf"].([]any); ok {
		for i, c := range list {
			out = append(out, strictProblems(fmt.Sprintf("%s/anyOf/%d", where, i), c.(map[string]any))...)
		}
	}
	return out
}

// checkStrict fails t for each problem strictProblems finds.
func checkStrict(t *testing.T, where string, s map[string]any) {
	t.Helper()
	for _, p := range strictProblems(where, s) {
		t.Error(p)
	}
}

func decodeStrict(t *testing.T, raw []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%v\n%s", err, raw)
	}
}

func TestOpenAIStrict(t *testing.T) {
	defs := everyTool()
	raw, err := FormatDefinitions(defs, FormatOpenAIStrict)
	if err != nil {
		t.Fatal(err)
	}
	var out []struct {
		Type     string `json:"type"`
		Function struct {
			Name        string         `json:"name"`
			Description string         `json:"description"`
			Parameters  map[string]any `json:"parameters"`
			Strict      bool           `json:"strict"`
		} `json:"function"`
	}
	decodeStrict(t, raw, &out)
	if len(out) != len(defs) {
		t.Fatalf("%d of %d tools", len(out), len(defs))
	}
	for _, f := range out {
		if f.Type != "function" || !f.Function.Strict {
			t.Errorf("%s: type %q strict %v", f.Function.Name, f.Type, f.Function.Strict)
		}
		if f.Function.Parameters["type"] != "object" {
			t.Errorf("%s: parameters are no object", f.Function.Name)
		}
		checkStrict(t, f.Function.Name, f.Function.Parameters)
	}
	// Before the rewrite most schemas break the rules: the checker bites.
	bad := 0
	for _, d := range defs {
		var m map[string]any
		json.Unmarshal(d.Parameters, &m)
		if len(strictProblems(d.Name, m)) > 0 {
			bad++
		}
	}
	t.Logf("%d of %d schemas as written break strict mode's rules", bad, len(defs))
	if bad < len(defs)/2 {
		t.Fatalf("only %d of %d original schemas break strict mode's rules: is the checker checking?", bad, len(defs))
	}
	shapes := out[len(out)-1].Function.Parameters["properties"].(map[string]any)
	if _, ok := shapes["env"]; ok {
		t.Error("the optional free-form map was kept")
	}
	if typ := fmt.Sprint(shapes["opt"].(map[string]any)["type"]); typ != "[string null]" {
		t.Errorf("optional opt has type %s", typ)
	}
	if enum := fmt.Sprint(shapes["opt"].(map[string]any)["enum"]); enum != "[x y <nil>]" {
		t.Errorf("optional enum %s lacks null", enum)
	}
}

func TestStrictRefusesRequiredMap(t *testing.T) {
	_, err := StrictSchema(json.RawMessage(`{"type":"object","properties":{"env":{"type":"object","additionalProperties":{"type":"string"}}},"required":["env"]}`))
	if !errors.Is(err, errNotStrict) {
		t.Fatalf("%v", err)
	}
}

func TestFlatAndOtherFormats(t *testing.T) {
	defs := everyTool()
	raw, err := FormatDefinitions(defs, FormatOpenAIResponses)
	if err != nil {
		t.Fatal(err)
	}
	var resp []struct {
		Type        string         `json:"type"`
		Name        string         `json:"name"`
		Description string         `json:"description"`
		Parameters  map[string]any `json:"parameters"`
		Strict      bool           `json:"strict"`
	}
	decodeStrict(t, raw, &resp)
	for _, f := range resp {
		if f.Type != "function" || f.Name == "" || !f.Strict {
			t.Errorf("responses: %+v", f)
		}
		checkStrict(t, f.Name, f.Parameters)
	}

	raw, err = FormatDefinitions(defs, FormatOpenAIRealtime)
	if err != nil {
		t.Fatal(err)
	}
	var rt []struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	decodeStrict(t, raw, &rt)
	if rt[0].Type != "function" || rt[0].Name != "read_file" || !bytes.Equal(rt[0].Parameters, defs[0].Parameters) && !jsonEqual(rt[0].Parameters, defs[0].Parameters) {
		t.Errorf("realtime: %+v", rt[0])
	}

	raw, err = FormatDefinitions(defs, FormatAnthropic)
	if err != nil {
		t.Fatal(err)
	}
	var an []struct {
		Name        string         `json:"name"`
		Description string         `json:"description"`
		InputSchema map[string]any `json:"input_schema"`
	}
	decodeStrict(t, raw, &an)
	for _, a := range an {
		if a.Name == "" || a.InputSchema["type"] != "object" {
			t.Errorf("anthropic: %+v", a)
		}
	}

	raw, err = FormatDefinitions(defs, FormatSession)
	if err != nil {
		t.Fatal(err)
	}
	var sess struct {
		Tools []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"tools"`
	}
	decodeStrict(t, raw, &sess)
	if len(sess.Tools) != len(defs) {
		t.Errorf("session: %d tools", len(sess.Tools))
	}

	raw, err = FormatDefinitions(defs, FormatMCP)
	if err != nil {
		t.Fatal(err)
	}
	var mcp []struct {
		Name        string         `json:"name"`
		Title       string         `json:"title"`
		Description string         `json:"description"`
		InputSchema map[string]any `json:"inputSchema"`
		Annotations *Annotations   `json:"annotations"`
	}
	decodeStrict(t, raw, &mcp)
	for _, m := range mcp[:len(mcp)-1] { // the built-in ones
		if m.Title == "" || m.Annotations == nil {
			t.Errorf("mcp: %s has no title or annotations", m.Name)
		}
	}
}

// ollamaProperty and ollamaTool follow Ollama's documented tool shape
// (api.Tool: parameters of type, required, properties; a property of type,
// description, enum, items and nested properties).
type ollamaProperty struct {
	Type        any                       `json:"type"`
	Description string                    `json:"description"`
	Enum        []any                     `json:"enum"`
	Items       *ollamaProperty           `json:"items"`
	Properties  map[string]ollamaProperty `json:"properties"`
	Required    []string                  `json:"required"`
}

type ollamaTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string `json:"name"`
		Description string `json:"description"`
		Parameters  struct {
			Type       string                    `json:"type"`
			Required   []string                  `json:"required"`
			Properties map[string]ollamaProperty `json:"properties"`
		} `json:"parameters"`
	} `json:"function"`
}

func TestOllamaFormat(t *testing.T) {
	defs := everyTool()
	raw, err := FormatDefinitions(defs, FormatOllama)
	if err != nil {
		t.Fatal(err)
	}
	var out []ollamaTool
	decodeStrict(t, raw, &out) // nothing Ollama's types would drop
	for _, o := range out {
		if o.Type != "function" || o.Function.Parameters.Type != "object" || o.Function.Parameters.Properties == nil {
			t.Errorf("%s: %+v", o.Function.Name, o)
		}
	}
	if out[0].Function.Parameters.Properties["path"].Description == "" || out[0].Function.Parameters.Required[0] != "path" {
		t.Errorf("read_file: %+v", out[0].Function.Parameters)
	}
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	json.Unmarshal(a, &x)
	json.Unmarshal(b, &y)
	return fmt.Sprint(x) == fmt.Sprint(y)
}

func TestParseModelArgs(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{``, `{}`},
		{`  `, `{}`},
		{`null`, `{}`},
		{`""`, `{}`},
		{`{"path":"a"}`, `{"path":"a"}`},
		{`"{\"path\":\"a\"}"`, `{"path":"a"}`},
	} {
		got, err := ParseModelArgs(c.in)
		if err != nil || string(got) != c.want {
			t.Errorf("%q: %s %v, want %s", c.in, got, err, c.want)
		}
	}
	_, err := ParseModelArgs(`{"path": "a",}`)
	var ae *ArgsError
	if !errors.As(err, &ae) || ae.Offset != 14 || !strings.Contains(err.Error(), "at byte 14") {
		t.Errorf("syntax error: %v", err)
	}
	if _, err := ParseModelArgs(`[1]`); err == nil || !strings.Contains(err.Error(), "object") {
		t.Errorf("array: %v", err)
	}
}

func TestStripNulls(t *testing.T) {
	params := json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":["string","null"]},"o":{"type":"object","properties":{"x":{"type":"integer"}}},"l":{"type":"array","items":{"type":"object","properties":{"y":{"type":"string"}}}}}}`)
	got, err := StripNulls(params, json.RawMessage(`{"a":null,"b":null,"o":{"x":null},"l":[{"y":null}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != `{"b":null,"l":[{}],"o":{}}` {
		t.Fatalf("%s", got)
	}
	// A strict-mode call of a built-in tool validates after the nulls go.
	r := NewBuiltinRegistry()
	for _, d := range r.List() {
		if d.Name != "read_file" {
			continue
		}
		args, _ := StripNulls(d.Parameters, json.RawMessage(`{"path":"x","start_line":null,"end_line":null}`))
		s, _ := CompileSchema(d.Name, d.Parameters)
		v, _ := DecodeArgs(args)
		if err := s.Validate(v); err != nil {
			t.Fatalf("read_file with nulls stripped: %v", err)
		}
	}
}
