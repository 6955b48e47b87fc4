package sandbox

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/nsbox/nsbox/pkg/ipc"
)

// appendRedactedJSON appends raw, JSON text from inside the sandbox, to b
// as JSON text with the values of secret-looking keys replaced (as Redact
// does), reading raw token by token and stopping once b is longer than
// stop: what it holds is the current token, never a decoded tree of the
// whole (a call's arguments are up to 4 MiB of the program's choosing).
// Numbers are written as encoding/json writes a float64; objects keep
// their keys in the order sent, each occurrence of a repeated key
// redacted. Text that is not JSON gives "<invalid JSON>", unless the cut
// comes first.
func appendRedactedJSON(b, raw []byte, stop int) []byte {
	start := len(b)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	// One entry an open object or array: its element count so far, and
	// for an object whether the next token is a key.
	type level struct {
		object, wantKey bool
		n               int
	}
	var stack []level
	invalid := func() []byte { return ipc.AppendString(b[:start], "<invalid JSON>") }
	for len(b) <= stop {
		tok, err := dec.Token()
		if err != nil {
			if len(stack) == 0 && len(b) > start {
				return b // the value is whole
			}
			return invalid()
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			b = append(b, byte(d))
			if len(stack) == 0 {
				if dec.More() {
					return invalid()
				}
				return b
			}
			continue
		}
		var top *level
		if len(stack) > 0 {
			top = &stack[len(stack)-1]
			if top.n > 0 && (!top.object || top.wantKey) {
				b = append(b, ',')
			}
		}
		if top != nil && top.object && top.wantKey {
			key, _ := tok.(string)
			b = appendStringUpTo(b, key, stop)
			b = append(b, ':')
			top.n++
			if isSecretKey(key) {
				b = append(b, `"[REDACTED]"`...)
				if !skipJSONValue(dec) {
					return invalid()
				}
				continue // the next token is a key again
			}
			top.wantKey = false
			continue
		}
		if top != nil {
			if top.object {
				top.wantKey = true
			} else {
				top.n++
			}
		}
		switch x := tok.(type) {
		case json.Delim: // '{' or '['
			b = append(b, byte(x))
			stack = append(stack, level{object: x == '{', wantKey: x == '{'})
			continue
		case string:
			b = appendStringUpTo(b, x, stop)
		case json.Number:
			// As encoding/json reads and writes it: a float64 (a number
			// out of its range is not JSON it takes).
			f, err := strconv.ParseFloat(string(x), 64)
			if err != nil {
				return invalid()
			}
			b, _ = ipc.AppendValue(b, ipc.Number(f)) // finite: ParseFloat refused the rest
		case bool:
			b = strconv.AppendBool(b, x)
		case nil:
			b = append(b, "null"...)
		}
		if len(stack) == 0 {
			if dec.More() {
				return invalid()
			}
			return b
		}
	}
	return b
}

// skipJSONValue reads the next value of dec whole, token by token.
func skipJSONValue(dec *json.Decoder) bool {
	depth := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		if d, ok := tok.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
			} else {
				depth--
			}
		}
		if depth == 0 {
			return true
		}
	}
}
