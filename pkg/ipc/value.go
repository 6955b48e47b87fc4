package ipc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
)

// Value is plain JSON data: Null, Bool, Number, String, List or Map.
//
// Invariant: only plain data crosses the channel between the supervisor and
// the sandbox. Value is a closed sum type (the marker method is unexported),
// so no host object, pointer, channel or function can be placed in a hostCall
// argument or result: the compiler refuses it.
type Value interface {
	isValue()
}

type (
	// Null is JSON null.
	Null struct{}
	// Bool is a JSON boolean.
	Bool bool
	// Number is a JSON number. It is finite: NaN and Inf are not JSON.
	Number float64
	// String is a JSON string.
	String string
	// List is a JSON array.
	List []Value
	// Map is a JSON object.
	Map map[string]Value
)

func (Null) isValue()   {}
func (Bool) isValue()   {}
func (Number) isValue() {}
func (String) isValue() {}
func (List) isValue()   {}
func (Map) isValue()    {}

// maxDepth bounds nesting so that a hostile peer cannot make the decoder
// recurse without limit.
const maxDepth = 64

// ParseValue decodes JSON text into a Value.
func ParseValue(data []byte) (Value, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var raw any
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("invalid JSON: trailing data after the value")
	}
	return fromAny(raw, 0)
}

// ToValue converts a Go value made only of JSON-compatible data (as produced
// by encoding/json) into a Value by encoding it; unsupported values are an
// error. It is the bridge for handlers that build results as Go structs: what
// crosses is their JSON form, never the struct.
func ToValue(v any) (Value, error) {
	if val, ok := v.(Value); ok {
		return val, nil
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("value is not plain JSON data: %w", err)
	}
	return ParseValue(data)
}

// Decode fills the Go value out (as json.Unmarshal does) from a Value.
func Decode(v Value, out any) error {
	data, err := MarshalValue(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, out)
}

// MarshalValue encodes a Value as JSON. A nil Value encodes as null.
func MarshalValue(v Value) ([]byte, error) {
	var buf bytes.Buffer
	if err := encode(&buf, v, 0); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func encode(buf *bytes.Buffer, v Value, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("value nested deeper than %d levels", maxDepth)
	}
	switch x := v.(type) {
	case nil, Null:
		buf.WriteString("null")
	case Bool:
		if x {
			buf.WriteString("true")
		} else {
			buf.WriteString("false")
		}
	case Number:
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("number %v is not valid JSON", f)
		}
		b, _ := json.Marshal(f)
		buf.Write(b)
	case String:
		b, _ := json.Marshal(string(x))
		buf.Write(b)
	case List:
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := encode(buf, e, depth+1); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case Map:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			b, _ := json.Marshal(k)
			buf.Write(b)
			buf.WriteByte(':')
			if err := encode(buf, x[k], depth+1); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	default:
		// Unreachable for code outside this package: Value is sealed.
		return fmt.Errorf("unsupported value type %T", v)
	}
	return nil
}

func fromAny(raw any, depth int) (Value, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("value nested deeper than %d levels", maxDepth)
	}
	switch x := raw.(type) {
	case nil:
		return Null{}, nil
	case bool:
		return Bool(x), nil
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return nil, fmt.Errorf("number %s out of range", x)
		}
		return Number(f), nil
	case float64:
		return Number(x), nil
	case string:
		return String(x), nil
	case []any:
		l := make(List, len(x))
		for i, e := range x {
			v, err := fromAny(e, depth+1)
			if err != nil {
				return nil, err
			}
			l[i] = v
		}
		return l, nil
	case map[string]any:
		m := make(Map, len(x))
		for k, e := range x {
			v, err := fromAny(e, depth+1)
			if err != nil {
				return nil, err
			}
			m[k] = v
		}
		return m, nil
	}
	return nil, fmt.Errorf("unsupported JSON value %T", raw)
}
