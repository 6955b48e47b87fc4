package ipc

import (
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf8"
)

// Payload encoding: a message's payload as JSON text, the common shapes
// without reflection.

// appendPayload appends the JSON form of v; nothing for nil.
func appendPayload(buf []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return buf, nil
	case json.RawMessage:
		if len(x) == 0 {
			return buf, nil
		}
		// Raw text from a handler is checked, never trusted: invalid JSON
		// here would be a malformed envelope on the wire. The payload is
		// the envelope's member: one level down.
		return appendRawValue(buf, x, 1)
	case Value:
		return appendValue(buf, x, 0)
	case map[string]any, []any, string:
		// The shapes encoding/json decodes into an any, which callers
		// build their payloads from: encoded without reflection, to
		// the same text. Anything else in them goes to json.Marshal.
		start := len(buf)
		if out, ok := appendPlain(buf, v, 1); ok {
			return out, nil
		}
		buf = buf[:start]
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(buf, data...), nil
}

// appendPlain appends the JSON text json.Marshal gives for v when v is
// made of nil, bool, string, int, finite float64, map[string]any and []any
// alone, nested at most maxDepth levels; ok is false (and what it appended
// is to be dropped) for anything else, which json.Marshal then encodes or
// refuses as it does.
func appendPlain(buf []byte, v any, depth int) (_ []byte, ok bool) {
	if depth > maxDepth {
		return buf, false
	}
	switch x := v.(type) {
	case nil:
		return append(buf, "null"...), true
	case bool:
		return strconv.AppendBool(buf, x), true
	case string:
		return appendJSONString(buf, x), true
	case int:
		return strconv.AppendInt(buf, int64(x), 10), true
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return buf, false
		}
		return appendNumber(buf, x), true
	case []any:
		if x == nil {
			return append(buf, "null"...), true
		}
		buf = append(buf, '[')
		for i, e := range x {
			if i > 0 {
				buf = append(buf, ',')
			}
			if buf, ok = appendPlain(buf, e, depth+1); !ok {
				return buf, false
			}
		}
		return append(buf, ']'), true
	case Value:
		b, err := appendValue(buf, x, depth)
		if err != nil {
			return buf, false
		}
		return b, true
	case map[string]any:
		if x == nil {
			return append(buf, "null"...), true
		}
		ok = true
		buf = appendObject(buf, x, func(buf []byte, e any) ([]byte, bool) {
			buf, ok = appendPlain(buf, e, depth+1)
			return buf, ok
		})
		return buf, ok
	}
	return buf, false
}

// Clip returns s cut to at most n bytes, at a rune boundary, with "…"
// after a cut: for an error message that quotes what a peer sent, which
// may be megabytes (a 4 MiB message type, quoted and escaped, made a
// reply larger than any message, which was then dropped unanswered:
// found by review).
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
