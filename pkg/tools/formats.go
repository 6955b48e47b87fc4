package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Formats of tool definitions, for the APIs that take them.
const (
	// FormatOpenAI is the function-calling format of OpenAI's Chat
	// Completions API: [{"type":"function","function":{name,
	// description, parameters}}], the schemas as they are.
	FormatOpenAI = "openai"
	// FormatOpenAIStrict is FormatOpenAI with "strict": true and the
	// schemas rewritten to the subset strict mode accepts (StrictSchema).
	FormatOpenAIStrict = "openai-strict"
	// FormatOpenAIResponses is the Responses API's flat shape:
	// [{"type":"function", name, description, parameters, "strict":true}]
	// (the Responses API is strict by default: the schemas are rewritten
	// as for FormatOpenAIStrict).
	FormatOpenAIResponses = "openai-responses"
	// FormatOpenAIRealtime is the Realtime API's flat shape:
	// [{"type":"function", name, description, parameters}].
	FormatOpenAIRealtime = "openai-realtime"
	// FormatOllama is Ollama's documented tools shape
	// ({"type":"function","function":{name, description, parameters}} with
	// parameters of type, properties, required; properties of type,
	// description, enum, items, and nested properties): the keywords its
	// API types do not hold are left out.
	FormatOllama = "ollama"
	// FormatAnthropic is Anthropic's Messages API tools:
	// [{name, description, input_schema}].
	FormatAnthropic = "anthropic"
	// FormatMCP is the Model Context Protocol's tools/list shape:
	// [{name, title, description, inputSchema, annotations}].
	FormatMCP = "mcp"
	// FormatSession is what a session lists (listSessionDefinitions):
	// {"tools":[{name, description, parameters}]}.
	FormatSession = "session"
)

// Formats lists the accepted format names.
var Formats = []string{FormatOpenAI, FormatOpenAIStrict, FormatOpenAIResponses, FormatOpenAIRealtime,
	FormatOllama, FormatAnthropic, FormatMCP, FormatSession}

type functionDef struct {
	Type     string         `json:"type"`
	Function functionFields `json:"function"`
}

type functionFields struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict,omitempty"`
}

type flatFunctionDef struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict,omitempty"`
}

type anthropicDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type mcpDef struct {
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
	Annotations *Annotations    `json:"annotations,omitempty"`
}

// FormatDefinitions renders definitions in one of Formats.
func FormatDefinitions(defs []Definition, format string) (json.RawMessage, error) {
	strict := true
	var out []any
	for _, d := range defs {
		d = withSchema(d)
		var v any
		switch format {
		case FormatOpenAI, "":
			v = functionDef{Type: "function", Function: functionFields{Name: d.Name, Description: d.Description, Parameters: d.Parameters}}
		case FormatOpenAIStrict, FormatOpenAIResponses:
			params, err := StrictSchema(d.Parameters)
			if err != nil {
				return nil, fmt.Errorf("tool %q: %w", d.Name, err)
			}
			if format == FormatOpenAIStrict {
				v = functionDef{Type: "function", Function: functionFields{Name: d.Name, Description: d.Description, Parameters: params, Strict: &strict}}
			} else {
				v = flatFunctionDef{Type: "function", Name: d.Name, Description: d.Description, Parameters: params, Strict: &strict}
			}
		case FormatOpenAIRealtime:
			v = flatFunctionDef{Type: "function", Name: d.Name, Description: d.Description, Parameters: d.Parameters}
		case FormatOllama:
			params, err := ollamaSchema(d.Parameters)
			if err != nil {
				return nil, fmt.Errorf("tool %q: %w", d.Name, err)
			}
			v = functionDef{Type: "function", Function: functionFields{Name: d.Name, Description: d.Description, Parameters: params}}
		case FormatAnthropic:
			v = anthropicDef{Name: d.Name, Description: d.Description, InputSchema: d.Parameters}
		case FormatMCP:
			v = mcpDef{Name: d.Name, Title: d.Title, Description: d.Description, InputSchema: d.Parameters, Annotations: d.Annotations}
		case FormatSession:
			v = Definition{Name: d.Name, Description: d.Description, Parameters: d.Parameters}
		default:
			return nil, fmt.Errorf("unknown format %q (want one of %s)", format, strings.Join(Formats, ", "))
		}
		out = append(out, v)
	}
	if out == nil {
		out = []any{}
	}
	if format == FormatSession {
		return json.Marshal(map[string]any{"tools": out})
	}
	return json.Marshal(out)
}

func withSchema(d Definition) Definition {
	p := bytes.TrimSpace(d.Parameters)
	if len(p) == 0 || string(p) == "null" {
		d.Parameters = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	return d
}

// strictKeywords are the JSON Schema keywords OpenAI's strict mode
// (Structured Outputs) accepts; the schema of a strict function is refused
// when it holds any other. Length bounds of strings and objects, default,
// title, format, allOf, not, if/then/else and patternProperties are not
// among them: the tool checks those itself when it is called.
var strictKeywords = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true,
	"items": true, "enum": true, "const": true, "anyOf": true, "description": true,
	"$ref": true, "$defs": true, "pattern": true,
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true, "multipleOf": true,
	"minItems": true, "maxItems": true,
}

// StrictKeywords reports whether keyword is one strict mode accepts.
func StrictKeywords(keyword string) bool { return strictKeywords[keyword] }

// errNotStrict is a (sub)schema strict mode cannot express: an object
// whose members are free (a map, such as run_script's env).
var errNotStrict = errors.New("an object with free-form members (additionalProperties other than false) has no strict-mode form")

// StrictSchema rewrites a parameters schema for OpenAI's strict mode:
// every object gets "additionalProperties": false and lists all its
// properties as required, an optional property becomes nullable
// (["T","null"], and null joins its enum) so that a model passes null for
// "not given" (StripNulls removes those again before the call), and the
// keywords strict mode refuses are left out. An optional property strict
// mode cannot express at all (a free-form map) is left out; a required
// one is an error.
func StrictSchema(params json.RawMessage) (json.RawMessage, error) {
	var root map[string]any
	if err := json.Unmarshal(params, &root); err != nil {
		return nil, fmt.Errorf("parameters: %v", err)
	}
	if root == nil {
		root = map[string]any{}
	}
	if _, ok := root["type"]; !ok {
		root["type"] = "object"
	}
	out, err := strictify(root, 0)
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

func strictify(s map[string]any, depth int) (map[string]any, error) {
	if depth > maxSchemaDepth {
		return nil, fmt.Errorf("nested more than %d levels deep", maxSchemaDepth)
	}
	out := map[string]any{}
	for k, v := range s {
		if strictKeywords[k] {
			out[k] = v
		}
	}
	if isObjectSchema(s) {
		switch ap := s["additionalProperties"].(type) {
		case nil, bool:
			// Absent, true or false: strict mode takes the declared
			// properties only, which is all a tool reads.
		case map[string]any:
			if len(ap) > 0 {
				return nil, errNotStrict
			}
		default:
			return nil, errNotStrict
		}
		required := map[string]bool{}
		if list, ok := s["required"].([]any); ok {
			for _, r := range list {
				if name, ok := r.(string); ok {
					required[name] = true
				}
			}
		}
		props := map[string]any{}
		var names []string
		for name, raw := range propertiesOf(s) {
			child, ok := raw.(map[string]any)
			if !ok {
				child = map[string]any{} // true: any value
			}
			c, err := strictify(child, depth+1)
			if errors.Is(err, errNotStrict) && !required[name] {
				continue // an optional map: the call works without it
			}
			if err != nil {
				return nil, fmt.Errorf("property %q: %w", name, err)
			}
			if !required[name] {
				c = nullable(c)
			}
			props[name] = c
			names = append(names, name)
		}
		sort.Strings(names)
		out["type"] = "object"
		out["properties"] = props
		out["required"] = names
		out["additionalProperties"] = false
	}
	if items, ok := s["items"].(map[string]any); ok {
		c, err := strictify(items, depth+1)
		if err != nil {
			return nil, fmt.Errorf("items: %w", err)
		}
		out["items"] = c
	}
	if defs, ok := s["$defs"].(map[string]any); ok {
		nd := map[string]any{}
		for name, raw := range defs {
			if child, ok := raw.(map[string]any); ok {
				c, err := strictify(child, depth+1)
				if err != nil {
					return nil, fmt.Errorf("$defs %q: %w", name, err)
				}
				nd[name] = c
			}
		}
		out["$defs"] = nd
	}
	if list, ok := s["anyOf"].([]any); ok {
		var nl []any
		for _, raw := range list {
			if child, ok := raw.(map[string]any); ok {
				c, err := strictify(child, depth+1)
				if err != nil {
					return nil, fmt.Errorf("anyOf: %w", err)
				}
				nl = append(nl, c)
			}
		}
		out["anyOf"] = nl
	}
	if _, typed := out["type"]; !typed && out["anyOf"] == nil && out["$ref"] == nil && out["enum"] == nil && out["const"] == nil {
		// Strict mode needs a type: a schema that takes any value
		// becomes one that takes any JSON scalar, array of scalars, or
		// nothing (null).
		out["anyOf"] = []any{
			map[string]any{"type": "string"}, map[string]any{"type": "number"}, map[string]any{"type": "boolean"},
		}
	}
	return out, nil
}

func isObjectSchema(s map[string]any) bool {
	switch t := s["type"].(type) {
	case string:
		return t == "object"
	case []any:
		for _, e := range t {
			if e == "object" {
				return true
			}
		}
		return false
	}
	_, has := s["properties"]
	return has
}

func propertiesOf(s map[string]any) map[string]any {
	p, _ := s["properties"].(map[string]any)
	return p
}

// nullable makes a schema also accept null.
func nullable(s map[string]any) map[string]any {
	switch t := s["type"].(type) {
	case string:
		if t != "null" {
			s["type"] = []any{t, "null"}
		}
	case []any:
		has := false
		for _, e := range t {
			has = has || e == "null"
		}
		if !has {
			s["type"] = append(t, "null")
		}
	default:
		if list, ok := s["anyOf"].([]any); ok {
			s["anyOf"] = append(list, map[string]any{"type": "null"})
		} else if _, ref := s["$ref"]; ref {
			return map[string]any{"anyOf": []any{map[string]any{"$ref": s["$ref"]}, map[string]any{"type": "null"}}}
		}
	}
	if enum, ok := s["enum"].([]any); ok {
		has := false
		for _, e := range enum {
			has = has || e == nil
		}
		if !has {
			s["enum"] = append(enum, nil)
		}
	}
	return s
}

// ollamaSchema keeps what Ollama's tool types hold: type, description,
// enum, items, properties and required, at any depth.
func ollamaSchema(params json.RawMessage) (json.RawMessage, error) {
	var root map[string]any
	if err := json.Unmarshal(params, &root); err != nil {
		return nil, fmt.Errorf("parameters: %v", err)
	}
	out := ollamaProp(root, 0)
	out["type"] = "object"
	if _, ok := out["properties"]; !ok {
		out["properties"] = map[string]any{}
	}
	return json.Marshal(out)
}

func ollamaProp(s map[string]any, depth int) map[string]any {
	out := map[string]any{}
	if depth > maxSchemaDepth {
		return out
	}
	for _, k := range []string{"type", "description", "enum", "required"} {
		if v, ok := s[k]; ok {
			out[k] = v
		}
	}
	if items, ok := s["items"].(map[string]any); ok {
		out["items"] = ollamaProp(items, depth+1)
	}
	if props := propertiesOf(s); props != nil {
		np := map[string]any{}
		for name, raw := range props {
			child, _ := raw.(map[string]any)
			np[name] = ollamaProp(child, depth+1)
		}
		out["properties"] = np
	}
	return out
}

// ArgsError is tool-call arguments that are not JSON, with where the
// syntax breaks.
type ArgsError struct {
	Offset int64 // byte offset of the error, from 0; -1 when unknown
	Err    error
}

func (e *ArgsError) Error() string {
	if e.Offset >= 0 {
		return fmt.Sprintf("arguments: not valid JSON at byte %d: %v", e.Offset, e.Err)
	}
	return "arguments: not valid JSON: " + e.Err.Error()
}

func (e *ArgsError) Unwrap() error { return e.Err }

// ParseModelArgs reads tool-call arguments as models send them: "" (or
// only white space, or null) for none; a JSON object; or that object
// encoded once more as a JSON string, as some models and client libraries
// pass OpenAI's string-typed "arguments" field on. A syntax error says at
// which byte. The result is a JSON object.
func ParseModelArgs(raw string) (json.RawMessage, error) {
	t := strings.TrimSpace(raw)
	if t == "" || t == "null" {
		return json.RawMessage("{}"), nil
	}
	var v any
	if err := json.Unmarshal([]byte(t), &v); err != nil {
		return nil, argsError(err, int64(len(raw)-len(strings.TrimLeft(raw, " \t\r\n"))))
	}
	if s, ok := v.(string); ok {
		inner := strings.TrimSpace(s)
		if inner == "" {
			return json.RawMessage("{}"), nil
		}
		if err := json.Unmarshal([]byte(inner), &v); err != nil {
			e := argsError(err, 0)
			e.Err = fmt.Errorf("in the JSON string's content: %w", e.Err)
			return nil, e
		}
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, &ArgsError{Offset: -1, Err: fmt.Errorf("want a JSON object, got %s", jsonType(v))}
	}
	return json.Marshal(v)
}

func argsError(err error, lead int64) *ArgsError {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return &ArgsError{Offset: lead + se.Offset, Err: err}
	}
	var ue *json.UnmarshalTypeError
	if errors.As(err, &ue) {
		return &ArgsError{Offset: lead + ue.Offset, Err: err}
	}
	return &ArgsError{Offset: -1, Err: err}
}

// StripNulls removes from args (a JSON object) the members whose value is
// null where the tool's schema does not allow null: what a model in strict
// mode sends for an optional argument it does not give (see
// StrictSchema). Nested objects (properties, items) are walked too.
func StripNulls(params, args json.RawMessage) (json.RawMessage, error) {
	var schema map[string]any
	if json.Unmarshal(params, &schema) != nil || schema == nil {
		return args, nil
	}
	var v any
	if err := json.Unmarshal(args, &v); err != nil {
		return nil, err
	}
	return json.Marshal(stripNulls(schema, v, 0))
}

func stripNulls(s map[string]any, v any, depth int) any {
	if depth > maxSchemaDepth || s == nil {
		return v
	}
	switch x := v.(type) {
	case map[string]any:
		props := propertiesOf(s)
		for k, e := range x {
			ps, _ := props[k].(map[string]any)
			if e == nil && !allowsNull(ps) {
				delete(x, k)
				continue
			}
			x[k] = stripNulls(ps, e, depth+1)
		}
	case []any:
		items, _ := s["items"].(map[string]any)
		for i, e := range x {
			x[i] = stripNulls(items, e, depth+1)
		}
	}
	return v
}

// allowsNull reports whether a property schema (nil: none, anything goes)
// names null among its types.
func allowsNull(s map[string]any) bool {
	if s == nil {
		return false
	}
	switch t := s["type"].(type) {
	case string:
		return t == "null"
	case []any:
		for _, e := range t {
			if e == "null" {
				return true
			}
		}
		return false
	}
	if list, ok := s["anyOf"].([]any); ok {
		for _, e := range list {
			if m, ok := e.(map[string]any); ok && allowsNull(m) {
				return true
			}
		}
		return false
	}
	_, typed := s["type"]
	return !typed && s["enum"] == nil && s["const"] == nil && s["$ref"] == nil
}
