package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Schema is a compiled JSON schema of a tool's arguments.
type Schema struct {
	s *jsonschema.Schema
}

// noLoader refuses every external reference: a schema (possibly registered
// from inside the sandbox) must not make the worker read files or reach the
// network through "$ref".
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external schema references are not allowed (%s)", url)
}

// CompileSchema compiles a tool's parameters schema. An empty schema means
// "an object with any properties". The schema must describe a JSON object,
// as function calling requires.
func CompileSchema(name string, raw json.RawMessage) (*Schema, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		raw = json.RawMessage(`{"type":"object"}`)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("parameters: not valid JSON: %v", err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, errors.New("parameters: must be a JSON schema object")
	}
	if t, ok := obj["type"]; ok && t != "object" {
		return nil, errors.New(`parameters: "type" must be "object" (tool arguments are a JSON object)`)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	c.DefaultDraft(jsonschema.Draft2020)
	url := "nsbox:///tools/" + name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("parameters: %v", err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("parameters: invalid JSON schema: %s", schemaErrText(err))
	}
	return &Schema{s: s}, nil
}

func schemaErrText(err error) string {
	msg := err.Error()
	// The library's messages carry our internal URL; users never gave it.
	msg = strings.ReplaceAll(msg, "nsbox:///tools/", "")
	return msg
}

// ArgumentError is an argument that does not match the tool's schema.
type ArgumentError struct {
	Field string // "" for the arguments as a whole
	Msg   string
}

func (e *ArgumentError) Error() string {
	switch {
	case e.Field == "":
		return "arguments: " + e.Msg
	case strings.HasPrefix(e.Msg, "is "):
		return fmt.Sprintf("argument %q %s", e.Field, e.Msg) // argument "path" is required
	}
	return fmt.Sprintf("argument %q: %s", e.Field, e.Msg)
}

// ArgumentErrors are all the problems found (at most a few are kept).
type ArgumentErrors []*ArgumentError

func (es ArgumentErrors) Error() string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "; ")
}

// DecodeArgs parses a tool call's arguments: absent or null means {}.
func DecodeArgs(raw json.RawMessage) (any, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return map[string]any{}, nil
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, &ArgumentError{Msg: "not valid JSON: " + err.Error()}
	}
	return v, nil
}

// Validate checks decoded arguments (from DecodeArgs) and returns nil or
// ArgumentErrors that name each bad field.
func (s *Schema) Validate(v any) error {
	if _, ok := v.(map[string]any); !ok {
		return ArgumentErrors{{Msg: "expected an object, got " + jsonType(v)}}
	}
	err := s.s.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return ArgumentErrors{{Msg: err.Error()}}
	}
	var out ArgumentErrors
	seen := map[string]bool{}
	for _, leaf := range leaves(ve, nil) {
		for _, ae := range describe(leaf) {
			k := ae.Error()
			if !seen[k] {
				seen[k] = true
				out = append(out, ae)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Field < out[j].Field })
	if len(out) > 3 {
		out = out[:3]
	}
	if len(out) == 0 {
		return ArgumentErrors{{Msg: ve.Error()}}
	}
	return out
}

func leaves(e *jsonschema.ValidationError, acc []*jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(e.Causes) == 0 {
		return append(acc, e)
	}
	for _, c := range e.Causes {
		acc = leaves(c, acc)
	}
	return acc
}

var printer = message.NewPrinter(language.English)

// describe turns one leaf error into messages for users: the field is the
// instance location ("path", "argv[0]", "env.HOME").
func describe(e *jsonschema.ValidationError) []*ArgumentError {
	field := fieldName(e.InstanceLocation)
	switch k := e.ErrorKind.(type) {
	case *kind.Type:
		return []*ArgumentError{{Field: field, Msg: fmt.Sprintf("expected %s, got %s", strings.Join(k.Want, " or "), k.Got)}}
	case *kind.Required:
		out := make([]*ArgumentError, 0, len(k.Missing))
		for _, m := range k.Missing {
			out = append(out, &ArgumentError{Field: joinField(field, m), Msg: "is required"})
		}
		return out
	case *kind.AdditionalProperties:
		out := make([]*ArgumentError, 0, len(k.Properties))
		for _, p := range k.Properties {
			out = append(out, &ArgumentError{Field: joinField(field, p), Msg: "is not a known argument"})
		}
		return out
	case *kind.Enum:
		want := make([]string, 0, len(k.Want))
		for _, w := range k.Want {
			b, _ := json.Marshal(w)
			want = append(want, string(b))
		}
		return []*ArgumentError{{Field: field, Msg: "must be one of " + strings.Join(want, ", ")}}
	}
	return []*ArgumentError{{Field: field, Msg: e.ErrorKind.LocalizedString(printer)}}
}

func fieldName(loc []string) string {
	var b strings.Builder
	for _, p := range loc {
		if isIndex(p) && b.Len() > 0 {
			b.WriteString("[" + p + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	return b.String()
}

func joinField(parent, child string) string {
	if parent == "" {
		return child
	}
	return parent + "." + child
}

func isIndex(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number, float64, int:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}
