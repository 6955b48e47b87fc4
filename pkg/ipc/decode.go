package ipc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// This file decodes the JSON that arrives on the channel in one pass over
// the message, without reflection, for the messages every call carries:
// the envelope, flat payload objects and Values. Whatever the other side
// sends, it accepts exactly the text encoding/json accepts and yields the
// same data (FuzzDecodeEnvelope and FuzzParseValue compare the two), so no
// message means one thing to this decoder and another to encoding/json.
// Raw values (a payload) are sub-slices of the message, checked, not copied.

// errSyntax is any text that is not JSON.
var errSyntax = errors.New("invalid JSON")

// maxNesting is encoding/json's bound on nesting: deeper text is refused.
// The scanner keeps one byte per level, so a hostile message costs at most
// this much memory, and it never recurses.
const maxNesting = 10000

type scanner struct {
	data []byte
	pos  int
	// spaced is set once whitespace was skipped.
	spaced bool
	// budget, when set, is charged for the values parseValue makes
	// (charged holds what was taken; see ParseValueBudget).
	budget  *Budget
	values  int
	charged int64
}

func (s *scanner) skipSpace() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
			s.spaced = true
		default:
			return
		}
	}
}

// peek returns the next byte after whitespace, or 0 at the end.
func (s *scanner) peek() byte {
	s.skipSpace()
	if s.pos >= len(s.data) {
		return 0
	}
	return s.data[s.pos]
}

// expect consumes c after whitespace.
func (s *scanner) expect(c byte) error {
	if s.peek() != c {
		return errSyntax
	}
	s.pos++
	return nil
}

// atEnd reports whether only whitespace is left.
func (s *scanner) atEnd() bool {
	s.skipSpace()
	return s.pos == len(s.data)
}

// skipString consumes a string starting at its opening quote and reports
// whether it contains escapes.
func (s *scanner) skipString() (escaped bool, err error) {
	d := s.data
	i := s.pos + 1
	for i < len(d) {
		c := d[i]
		switch {
		case c == '"':
			s.pos = i + 1
			return escaped, nil
		case c == '\\':
			escaped = true
			if i+1 >= len(d) {
				return false, errSyntax
			}
			switch d[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if hex4(d[i+2:]) < 0 {
					return false, errSyntax
				}
				i += 6
			default:
				return false, errSyntax
			}
		case c < 0x20:
			// Control characters must be escaped inside strings.
			return false, errSyntax
		default:
			i++
		}
	}
	return false, errSyntax
}

// hex4 decodes four hex digits at the start of b, or returns -1.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// skipNumber consumes a number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) skipNumber() error {
	d := s.data
	i := s.pos
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && '1' <= d[i] && d[i] <= '9':
		for i < len(d) && '0' <= d[i] && d[i] <= '9' {
			i++
		}
	default:
		return errSyntax
	}
	if i < len(d) && d[i] == '.' {
		i++
		start := i
		for i < len(d) && '0' <= d[i] && d[i] <= '9' {
			i++
		}
		if i == start {
			return errSyntax
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		start := i
		for i < len(d) && '0' <= d[i] && d[i] <= '9' {
			i++
		}
		if i == start {
			return errSyntax
		}
	}
	s.pos = i
	return nil
}

func (s *scanner) skipLiteral(lit string) error {
	if !bytes.HasPrefix(s.data[s.pos:], []byte(lit)) {
		return errSyntax
	}
	s.pos += len(lit)
	return nil
}

// endOfElement consumes what follows a member or element: the closer (the
// container ends: closed) or a comma (another one follows); anything else
// is a syntax error.
func (s *scanner) endOfElement(closer byte) (closed bool, err error) {
	c := s.peek()
	s.pos++
	switch c {
	case closer:
		return true, nil
	case ',':
		return false, nil
	}
	return false, errSyntax
}

// members walks the object whose '{' is the next byte: for each member it
// reads the name and calls member, which must consume the value. It stops
// after the closing '}' or at the first error.
func (s *scanner) members(member func(name []byte, escaped bool) error) error {
	s.pos++
	if s.peek() == '}' {
		s.pos++
		return nil
	}
	for {
		name, escaped, err := s.readName()
		if err != nil {
			return err
		}
		if err := member(name, escaped); err != nil {
			return err
		}
		closed, err := s.endOfElement('}')
		if err != nil || closed {
			return err
		}
	}
}

// skipValue consumes one value (after whitespace) at nesting level depth
// (the levels already open around it) and returns its text. It checks the
// whole grammar without recursion.
func (s *scanner) skipValue(depth int) ([]byte, error) {
	var stackBuf [32]byte
	stack := stackBuf[:0] // '{' or '[' for each open container
	c := s.peek()
	start := s.pos
	for {
		// A value is expected here.
		switch {
		case c == '{' || c == '[':
			if depth+len(stack)+1 > maxNesting {
				return nil, errSyntax
			}
			s.pos++
			closer := byte('}')
			if c == '[' {
				closer = ']'
			}
			if s.peek() == closer {
				s.pos++
				break
			}
			stack = append(stack, c)
			if c == '{' {
				if err := s.memberName(); err != nil {
					return nil, err
				}
			}
			c = s.peek()
			continue
		case c == '"':
			if _, err := s.skipString(); err != nil {
				return nil, err
			}
		case c == 't':
			if err := s.skipLiteral("true"); err != nil {
				return nil, err
			}
		case c == 'f':
			if err := s.skipLiteral("false"); err != nil {
				return nil, err
			}
		case c == 'n':
			if err := s.skipLiteral("null"); err != nil {
				return nil, err
			}
		default:
			if err := s.skipNumber(); err != nil {
				return nil, err
			}
		}
		// A value ended: close containers until one continues.
		for {
			if len(stack) == 0 {
				return s.data[start:s.pos], nil
			}
			top := stack[len(stack)-1]
			c = s.peek()
			if c == ',' {
				s.pos++
				if top == '{' {
					if err := s.memberName(); err != nil {
						return nil, err
					}
				}
				c = s.peek()
				break
			}
			if (top == '{' && c == '}') || (top == '[' && c == ']') {
				s.pos++
				stack = stack[:len(stack)-1]
				continue
			}
			return nil, errSyntax
		}
	}
}

// memberName consumes `"name" :` inside an object.
func (s *scanner) memberName() error {
	if s.peek() != '"' {
		return errSyntax
	}
	if _, err := s.skipString(); err != nil {
		return err
	}
	return s.expect(':')
}

// readName consumes a member name and its colon and returns the name's
// quoted text and whether it has escapes.
func (s *scanner) readName() ([]byte, bool, error) {
	if s.peek() != '"' {
		return nil, false, errSyntax
	}
	start := s.pos
	escaped, err := s.skipString()
	if err != nil {
		return nil, false, err
	}
	name := s.data[start:s.pos]
	return name, escaped, s.expect(':')
}

// nameIs reports whether the quoted member name q names field, under the
// rule encoding/json uses for struct fields: equal under Unicode case
// folding, after unescaping.
func nameIs(q []byte, escaped bool, field string) bool {
	if !escaped {
		return bytes.EqualFold(q[1:len(q)-1], []byte(field))
	}
	return bytes.EqualFold([]byte(unquote(q)), []byte(field))
}

// unquote decodes a checked JSON string (with its quotes) as encoding/json
// does: invalid UTF-8 and unpaired surrogates become U+FFFD.
func unquote(q []byte) string {
	q = q[1 : len(q)-1]
	if bytes.IndexByte(q, '\\') < 0 && utf8.Valid(q) {
		return string(q)
	}
	out := make([]byte, 0, len(q)+8)
	for i := 0; i < len(q); {
		c := q[i]
		if c == '\\' {
			switch q[i+1] {
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r := hex4(q[i+2:])
				i += 6
				if utf16.IsSurrogate(r) {
					// A high surrogate followed by an escaped low one
					// is one character; anything else is U+FFFD.
					if i+1 < len(q) && q[i] == '\\' && q[i+1] == 'u' {
						if dec := utf16.DecodeRune(r, hex4(q[i+2:])); dec != utf8.RuneError {
							out = utf8.AppendRune(out, dec)
							i += 6
							continue
						}
					}
					r = utf8.RuneError
				}
				out = utf8.AppendRune(out, r)
				continue
			default: // '"', '\\', '/'
				out = append(out, q[i+1])
			}
			i += 2
			continue
		}
		if c < utf8.RuneSelf {
			out = append(out, c)
			i++
			continue
		}
		r, size := utf8.DecodeRune(q[i:])
		out = utf8.AppendRune(out, r) // U+FFFD for an invalid byte
		i += size
	}
	return string(out)
}

// errType is a value of the wrong JSON type for its field.
var errType = errors.New("value of the wrong type")

// typeName is unquote for a message type: a known type is its constant,
// with no string allocated for each message.
func typeName(q []byte) string {
	switch string(q) {
	case `"` + TypeReply + `"`:
		return TypeReply
	case `"` + TypeHostCall + `"`:
		return TypeHostCall
	case `"` + TypeExecute + `"`:
		return TypeExecute
	case `"` + TypeCallTool + `"`:
		return TypeCallTool
	}
	return unquote(q)
}

// readString reads a string or null (ok false) for a string field at
// nesting level depth.
func (s *scanner) readString(depth int) (str string, ok bool, err error) {
	return s.readStringAs(depth, unquote)
}

// readStringAs is readString with conv decoding the string (with its
// quotes).
func (s *scanner) readStringAs(depth int, conv func([]byte) string) (str string, ok bool, err error) {
	switch s.peek() {
	case '"':
		start := s.pos
		if _, err := s.skipString(); err != nil {
			return "", false, err
		}
		return conv(s.data[start:s.pos]), true, nil
	case 'n':
		return "", false, s.skipLiteral("null")
	}
	if _, err := s.skipValue(depth); err != nil {
		return "", false, err
	}
	return "", false, errType
}

// decodeEnvelope decodes msg into env as json.Unmarshal does (member names
// matched case-insensitively, the last of duplicate members wins, null
// leaves a field as it is except Error, which it clears). Payload is a
// sub-slice of msg.
func decodeEnvelope(msg []byte, env *Envelope) error {
	// A type error does not stop the scan: text that is not JSON at all is
	// always reported as a syntax error, as encoding/json does.
	var typeErr error
	s := scanner{data: msg}
	err := s.object(errType, func(name []byte, escaped bool) error {
		switch {
		case nameIs(name, escaped, "type"):
			str, ok, err := s.readStringAs(1, typeName)
			if err == errType {
				typeErr = err
			} else if err != nil {
				return err
			} else if ok {
				env.Type = str
			}
		case nameIs(name, escaped, "id"):
			raw, err := s.skipValue(1)
			if err != nil {
				return err
			}
			switch {
			case raw[0] == 'n':
			case raw[0] == '-' || ('0' <= raw[0] && raw[0] <= '9'):
				id, perr := strconv.ParseUint(string(raw), 10, 64)
				if perr != nil {
					typeErr = errType
				} else {
					env.ID = id
				}
			default:
				typeErr = errType
			}
		case nameIs(name, escaped, "payload"):
			raw, err := s.skipValue(1)
			if err != nil {
				return err
			}
			env.Payload = raw
		case nameIs(name, escaped, "error"):
			return s.decodeErrorBody(env, &typeErr)
		default:
			_, err := s.skipValue(1)
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	return typeErr
}

// object decodes the whole text, which must be one JSON value, as
// json.Unmarshal decodes into a struct: null leaves everything alone, any
// other non-object is notObject (once the text is known to be JSON), and
// each member of an object goes to member.
func (s *scanner) object(notObject error, member func(name []byte, escaped bool) error) error {
	switch s.peek() {
	case 'n':
		if err := s.skipLiteral("null"); err != nil || !s.atEnd() {
			return errSyntax
		}
		return nil
	case '{':
	default:
		if _, err := s.skipValue(0); err != nil || !s.atEnd() {
			return errSyntax
		}
		return notObject
	}
	if err := s.members(member); err != nil {
		return err
	}
	if !s.atEnd() {
		return errSyntax
	}
	return nil
}

// decodeErrorBody decodes the error member: null clears it; an object is
// decoded into the existing body, if an earlier duplicate member made one.
func (s *scanner) decodeErrorBody(env *Envelope, typeErr *error) error {
	switch s.peek() {
	case 'n':
		if err := s.skipLiteral("null"); err != nil {
			return err
		}
		env.Error = nil
		return nil
	case '{':
	default:
		if _, err := s.skipValue(1); err != nil {
			return err
		}
		*typeErr = errType
		return nil
	}
	if env.Error == nil {
		env.Error = &ErrorBody{}
	}
	body := env.Error
	return s.members(func(name []byte, escaped bool) error {
		var field *string
		switch {
		case nameIs(name, escaped, "code"):
			field = &body.Code
		case nameIs(name, escaped, "message"):
			field = &body.Message
		case nameIs(name, escaped, "step"):
			field = &body.Step
		}
		if field == nil {
			_, err := s.skipValue(2)
			return err
		}
		str, ok, err := s.readString(2)
		if err == errType {
			*typeErr = err
		} else if err != nil {
			return err
		} else if ok {
			*field = str
		}
		return nil
	})
}

// Field is one member of a flat JSON object for DecodeFields. Exactly one
// destination is set: a string, a list of strings, an integer, a boolean, or
// any value kept as raw text.
type Field struct {
	Name    string
	String  *string
	Strings *[]string
	Int     *int64
	Bool    *bool
	Raw     *json.RawMessage
}

// DecodeFields decodes the JSON object in data into fields as json.Unmarshal
// decodes it into a freshly declared struct of string, []string, int64,
// bool and json.RawMessage fields: member names match case-insensitively,
// the last duplicate wins, null leaves a field alone (a list: sets it to
// nil), an integer must be written without fraction or exponent, unknown
// members are skipped, and a value of the wrong type is an error. Raw values
// are sub-slices of data.
func DecodeFields(data []byte, fields []Field) error {
	var typeErr error
	s := scanner{data: data}
	err := s.object(errNotObject, func(name []byte, escaped bool) error {
		var f *Field
		for i := range fields {
			if nameIs(name, escaped, fields[i].Name) {
				f = &fields[i]
				break
			}
		}
		switch {
		case f != nil && f.String != nil:
			str, ok, err := s.readString(1)
			if err == errType {
				typeErr = fmt.Errorf("%s: not a string", fieldName(f))
			} else if err != nil {
				return err
			} else if ok {
				*f.String = str
			}
		case f != nil && f.Raw != nil:
			raw, err := s.skipValue(1)
			if err != nil {
				return err
			}
			*f.Raw = raw
		case f != nil && f.Strings != nil:
			if err := s.readStrings(f.Strings); err == errType {
				typeErr = fmt.Errorf("%s: not a list of strings", fieldName(f))
			} else if err != nil {
				return err
			}
		case f != nil && (f.Int != nil || f.Bool != nil):
			raw, err := s.skipValue(1)
			if err != nil {
				return err
			}
			if err := scalarInto(raw, f); err != nil {
				typeErr = err
			}
		default:
			_, err := s.skipValue(1)
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	return typeErr
}

var errNotObject = errors.New("not a JSON object")

// appendRawValue appends raw, which must be one JSON value, checked at
// nesting level depth; text with whitespace between tokens is compacted, so
// the result is what json.Marshal makes of a json.RawMessage (except that
// it leaves <, > and & unescaped).
func appendRawValue(buf, raw []byte, depth int) ([]byte, error) {
	s := scanner{data: raw}
	if _, err := s.skipValue(depth); err != nil || !s.atEnd() {
		return nil, fmt.Errorf("payload is not one JSON value")
	}
	if !s.spaced {
		return append(buf, raw...), nil
	}
	b := bytes.NewBuffer(buf)
	if err := json.Compact(b, raw); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// readStrings reads null (the list becomes nil) or a list of strings, whose
// null elements are empty strings.
func (s *scanner) readStrings(out *[]string) error {
	switch s.peek() {
	case 'n':
		if err := s.skipLiteral("null"); err != nil {
			return err
		}
		*out = nil
		return nil
	case '[':
	default:
		if _, err := s.skipValue(1); err != nil {
			return err
		}
		return errType
	}
	s.pos++
	list := []string{}
	var typeErr error
	if s.peek() == ']' {
		s.pos++
		*out = list
		return nil
	}
	for {
		str, _, err := s.readString(2)
		if err == errType {
			typeErr = err
		} else if err != nil {
			return err
		}
		list = append(list, str)
		closed, err := s.endOfElement(']')
		if err != nil {
			return err
		}
		if closed {
			*out = list
			return typeErr
		}
	}
}

// fieldName is a copy of f's name, for an error message: formatting f.Name
// itself would make the compiler move every Field, and what its pointers
// point to (a caller's decoded struct), to the heap on every decode, not
// only for a failed one.
func fieldName(f *Field) string { return strings.Clone(f.Name) }

// scalarInto stores the checked value raw into an Int or Bool field; null
// leaves it alone.
func scalarInto(raw []byte, f *Field) error {
	switch {
	case raw[0] == 'n':
		return nil
	case f.Bool != nil && raw[0] == 't':
		*f.Bool = true
		return nil
	case f.Bool != nil && raw[0] == 'f':
		*f.Bool = false
		return nil
	case f.Int != nil && (raw[0] == '-' || ('0' <= raw[0] && raw[0] <= '9')):
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil {
			return fmt.Errorf("%s: not an integer", fieldName(f))
		}
		*f.Int = n
		return nil
	}
	return fmt.Errorf("%s: value of the wrong type", fieldName(f))
}
