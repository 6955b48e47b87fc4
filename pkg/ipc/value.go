package ipc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"unicode/utf8"
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

// MarshalJSON methods give encoding/json the text MarshalValue gives, also
// for a Value inside other data (a map[string]any payload, ToValue):
// without them Null{} was {} and a nil Map or List null (found by review).
func (Null) MarshalJSON() ([]byte, error)   { return []byte("null"), nil }
func (m Map) MarshalJSON() ([]byte, error)  { return MarshalValue(m) }
func (l List) MarshalJSON() ([]byte, error) { return MarshalValue(l) }

func (Null) isValue()   {}
func (Bool) isValue()   {}
func (Number) isValue() {}
func (String) isValue() {}
func (List) isValue()   {}
func (Map) isValue()    {}

// maxDepth bounds nesting so that a hostile peer cannot make the decoder
// recurse without limit.
const maxDepth = 64

// ParseValue decodes JSON text (one value, nothing after it but
// whitespace) into a Value. Strings are decoded as encoding/json decodes
// them, numbers must fit a float64, and nesting is bounded.
func ParseValue(data []byte) (Value, error) {
	s := scanner{data: data}
	return s.parse()
}

// parse is ParseValue on s.
func (s *scanner) parse() (Value, error) {
	v, err := s.parseValue(0)
	if err == nil && !s.atEnd() {
		err = fmt.Errorf("trailing data after the value")
	}
	if err == errSyntax {
		return nil, fmt.Errorf("invalid JSON at byte %d", s.pos)
	}
	if err == errValuesOverBudget {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	return v, nil
}

// valueCost is about what one parsed value holds in memory (a Map's
// header, a List's slice, the interface that holds either in its parent's
// list or map, a boxed number), and valueBlock how many are charged at a
// time. A hostile message of small values ("[{},{},...]") holds about 21
// times its own size once parsed: 4 MiB became 86 MiB (found by review).
const (
	valueCost  = 64
	valueBlock = 256
)

// errValuesOverBudget ends a parse whose values do not fit in the budget.
var errValuesOverBudget = errors.New("the parsed values exceed what the connection's group (the sandbox session) may hold")

// ParseValueBudget is ParseValue for data from a peer of budget's group:
// the values it makes are charged to the budget (valueCost each) as they
// are made, and the parse fails once they do not fit. It returns what it
// charged, which the caller gives back (Budget.Give) when it no longer
// holds the value; nothing stays charged after an error.
func ParseValueBudget(data []byte, budget *Budget) (Value, int64, error) {
	s := scanner{data: data, budget: budget}
	v, err := s.parse()
	if err != nil {
		budget.give(s.charged)
		return nil, 0, err
	}
	return v, s.charged, nil
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

// MarshalValue encodes a Value as JSON. A nil Value encodes as null. The
// text is what json.Marshal gives for the same data (map keys sorted).
func MarshalValue(v Value) ([]byte, error) {
	return appendValue(nil, v, 0)
}

// AppendValue appends the JSON text of v (as MarshalValue gives it) to buf.
func AppendValue(buf []byte, v Value) ([]byte, error) {
	return appendValue(buf, v, 0)
}

// AppendString appends s as a JSON string, escaped as json.Marshal escapes
// it.
func AppendString(buf []byte, s string) []byte {
	return appendJSONString(buf, s)
}

// StringLen is len(AppendString(nil, s)), counted without building it.
func StringLen(s string) int {
	n := 2
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&':
				n++
			case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f':
				n += 2
			default:
				n += 6
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1, r == '\u2028' || r == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}

// appendValue appends the JSON text of v to buf.
func appendValue(buf []byte, v Value, depth int) ([]byte, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("value nested deeper than %d levels", maxDepth)
	}
	var err error
	switch x := v.(type) {
	case nil, Null:
		buf = append(buf, "null"...)
	case Bool:
		buf = strconv.AppendBool(buf, bool(x))
	case Number:
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("number %v is not valid JSON", f)
		}
		buf = appendNumber(buf, f)
	case String:
		buf = appendJSONString(buf, string(x))
	case List:
		buf = append(buf, '[')
		for i, e := range x {
			if i > 0 {
				buf = append(buf, ',')
			}
			if buf, err = appendValue(buf, e, depth+1); err != nil {
				return nil, err
			}
		}
		buf = append(buf, ']')
	case Map:
		ok := true
		buf = appendObject(buf, x, func(buf []byte, e Value) ([]byte, bool) {
			if buf, err = appendValue(buf, e, depth+1); err != nil {
				ok = false
			}
			return buf, ok
		})
		if !ok {
			return nil, err
		}
	default:
		// Unreachable for code outside this package: Value is sealed.
		return nil, fmt.Errorf("unsupported value type %T", v)
	}
	return buf, nil
}

// appendNumber formats a finite float as encoding/json does: plain decimal
// for magnitudes in [1e-6, 1e21), otherwise an exponent without a leading
// zero (1e-07 is written 1e-7).
func appendNumber(buf []byte, f float64) []byte {
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	start := len(buf)
	buf = strconv.AppendFloat(buf, f, format, -1, 64)
	if format == 'e' {
		exp := bytes.LastIndexByte(buf[start:], 'e') + start
		if len(buf)-exp == 4 && buf[exp+2] == '0' {
			// e-07 / e+07 -> e-7 / e+7
			buf[exp+2] = buf[exp+3]
			buf = buf[:len(buf)-1]
		}
	}
	return buf
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string, escaped as encoding/json
// escapes it: quotes, backslashes and control characters; <, > and & as
// \u escapes (safe inside HTML); U+2028 and U+2029 (line breaks to
// JavaScript); and each byte of invalid UTF-8 as U+FFFD, so that the text
// is always valid UTF-8.
func appendJSONString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	done := 0 // s[:done] is already in buf
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			buf = append(buf, s[done:i]...)
			switch c {
			case '"', '\\':
				buf = append(buf, '\\', c)
			case '\n':
				buf = append(buf, '\\', 'n')
			case '\r':
				buf = append(buf, '\\', 'r')
			case '\t':
				buf = append(buf, '\\', 't')
			case '\b':
				buf = append(buf, '\\', 'b')
			case '\f':
				buf = append(buf, '\\', 'f')
			default:
				buf = append(buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			done = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			buf = append(buf, s[done:i]...)
			buf = append(buf, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			buf = append(buf, s[done:i]...)
			buf = append(buf, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		done = i
	}
	buf = append(buf, s[done:]...)
	return append(buf, '"')
}

// appendObject appends m as a JSON object, its keys sorted as
// encoding/json sorts them, each value written by elem; it stops at the
// first value elem refuses (false), returning what was written so far.
func appendObject[V any](buf []byte, m map[string]V, elem func([]byte, V) ([]byte, bool)) []byte {
	var small [8]string
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	buf = append(buf, '{')
	for i, k := range keys {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendJSONString(buf, k)
		buf = append(buf, ':')
		var ok bool
		if buf, ok = elem(buf, m[k]); !ok {
			return buf
		}
	}
	return append(buf, '}')
}

// parseValue decodes one value at nesting level depth into a Value.
// Recursion is bounded by maxDepth.
func (s *scanner) parseValue(depth int) (Value, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("value nested deeper than %d levels", maxDepth)
	}
	if s.budget != nil {
		// Charged before the values are made, a block at a time.
		if s.values%valueBlock == 0 {
			if !s.budget.take(valueBlock * valueCost) {
				return nil, errValuesOverBudget
			}
			s.charged += valueBlock * valueCost
		}
		s.values++
	}
	switch c := s.peek(); c {
	case '{':
		m := Map{}
		err := s.members(func(name []byte, _ bool) error {
			v, err := s.parseValue(depth + 1)
			if err != nil {
				return err
			}
			m[unquote(name)] = v
			return nil
		})
		if err != nil {
			return nil, err
		}
		return m, nil
	case '[':
		s.pos++
		l := List{}
		if s.peek() == ']' {
			s.pos++
			return l, nil
		}
		for {
			v, err := s.parseValue(depth + 1)
			if err != nil {
				return nil, err
			}
			l = append(l, v)
			closed, err := s.endOfElement(']')
			if err != nil {
				return nil, err
			}
			if closed {
				return l, nil
			}
		}
	case '"':
		start := s.pos
		if _, err := s.skipString(); err != nil {
			return nil, err
		}
		return String(unquote(s.data[start:s.pos])), nil
	case 't':
		return Bool(true), s.skipLiteral("true")
	case 'f':
		return Bool(false), s.skipLiteral("false")
	case 'n':
		return Null{}, s.skipLiteral("null")
	default:
		start := s.pos
		if err := s.skipNumber(); err != nil {
			return nil, err
		}
		f, err := strconv.ParseFloat(string(s.data[start:s.pos]), 64)
		if err != nil {
			return nil, fmt.Errorf("number %s out of range", s.data[start:s.pos])
		}
		return Number(f), nil
	}
}
