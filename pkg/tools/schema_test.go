package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

const testSchema = `{
  "type": "object",
  "properties": {
    "name":  {"type": "string", "pattern": "^[a-z]+$"},
    "count": {"type": "integer", "minimum": 1},
    "mode":  {"enum": ["fast", "slow"]},
    "env":   {"type": "object", "properties": {"HOME": {"type": "string"}}, "required": ["HOME"], "additionalProperties": {"type": "string"}},
    "argv":  {"type": "array", "items": {"type": "string"}},
    "ref":   {"$ref": "#/$defs/port"}
  },
  "$defs": {"port": {"type": "integer", "maximum": 65535}},
  "required": ["name"],
  "additionalProperties": false
}`

func TestSchemaMessages(t *testing.T) {
	s, err := CompileSchema("t", json.RawMessage(testSchema))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ args, want string }{
		{`{"name":"a"}`, ""},
		{`{"name":"a","count":3,"mode":"fast","env":{"HOME":"/h","X":"y"},"argv":["a","b"],"ref":80}`, ""},
		{`{}`, `argument "name" is required`},
		{`{"name":7}`, `argument "name": expected string, got number`},
		{`{"name":"a","count":1.5}`, `argument "count": expected integer, got number`},
		{`{"name":"a","mode":"medium"}`, `argument "mode": must be one of "fast", "slow"`},
		{`{"name":"a","bogus":1}`, `argument "bogus" is not a known argument`},
		{`{"name":"a","env":{}}`, `argument "env.HOME" is required`},
		{`{"name":"a","env":{"HOME":"/h","X":1}}`, `argument "env.X": expected string, got number`},
		{`{"name":"a","argv":["x",3]}`, `argument "argv[1]": expected string, got number`},
		{`{"name":"a","ref":"80"}`, `argument "ref": expected integer, got string`},
		// Bounds and patterns in words for users.
		{`{"name":"A"}`, `argument "name": must match the regular expression "^[a-z]+$", got "A"`},
		{`{"name":"a","count":0}`, `argument "count": must be an integer ≥ 1, got 0`},
		{`{"name":"a","ref":70000}`, `argument "ref": must be an integer ≤ 65535, got 70000`},
		// Several problems at once: sorted by argument, at most three.
		{`{"bogus":1,"count":"x","mode":1,"name":2}`, `argument "bogus" is not a known argument; argument "count": expected integer, got string; argument "mode": must be one of`},
	} {
		err := s.Validate(mustDecode(t, tc.args))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: unexpected error %v", tc.args, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want %q", tc.args, err, tc.want)
		}
		var ae ArgumentErrors
		if err != nil && !errors.As(err, &ae) {
			t.Errorf("%s: %T is not ArgumentErrors", tc.args, err)
		}
	}
}

func TestSchemaRejectsNonObjects(t *testing.T) {
	s, err := CompileSchema("t", nil)
	if err != nil {
		t.Fatal(err)
	}
	for args, want := range map[string]string{`[1]`: "got array", `"x"`: "got string", `3`: "got number"} {
		if err := s.Validate(mustDecode(t, args)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", args, err, want)
		}
	}
	if err := s.Validate(mustDecode(t, `{"anything":[1,{"x":null}]}`)); err != nil {
		t.Errorf("the empty schema refused an object: %v", err)
	}
}

func TestCompileSchemaRefusals(t *testing.T) {
	deep := strings.Repeat(`{"items":`, maxSchemaDepth+2) + `{}` + strings.Repeat(`}`, maxSchemaDepth+2)
	for name, tc := range map[string]struct{ schema, want string }{
		"not JSON":        {`{"type":`, "not valid JSON"},
		"not an object":   {`[1]`, "must be a JSON schema object"},
		"array type":      {`{"type":"array"}`, `"type" must be "object"`},
		"unknown type":    {`{"properties":{"a":{"type":"strnig"}}}`, `properties/a: unknown type "strnig"`},
		"unknown in list": {`{"properties":{"a":{"type":["string","nope"]}}}`, `unknown type "nope"`},
		"remote ref":      {`{"properties":{"a":{"$ref":"https://example.com/s.json"}}}`, "external schema references are not allowed"},
		"file ref":        {`{"$ref":"file:///etc/passwd"}`, "external schema references are not allowed"},
		"dangling ref":    {`{"properties":{"a":{"$ref":"#/$defs/none"}}}`, "invalid JSON schema"},
		"bad pattern":     {`{"properties":{"a":{"type":"string","pattern":"("}}}`, "pattern"},
		"too deep":        {`{"properties":{"a":` + deep + `}}`, "nested more than"},
	} {
		_, err := CompileSchema("t", json.RawMessage(tc.schema))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "parameters: ") {
			t.Errorf("%s: got %v, want an error containing %q", name, err, tc.want)
		}
	}
}

func mustDecode(t *testing.T, s string) any {
	t.Helper()
	v, err := DecodeArgs(json.RawMessage(s))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func FuzzSchemaValidate(f *testing.F) {
	f.Add(testSchema, `{"name":"a","env":{"HOME":"x"}}`)
	f.Add(`{"properties":{"a":{"anyOf":[{"type":"string"},{"type":"array","items":{"$ref":"#"}}]}}}`, `{"a":[{"a":"x"}]}`)
	f.Fuzz(func(t *testing.T, schema, args string) {
		s, err := CompileSchema("f", json.RawMessage(schema))
		if err != nil {
			return
		}
		v, err := DecodeArgs(json.RawMessage(args))
		if err != nil {
			return
		}
		// Whatever the input: no panic, and an answer that is nil or names
		// at least one problem.
		if err := s.Validate(v); err != nil && err.Error() == "" {
			t.Fatal("an empty error")
		}
	})
}

// Messages are for users: no Go struct names, no "-1/1 is less than
// 1.000000", and a huge argument is never echoed back whole.
func TestArgumentMessagesForUsers(t *testing.T) {
	r := NewBuiltinRegistry()
	env := &hostEnv{ws: t.TempDir()}
	huge := strings.Repeat("x", 7<<20)
	for _, tc := range []struct{ tool, args, want string }{
		{"read_file", `{"path":"a","start_line":1e30}`, `argument "start_line": must be an integer ≤ 9007199254740991, got 1e+30`},
		{"read_file", `{"path":"a","end_line":-1}`, `argument "end_line": must be an integer ≥ 1, got -1`},
		{"read_file", `{"path":"a","start_line":0}`, `argument "start_line": must be an integer ≥ 1, got 0`},
		{"run_command", `{"command":"x","timeout":0}`, `argument "timeout": must be a number > 0 and ≤ 86400, got 0`},
		{"list_directory", `{"max_entries":100000}`, `argument "max_entries": must be an integer from 1 to 10000, got 100000`},
		{"run_command", `{"command":""}`, `argument "command": must not be empty`},
		{"run_command", `{"argv":[]}`, `argument "argv": must have at least 1 item, got 0`},
		{"run_command", `{"command":"` + huge + `"}`, `argument "command": must be at most 65536 characters long, got 7340032`},
		{"read_file", `{"path":"a","` + huge + `":1}`, `…[7340032 bytes in all]" is not a known argument`},
		{"search_files", `{"pattern":"` + strings.Repeat("(", 900) + `"}`, `argument "pattern": invalid regular expression: error parsing regexp: missing closing )`},
	} {
		res := call(t, r, env, tc.tool, tc.args)
		msg := errText(res)
		if res.Success || !strings.Contains(msg, tc.want) {
			t.Errorf("%s %.60s: got %.300q, want %q", tc.tool, tc.args, msg, tc.want)
		}
		if len(msg) > 1024 || strings.Contains(msg, "readFileArgs") || strings.Contains(msg, "/1 is") {
			t.Errorf("%s %.60s: message of %d bytes: %.300q", tc.tool, tc.args, len(msg), msg)
		}
	}
}

// Keywords explained in words elsewhere (schemas of run-time tools): the
// validator's message, with quoted values clipped.
func TestArgumentMessagesClipQuotedValues(t *testing.T) {
	s, err := CompileSchema("t", json.RawMessage(`{"type":"object","properties":{
	  "a": {"type":"string","not":{"const":"x"},"anyOf":[{"maxLength":1},{"const":"yy"}]},
	  "e": {"enum":[`+strings.Repeat(`"`+strings.Repeat("v", 300)+`",`, 30)+`"w"]},
	  "p": {"type":"string","pattern":"^[a-z]+$"}
	}}`))
	if err != nil {
		t.Fatal(err)
	}
	huge := strings.Repeat("é", 1<<20)
	for args, want := range map[string]string{
		`{"a":"` + huge + `"}`: `bytes in all]`,
		`{"e":"q"}`:            `(31 values in all)`,
		`{"p":"` + huge + `"}`: `argument "p": must match the regular expression "^[a-z]+$", got "éé`,
	} {
		err := s.Validate(mustDecode(t, args))
		if err == nil || !strings.Contains(err.Error(), want) || len(err.Error()) > 8<<10 || !utf8.ValidString(err.Error()) {
			t.Errorf("%.40s: got %d bytes %.400q, want %q", args, len(fmt.Sprint(err)), err, want)
		}
	}
}
