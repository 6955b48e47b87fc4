package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
)

// Schema is a compiled JSON schema of a tool's arguments.
//
// Validation is google/jsonschema-go's (the validator the MCP SDK uses for
// the same schemas). It stops at the first failure and names schema paths,
// so when it says no, explain walks the schema over the arguments once more
// to tell users which argument is wrong in their terms. explain never
// decides validity: a call passes or fails on the library's word alone.
type Schema struct {
	root     *jsonschema.Schema
	resolved *jsonschema.Resolved
}

// maxSchemaDepth bounds how deeply subschemas may nest. A schema can come
// from inside the sandbox (a registered tool): the checks below recurse, so
// an adversarial nesting must end in an error, not a deep stack.
const maxSchemaDepth = 64

// CompileSchema compiles a tool's parameters schema. An empty schema means
// "an object with any properties". The schema must describe a JSON object,
// as function calling requires.
func CompileSchema(name string, raw json.RawMessage) (*Schema, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		raw = json.RawMessage(`{"type":"object"}`)
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("parameters: not valid JSON: %v", err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, errors.New("parameters: must be a JSON schema object")
	}
	if t, ok := obj["type"]; ok && t != "object" {
		return nil, errors.New(`parameters: "type" must be "object" (tool arguments are a JSON object)`)
	}
	var root jsonschema.Schema
	if err := json.Unmarshal(raw, &root); err != nil {
		return nil, fmt.Errorf("parameters: invalid JSON schema: %v", err)
	}
	if err := checkSchema(&root, "", 0); err != nil {
		return nil, fmt.Errorf("parameters: invalid JSON schema: %v", err)
	}
	resolved, err := root.Resolve(&jsonschema.ResolveOptions{
		BaseURI: "nsbox:///tools/" + url.PathEscape(name) + ".json",
		// A schema (possibly registered from inside the sandbox) must not
		// make the worker read files or reach the network through "$ref":
		// every reference outside the schema itself is refused.
		Loader: func(u *url.URL) (*jsonschema.Schema, error) {
			return nil, fmt.Errorf("external schema references are not allowed (%s)", u.Redacted())
		},
	})
	if err != nil {
		return nil, fmt.Errorf("parameters: invalid JSON schema: %s", strings.ReplaceAll(err.Error(), "nsbox:///tools/", ""))
	}
	return &Schema{root: &root, resolved: resolved}, nil
}

// jsonTypes are the type names JSON Schema knows. The validator accepts any
// string there and then fails every call; a tool author should hear about a
// typo when the tool is registered instead.
var jsonTypes = map[string]bool{
	"null": true, "boolean": true, "object": true, "array": true,
	"number": true, "integer": true, "string": true,
}

// checkSchema rejects what the validator would accept but can never mean
// anything: unknown type names and nesting beyond maxSchemaDepth.
func checkSchema(s *jsonschema.Schema, at string, depth int) error {
	if s == nil {
		return nil
	}
	if depth > maxSchemaDepth {
		return fmt.Errorf("%s: nested more than %d levels deep", where(at), maxSchemaDepth)
	}
	for _, t := range append([]string{s.Type}, s.Types...) {
		if t != "" && !jsonTypes[t] {
			return fmt.Errorf("%s: unknown type %q (want one of null, boolean, object, array, number, integer, string)", where(at), t)
		}
	}
	var err error
	visit := func(key string, c *jsonschema.Schema) {
		if err == nil {
			err = checkSchema(c, at+"/"+key, depth+1)
		}
	}
	for _, group := range []struct {
		key string
		m   map[string]*jsonschema.Schema
	}{
		{"properties", s.Properties}, {"patternProperties", s.PatternProperties},
		{"$defs", s.Defs}, {"definitions", s.Definitions},
		{"dependentSchemas", s.DependentSchemas}, {"dependencies", s.DependencySchemas},
	} {
		for _, k := range sortedKeys(group.m) {
			visit(group.key+"/"+k, group.m[k])
		}
	}
	type named struct {
		key string
		s   *jsonschema.Schema
	}
	var children []named
	for _, list := range []struct {
		key string
		l   []*jsonschema.Schema
	}{{"allOf", s.AllOf}, {"anyOf", s.AnyOf}, {"oneOf", s.OneOf}, {"prefixItems", s.PrefixItems}, {"items", s.ItemsArray}} {
		for i, c := range list.l {
			children = append(children, named{list.key + "/" + strconv.Itoa(i), c})
		}
	}
	children = append(children,
		named{"items", s.Items}, named{"additionalItems", s.AdditionalItems},
		named{"additionalProperties", s.AdditionalProperties}, named{"propertyNames", s.PropertyNames},
		named{"unevaluatedItems", s.UnevaluatedItems}, named{"unevaluatedProperties", s.UnevaluatedProperties},
		named{"contains", s.Contains}, named{"not", s.Not}, named{"if", s.If}, named{"then", s.Then},
		named{"else", s.Else}, named{"contentSchema", s.ContentSchema})
	for _, c := range children {
		visit(c.key, c.s)
	}
	return err
}

func where(at string) string {
	if at == "" {
		return "the schema"
	}
	return at[1:]
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
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

// maxArgumentErrors is how many problems one answer names.
const maxArgumentErrors = 3

// DecodeArgs parses a tool call's arguments: absent or null means {}.
func DecodeArgs(raw json.RawMessage) (any, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return map[string]any{}, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
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
	err := s.resolved.Validate(v)
	if err == nil {
		return nil
	}
	x := explainer{root: s.root, seen: map[string]bool{}}
	x.explain(s.root, v, "", 0)
	if len(x.out) == 0 {
		// A keyword explain does not cover (pattern, minimum, oneOf, ...):
		// the validator's own words, without its schema-path prefixes.
		return ArgumentErrors{{Field: fieldFromSchemaPath(err.Error()), Msg: innermost(err.Error())}}
	}
	sort.SliceStable(x.out, func(i, j int) bool { return x.out[i].Field < x.out[j].Field })
	if len(x.out) > maxArgumentErrors {
		x.out = x.out[:maxArgumentErrors]
	}
	return x.out
}

// explainer collects messages for the common mistakes: a wrong type, a
// missing or unknown argument, a value outside an enum, at any depth of
// properties and items.
type explainer struct {
	root *jsonschema.Schema
	out  ArgumentErrors
	seen map[string]bool
}

func (x *explainer) add(field, msg string) {
	e := &ArgumentError{Field: field, Msg: msg}
	if k := e.Error(); !x.seen[k] {
		x.seen[k] = true
		x.out = append(x.out, e)
	}
}

func (x *explainer) explain(s *jsonschema.Schema, v any, field string, depth int) {
	if s == nil || depth > maxSchemaDepth {
		return
	}
	if s.Ref != "" {
		x.explain(x.local(s.Ref), v, field, depth+1)
	}
	if want := schemaTypes(s); len(want) > 0 && !typeMatches(want, v) {
		x.add(field, fmt.Sprintf("expected %s, got %s", strings.Join(want, " or "), jsonType(v)))
		return // the rest of the schema is about a value of another type
	}
	if len(s.Enum) > 0 && !inEnum(s.Enum, v) {
		want := make([]string, 0, len(s.Enum))
		for _, w := range s.Enum {
			b, _ := json.Marshal(w)
			want = append(want, string(b))
		}
		x.add(field, "must be one of "+strings.Join(want, ", "))
	}
	for _, c := range s.AllOf {
		x.explain(c, v, field, depth+1)
	}
	switch v := v.(type) {
	case map[string]any:
		for _, name := range s.Required {
			if _, ok := v[name]; !ok {
				x.add(joinField(field, name), "is required")
			}
		}
		for _, name := range sortedKeys(v) {
			child := joinField(field, name)
			if ps, ok := s.Properties[name]; ok {
				x.explain(ps, v[name], child, depth+1)
				continue
			}
			if matchesPattern(s.PatternProperties, name) || s.AdditionalProperties == nil {
				continue
			}
			if isFalse(s.AdditionalProperties) {
				x.add(child, "is not a known argument")
				continue
			}
			x.explain(s.AdditionalProperties, v[name], child, depth+1)
		}
	case []any:
		for i, item := range v {
			child := field + "[" + strconv.Itoa(i) + "]"
			switch {
			case i < len(s.PrefixItems):
				x.explain(s.PrefixItems[i], item, child, depth+1)
			case s.Items != nil:
				x.explain(s.Items, item, child, depth+1)
			}
		}
	}
}

// local finds the target of a reference inside the schema ("#",
// "#/$defs/NAME", "#/definitions/NAME"); other forms are not explained
// (nil), only validated.
func (x *explainer) local(ref string) *jsonschema.Schema {
	if ref == "#" {
		return x.root
	}
	if name, ok := strings.CutPrefix(ref, "#/$defs/"); ok {
		return x.root.Defs[name]
	}
	if name, ok := strings.CutPrefix(ref, "#/definitions/"); ok {
		return x.root.Definitions[name]
	}
	return nil
}

func schemaTypes(s *jsonschema.Schema) []string {
	if s.Type != "" {
		return []string{s.Type}
	}
	return s.Types
}

func typeMatches(want []string, v any) bool {
	got := jsonType(v)
	for _, w := range want {
		switch {
		case w == got:
			return true
		case w == "integer" && got == "number":
			if f, ok := v.(float64); ok && f == float64(int64(f)) {
				return true
			}
		}
	}
	return false
}

func inEnum(enum []any, v any) bool {
	for _, e := range enum {
		if reflect.DeepEqual(e, v) {
			return true
		}
	}
	return false
}

// isFalse reports whether s is the schema false (nothing validates), which
// the library represents as {"not": {}}.
func isFalse(s *jsonschema.Schema) bool {
	b, err := json.Marshal(s)
	return err == nil && string(b) == "false"
}

func matchesPattern(patterns map[string]*jsonschema.Schema, name string) bool {
	for p := range patterns {
		// The patterns compiled when the schema was resolved.
		if re, err := regexp.Compile(p); err == nil && re.MatchString(name) {
			return true
		}
	}
	return false
}

// schemaPathPrefix is how the validator introduces each level of a failure
// ("validating /properties/a: minimum: ...").
var schemaPathPrefix = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`validating ([^:]*): `) })

// innermost drops the validator's "validating <schema path>: " prefixes.
func innermost(msg string) string {
	if loc := schemaPathPrefix().FindAllStringIndex(msg, -1); len(loc) > 0 {
		return msg[loc[len(loc)-1][1]:]
	}
	return msg
}

// fieldFromSchemaPath turns the innermost schema path the validator names
// ("/properties/env/properties/HOME") into an argument name ("env.HOME").
// Paths through anything but properties give "", the arguments as a whole.
func fieldFromSchemaPath(msg string) string {
	m := schemaPathPrefix().FindAllStringSubmatch(msg, -1)
	if len(m) == 0 {
		return ""
	}
	parts := strings.Split(strings.TrimPrefix(m[len(m)-1][1], "/"), "/")
	var names []string
	for i := 0; i+1 < len(parts); i += 2 {
		if parts[i] != "properties" {
			return ""
		}
		names = append(names, strings.NewReplacer("~1", "/", "~0", "~").Replace(parts[i+1]))
	}
	return strings.Join(names, ".")
}

func joinField(parent, child string) string {
	if parent == "" {
		return child
	}
	return parent + "." + child
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
