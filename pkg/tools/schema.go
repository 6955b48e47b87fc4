package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

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
	// patternInsts is the estimated program size of all the schema's
	// regular expressions (checkPattern), charged to the tool budget.
	patternInsts int
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
	insts := 0
	if err := checkSchema(&root, "", 0, &insts); err != nil {
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
	return &Schema{root: &root, resolved: resolved, patternInsts: insts}, nil
}

// jsonTypes are the type names JSON Schema knows. The validator accepts any
// string there and then fails every call; a tool author should hear about a
// typo when the tool is registered instead.
var jsonTypes = map[string]bool{
	"null": true, "boolean": true, "object": true, "array": true,
	"number": true, "integer": true, "string": true,
}

// checkSchema rejects what the validator would accept but can never mean
// anything, unknown type names and nesting beyond maxSchemaDepth, and
// regular expressions past checkPattern's bounds (before Resolve compiles
// them), adding their estimated program sizes to *insts.
func checkSchema(s *jsonschema.Schema, at string, depth int, insts *int) error {
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
	patterns := append([]string{s.Pattern}, sortedKeys(s.PatternProperties)...)
	for _, p := range patterns {
		if p == "" {
			continue
		}
		n, err := checkPattern(p)
		if err != nil {
			return fmt.Errorf("%s: %v", where(at), err)
		}
		// Saturating: a schema of many patterns ends in the budget's
		// error, never in an overflow.
		*insts = min(*insts+n, RuntimeToolBudget/patternInstCost+1)
	}
	var err error
	visit := func(key string, c *jsonschema.Schema) {
		if err == nil {
			err = checkSchema(c, at+"/"+key, depth+1, insts)
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
	// Field names can come from the arguments (an unknown key): clipped
	// like any other value from the caller.
	field := clipString(e.Field, maxQuoted)
	switch {
	case e.Field == "":
		return "arguments: " + e.Msg
	case strings.HasPrefix(e.Msg, "is "):
		return fmt.Sprintf("argument %q %s", field, e.Msg) // argument "path" is required
	}
	return fmt.Sprintf("argument %q: %s", field, e.Msg)
}

// Bounds of what an argument error quotes. The message goes back into a
// model's context (and over JSON-RPC): a 7 MB argument must not come back
// whole in it.
const (
	maxQuoted     = 200  // bytes of one quoted value, field name or enum value
	maxEnumShown  = 20   // enum values listed
	maxMessageLen = 2048 // bytes of one problem's message
)

// clipString cuts s to at most n bytes on a rune boundary, with a marker
// that says how long it was.
func clipString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("…[%d bytes in all]", len(s))
}

// quotedString matches a Go-quoted string in a validator's message.
var quotedString = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`"(?:[^"\\]|\\.)*"`) })

// clipMessage cuts every quoted value in msg (the validator quotes the
// argument it refuses) to maxQuoted bytes, and msg itself to maxMessageLen.
func clipMessage(msg string) string {
	msg = quotedString().ReplaceAllStringFunc(msg, func(q string) string {
		if len(q) <= maxQuoted+2 {
			return q
		}
		cut := maxQuoted + 1
		for cut > 1 && !utf8.RuneStart(q[cut]) {
			cut--
		}
		body := q[1:cut]
		return fmt.Sprintf(`"%s…"[%d bytes in all]`, body, len(q)-2)
	})
	return clipString(msg, maxMessageLen)
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
		// Security (context flooding): quoted values are clipped.
		return ArgumentErrors{{Field: fieldFromSchemaPath(err.Error()), Msg: clipMessage(innermost(err.Error()))}}
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
		want := make([]string, 0, min(len(s.Enum), maxEnumShown))
		for _, w := range s.Enum[:min(len(s.Enum), maxEnumShown)] {
			b, _ := json.Marshal(w)
			want = append(want, clipString(string(b), maxQuoted))
		}
		msg := "must be one of " + strings.Join(want, ", ")
		if len(s.Enum) > maxEnumShown {
			msg += fmt.Sprintf(", … (%d values in all)", len(s.Enum))
		}
		x.add(field, msg)
	}
	x.bounds(s, v, field)
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

// bounds explains the numeric, length, size and pattern keywords in words
// for users ("must be an integer ≥ 1, got -1"), rather than the
// validator's ("minimum: -1/1 is less than 1.000000"). Values are not
// quoted back whole.
func (x *explainer) bounds(s *jsonschema.Schema, v any, field string) {
	switch v := v.(type) {
	case float64:
		if (s.Minimum != nil && v < *s.Minimum) || (s.ExclusiveMinimum != nil && v <= *s.ExclusiveMinimum) ||
			(s.Maximum != nil && v > *s.Maximum) || (s.ExclusiveMaximum != nil && v >= *s.ExclusiveMaximum) {
			x.add(field, fmt.Sprintf("must be %s, got %s", numberRange(s, v), fmtNumber(v)))
		}
	case string:
		n := utf8.RuneCountInString(v)
		switch {
		case s.MinLength != nil && n < *s.MinLength && *s.MinLength == 1:
			x.add(field, "must not be empty")
		case s.MinLength != nil && n < *s.MinLength:
			x.add(field, fmt.Sprintf("must be at least %d characters long, got %d", *s.MinLength, n))
		case s.MaxLength != nil && n > *s.MaxLength:
			x.add(field, fmt.Sprintf("must be at most %d characters long, got %d", *s.MaxLength, n))
		}
		if s.Pattern != "" {
			if re, err := regexp.Compile(s.Pattern); err == nil && !re.MatchString(v) {
				x.add(field, fmt.Sprintf("must match the regular expression %s, got %s", clipString(strconv.Quote(s.Pattern), maxQuoted), clipString(strconv.Quote(v), maxQuoted)))
			}
		}
	case []any:
		switch n := len(v); {
		case s.MinItems != nil && n < *s.MinItems:
			x.add(field, fmt.Sprintf("must have at least %d %s, got %d", *s.MinItems, plural(*s.MinItems, "item"), n))
		case s.MaxItems != nil && n > *s.MaxItems:
			x.add(field, fmt.Sprintf("must have at most %d %s, got %d", *s.MaxItems, plural(*s.MaxItems, "item"), n))
		}
	case map[string]any:
		switch n := len(v); {
		case s.MinProperties != nil && n < *s.MinProperties:
			x.add(field, fmt.Sprintf("must have at least %d %s, got %d", *s.MinProperties, plural(*s.MinProperties, "property"), n))
		case s.MaxProperties != nil && n > *s.MaxProperties:
			x.add(field, fmt.Sprintf("must have at most %d %s, got %d", *s.MaxProperties, plural(*s.MaxProperties, "property"), n))
		}
	}
}

// numberRange says what a numeric schema accepts, for a value v it
// refuses: both bounds when both are of a human size ("an integer from 1
// to 10000", "a number > 0 and ≤ 86400"), else the bound v breaks ("an
// integer ≥ 1").
func numberRange(s *jsonschema.Schema, v float64) string {
	what := "a number"
	for _, t := range schemaTypes(s) {
		if t == "integer" {
			what = "an integer"
		}
	}
	human := func(b *float64) bool { return b != nil && math.Abs(*b) < maxSafeInteger }
	lo, hi := s.Minimum, s.Maximum
	loEx, hiEx := s.ExclusiveMinimum, s.ExclusiveMaximum
	// Both sides, when both are bounded in human sizes.
	both := (human(lo) || human(loEx)) && (human(hi) || human(hiEx))
	if both && lo != nil && hi != nil && loEx == nil && hiEx == nil {
		return fmt.Sprintf("%s from %s to %s", what, fmtNumber(*lo), fmtNumber(*hi))
	}
	var conds []string
	if lo != nil && (both || v < *lo) {
		conds = append(conds, "≥ "+fmtNumber(*lo))
	}
	if loEx != nil && (both || v <= *loEx) {
		conds = append(conds, "> "+fmtNumber(*loEx))
	}
	if hi != nil && (both || v > *hi) {
		conds = append(conds, "≤ "+fmtNumber(*hi))
	}
	if hiEx != nil && (both || v >= *hiEx) {
		conds = append(conds, "< "+fmtNumber(*hiEx))
	}
	return what + " " + strings.Join(conds, " and ")
}

// maxSafeInteger is 2^53-1, the largest integer a JSON number holds exactly.
const maxSafeInteger = 1<<53 - 1

func fmtNumber(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) <= maxSafeInteger {
		return strconv.FormatFloat(f, 'f', -1, 64) // 9007199254740991, not 9.007199254740991e+15
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	if strings.HasSuffix(word, "y") {
		return word[:len(word)-1] + "ies"
	}
	return word + "s"
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
			// As the validator: a number without a fractional part,
			// whatever its size (1e30 too).
			if f, ok := v.(float64); ok && f == math.Trunc(f) && !math.IsInf(f, 0) {
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
