package seccomp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// The profile is decoded in two passes: the bytes into a jsonValue tree that
// keeps every object key in document order, then the tree into a Profile
// with the path of every field at hand. encoding/json's struct decoding is
// not used because it silently keeps the last of two duplicate keys (a
// profile with "action" twice would mean what its last line says, whatever
// a reviewer read first) and its unknown-field error does not say where.

type jsonKind uint8

const (
	jsonNull jsonKind = iota
	jsonBool
	jsonNumber
	jsonString
	jsonArray
	jsonObject
)

func (k jsonKind) String() string {
	switch k {
	case jsonNull:
		return "null"
	case jsonBool:
		return "a boolean"
	case jsonNumber:
		return "a number"
	case jsonString:
		return "a string"
	case jsonArray:
		return "a list"
	default:
		return "an object"
	}
}

type jsonValue struct {
	kind  jsonKind
	str   string      // jsonString
	num   json.Number // jsonNumber
	items []*jsonValue
	keys  []string // jsonObject, in document order, duplicates kept
	vals  []*jsonValue
}

// maxJSONDepth bounds nesting. A profile is at most 5 levels deep
// (syscalls[].args[].op); the bound keeps hostile input from recursing deeply.
const maxJSONDepth = 16

func parseJSON(data []byte) (*jsonValue, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := readJSONValue(dec, 0)
	if err != nil {
		return nil, jsonErrorAt(data, dec, err)
	}
	if tok, err := dec.Token(); err != io.EOF {
		if err == nil {
			err = fmt.Errorf("unexpected %v after the profile object", tok)
		}
		return nil, jsonErrorAt(data, dec, err)
	}
	return v, nil
}

func readJSONValue(dec *json.Decoder, depth int) (*jsonValue, error) {
	if depth > maxJSONDepth {
		return nil, errors.New("nested too deeply")
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case nil:
		return &jsonValue{kind: jsonNull}, nil
	case bool:
		return &jsonValue{kind: jsonBool}, nil
	case json.Number:
		return &jsonValue{kind: jsonNumber, num: t}, nil
	case string:
		return &jsonValue{kind: jsonString, str: t}, nil
	case json.Delim:
		switch t {
		case '[':
			v := &jsonValue{kind: jsonArray}
			for dec.More() {
				item, err := readJSONValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				v.items = append(v.items, item)
			}
			if _, err := dec.Token(); err != nil { // ']'
				return nil, err
			}
			return v, nil
		case '{':
			v := &jsonValue{kind: jsonObject}
			for dec.More() {
				ktok, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, ok := ktok.(string)
				if !ok {
					return nil, fmt.Errorf("object key is %v, not a string", ktok)
				}
				val, err := readJSONValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				v.keys = append(v.keys, key)
				v.vals = append(v.vals, val)
			}
			if _, err := dec.Token(); err != nil { // '}'
				return nil, err
			}
			return v, nil
		}
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}

// jsonErrorAt turns a decoding error into "invalid JSON at line L, column C".
func jsonErrorAt(data []byte, dec *json.Decoder, err error) error {
	off := dec.InputOffset()
	var se *json.SyntaxError
	if errors.As(err, &se) {
		off = se.Offset
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		if len(bytes.TrimSpace(data)) == 0 {
			return errors.New("empty document")
		}
		return errors.New("invalid JSON: unexpected end of document")
	}
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	line := 1 + bytes.Count(data[:off], []byte{'\n'})
	col := int(off) - bytes.LastIndexByte(data[:off], '\n')
	return fmt.Errorf("invalid JSON at line %d, column %d: %v", line, col, err)
}

// decoder turns the tree into a Profile; every error names its field.
type decoder struct {
	source string
}

func (d *decoder) fail(field, format string, args ...any) error {
	return &ProfileError{Source: d.source, Field: field, Msg: fmt.Sprintf(format, args...)}
}

func join(field, key string) string {
	if field == "" {
		return key
	}
	return field + "." + key
}

func index(field string, i int) string {
	return field + "[" + strconv.Itoa(i) + "]"
}

// object checks that v is an object with only the allowed keys, each at most
// once, and returns its members. Key matching is exact (case-sensitive):
// "Action" is not "action".
func (d *decoder) object(v *jsonValue, field string, allowed ...string) (map[string]*jsonValue, error) {
	if v.kind != jsonObject {
		return nil, d.fail(field, "must be an object, not %v", v.kind)
	}
	m := make(map[string]*jsonValue, len(v.keys))
	for i, k := range v.keys {
		known := false
		for _, a := range allowed {
			if k == a {
				known = true
				break
			}
		}
		if !known {
			return nil, d.fail(join(field, k), "unknown key %q", k)
		}
		if _, dup := m[k]; dup {
			return nil, d.fail(join(field, k), "key %q appears twice", k)
		}
		m[k] = v.vals[i]
	}
	return m, nil
}

func (d *decoder) str(v *jsonValue, field string) (string, error) {
	if v.kind != jsonString {
		return "", d.fail(field, "must be a string, not %v", v.kind)
	}
	return v.str, nil
}

// strList decodes a list of strings; null means an empty list.
func (d *decoder) strList(v *jsonValue, field string) ([]string, error) {
	if v.kind == jsonNull {
		return nil, nil
	}
	if v.kind != jsonArray {
		return nil, d.fail(field, "must be a list of strings, not %v", v.kind)
	}
	out := make([]string, 0, len(v.items))
	for i, item := range v.items {
		s, err := d.str(item, index(field, i))
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// uint64Val accepts only plain non-negative integers: "1.0", "1e3" and "-1"
// are rejected rather than rounded or wrapped.
func (d *decoder) uint64Val(v *jsonValue, field string, max uint64) (uint64, error) {
	if v.kind != jsonNumber {
		return 0, d.fail(field, "must be a number, not %v", v.kind)
	}
	n, err := strconv.ParseUint(v.num.String(), 10, 64)
	if err != nil {
		return 0, d.fail(field, "%s is not an integer between 0 and %d", v.num, max)
	}
	if n > max {
		return 0, d.fail(field, "%d is larger than %d", n, max)
	}
	return n, nil
}

func (d *decoder) optUint(v *jsonValue, field string, max uint64) (*uint, error) {
	if v.kind == jsonNull {
		return nil, nil
	}
	n, err := d.uint64Val(v, field, max)
	if err != nil {
		return nil, err
	}
	u := uint(n)
	return &u, nil
}

func decodeProfile(data []byte, source string) (*Profile, error) {
	root, err := parseJSON(data)
	if err != nil {
		return nil, &ProfileError{Source: source, Msg: err.Error()}
	}
	d := &decoder{source: source}
	m, err := d.object(root, "", "defaultAction", "defaultErrnoRet", "architectures",
		"archMap", "syscalls", "flags", "listenerPath", "listenerMetadata")
	if err != nil {
		return nil, err
	}
	p := &Profile{Source: source}
	v, ok := m["defaultAction"]
	if !ok {
		return nil, d.fail("defaultAction", "is required")
	}
	s, err := d.str(v, "defaultAction")
	if err != nil {
		return nil, err
	}
	p.DefaultAction = Action(s)
	if v, ok := m["defaultErrnoRet"]; ok {
		if p.DefaultErrnoRet, err = d.optUint(v, "defaultErrnoRet", maxRetData); err != nil {
			return nil, err
		}
	}
	if v, ok := m["architectures"]; ok {
		if p.Architectures, err = d.strList(v, "architectures"); err != nil {
			return nil, err
		}
	}
	if v, ok := m["archMap"]; ok && v.kind != jsonNull {
		if v.kind != jsonArray {
			return nil, d.fail("archMap", "must be a list, not %v", v.kind)
		}
		for i, item := range v.items {
			f := index("archMap", i)
			am, err := d.object(item, f, "architecture", "subArchitectures")
			if err != nil {
				return nil, err
			}
			var e ArchMap
			a, ok := am["architecture"]
			if !ok {
				return nil, d.fail(join(f, "architecture"), "is required")
			}
			if e.Architecture, err = d.str(a, join(f, "architecture")); err != nil {
				return nil, err
			}
			if sa, ok := am["subArchitectures"]; ok {
				if e.SubArchitectures, err = d.strList(sa, join(f, "subArchitectures")); err != nil {
					return nil, err
				}
			}
			p.ArchMap = append(p.ArchMap, e)
		}
	}
	if v, ok := m["syscalls"]; ok && v.kind != jsonNull {
		if v.kind != jsonArray {
			return nil, d.fail("syscalls", "must be a list, not %v", v.kind)
		}
		for i, item := range v.items {
			r, err := d.rule(item, index("syscalls", i))
			if err != nil {
				return nil, err
			}
			p.Syscalls = append(p.Syscalls, r)
		}
	}
	if v, ok := m["flags"]; ok {
		if p.Flags, err = d.strList(v, "flags"); err != nil {
			return nil, err
		}
	}
	if v, ok := m["listenerPath"]; ok {
		if p.ListenerPath, err = d.str(v, "listenerPath"); err != nil {
			return nil, err
		}
	}
	if v, ok := m["listenerMetadata"]; ok {
		if p.ListenerMetadata, err = d.str(v, "listenerMetadata"); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (d *decoder) rule(v *jsonValue, field string) (Rule, error) {
	var r Rule
	m, err := d.object(v, field, "names", "name", "action", "errnoRet", "args",
		"comment", "includes", "excludes")
	if err != nil {
		return r, err
	}
	if v, ok := m["names"]; ok {
		if r.Names, err = d.strList(v, join(field, "names")); err != nil {
			return r, err
		}
	}
	if v, ok := m["name"]; ok {
		if r.Name, err = d.str(v, join(field, "name")); err != nil {
			return r, err
		}
	}
	a, ok := m["action"]
	if !ok {
		return r, d.fail(join(field, "action"), "is required")
	}
	s, err := d.str(a, join(field, "action"))
	if err != nil {
		return r, err
	}
	r.Action = Action(s)
	if v, ok := m["errnoRet"]; ok {
		if r.ErrnoRet, err = d.optUint(v, join(field, "errnoRet"), maxRetData); err != nil {
			return r, err
		}
	}
	if v, ok := m["args"]; ok && v.kind != jsonNull {
		if v.kind != jsonArray {
			return r, d.fail(join(field, "args"), "must be a list, not %v", v.kind)
		}
		for i, item := range v.items {
			f := index(join(field, "args"), i)
			am, err := d.object(item, f, "index", "value", "valueTwo", "op")
			if err != nil {
				return r, err
			}
			var arg Arg
			for _, req := range []string{"index", "value", "op"} {
				if _, ok := am[req]; !ok {
					return r, d.fail(join(f, req), "is required")
				}
			}
			n, err := d.uint64Val(am["index"], join(f, "index"), 5)
			if err != nil {
				return r, err
			}
			arg.Index = uint(n)
			if arg.Value, err = d.uint64Val(am["value"], join(f, "value"), ^uint64(0)); err != nil {
				return r, err
			}
			if vt, ok := am["valueTwo"]; ok {
				if arg.ValueTwo, err = d.uint64Val(vt, join(f, "valueTwo"), ^uint64(0)); err != nil {
					return r, err
				}
			}
			op, err := d.str(am["op"], join(f, "op"))
			if err != nil {
				return r, err
			}
			arg.Op = Op(op)
			r.Args = append(r.Args, arg)
		}
	}
	if v, ok := m["comment"]; ok {
		if r.Comment, err = d.str(v, join(field, "comment")); err != nil {
			return r, err
		}
	}
	for _, key := range []string{"includes", "excludes"} {
		v, ok := m[key]
		if !ok || v.kind == jsonNull {
			continue
		}
		c, err := d.condition(v, join(field, key))
		if err != nil {
			return r, err
		}
		if key == "includes" {
			r.Includes = c
		} else {
			r.Excludes = c
		}
	}
	return r, nil
}

func (d *decoder) condition(v *jsonValue, field string) (*Condition, error) {
	m, err := d.object(v, field, "caps", "arches", "minKernel")
	if err != nil {
		return nil, err
	}
	c := &Condition{}
	if v, ok := m["caps"]; ok {
		if c.Caps, err = d.strList(v, join(field, "caps")); err != nil {
			return nil, err
		}
	}
	if v, ok := m["arches"]; ok {
		if c.Arches, err = d.strList(v, join(field, "arches")); err != nil {
			return nil, err
		}
	}
	if v, ok := m["minKernel"]; ok && v.kind != jsonNull {
		if c.MinKernel, err = d.str(v, join(field, "minKernel")); err != nil {
			return nil, err
		}
	}
	return c, nil
}
