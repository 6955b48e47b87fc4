package policy

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unicode/utf8"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// Kind is where a layer comes from; it decides which keys it may hold and
// its place in the precedence order.
type Kind int

const (
	// KindDefaults are nsbox's built-in defaults (lowest precedence).
	KindDefaults Kind = iota
	// KindConfig is the user's config.toml.
	KindConfig
	// KindProfile is a profile (built-in, user, or a file given by path).
	KindProfile
	// KindFlags are command-line settings (highest precedence).
	KindFlags
)

func (k Kind) String() string {
	switch k {
	case KindDefaults:
		return "defaults"
	case KindConfig:
		return "config"
	case KindProfile:
		return "profile"
	}
	return "flags"
}

// Layer is one Config with where it came from.
type Layer struct {
	Kind Kind
	// Name is a file path, "(built-in) NAME.toml", "built-in defaults" or
	// "command line".
	Name string
	// Profile is the profile's name (profile layers).
	Profile string
	Config  Config
	// KeyNames maps a key to how the user wrote it; the command line maps
	// "limits.memory" to "--memory" so that errors name the flag.
	KeyNames map[string]string
	// pos finds a key's line in the file the layer was read from (nil:
	// none, a layer of flags or defaults).
	pos *keyPositions
	// Digest is the SHA-256 of the file's bytes (LoadLayer), compared
	// with the user's trust record of a project policy file.
	Digest [32]byte
}

// where returns the source, line and key to show for key.
func (l *Layer) where(key string) (string, int, string) {
	switch l.Kind {
	case KindFlags:
		base := stripIndex(key)
		if n, ok := l.KeyNames[base]; ok {
			return "", 0, n
		}
		return "", 0, key
	case KindDefaults:
		return l.Name, 0, key
	}
	return l.Name, l.line(key), key
}

// keyPositions maps a key ("limits.memory", "filesystem.rw[2]") to its
// line, worked out from the file's text on the first question: only an
// error or a warning asks, and reading every position of the built-in
// profiles was a tenth of a run's policy resolution.
type keyPositions struct {
	once  sync.Once
	data  []byte
	lines map[string]int
}

func (p *keyPositions) get() map[string]int {
	if p == nil {
		return nil
	}
	p.once.Do(func() {
		// The decoder read the same text with the same parser: it parses.
		p.lines, _ = keyLines(p.data)
		p.data = nil
	})
	return p.lines
}

// line finds key's line, falling back to its enclosing key or table.
func (l *Layer) line(key string) int {
	lines := l.pos.get()
	for k := key; k != ""; {
		if n, ok := lines[k]; ok {
			return n
		}
		switch i := strings.LastIndexAny(k, ".["); {
		case i < 0:
			k = ""
		default:
			k = k[:i]
		}
	}
	return 0
}

// stripIndex removes the list indices ("[3]") from key: "protect[3]" is
// "protect". Called for every plan entry's explanation, so no regexp.
func stripIndex(key string) string {
	if strings.IndexByte(key, '[') >= 0 {
		var b strings.Builder
		for i := 0; i < len(key); i++ {
			if key[i] == '[' {
				j := i + 1
				for j < len(key) && key[j] >= '0' && key[j] <= '9' {
					j++
				}
				if j > i+1 && j < len(key) && key[j] == ']' {
					i = j
					continue
				}
			}
			b.WriteByte(key[i])
		}
		key = b.String()
	}
	if i := strings.Index(key, "."); i >= 0 && strings.HasPrefix(key, "env.set.") {
		return "env.set"
	}
	return key
}

// MaxFileSize bounds a profile or config file: policy files are small, and
// a huge one is a mistake or an attack, not a policy.
const MaxFileSize = 1 << 20

// ParseLayer decodes a TOML document strictly: an unknown key, a wrong type
// or a syntax error is an *Error naming name, the line and the key.
func ParseLayer(data []byte, name string, kind Kind) (*Layer, error) {
	l := &Layer{Kind: kind, Name: name}
	if len(data) > MaxFileSize {
		return nil, &Error{Source: name, Msg: fmt.Sprintf("file is larger than %d KiB; a policy file is small text", MaxFileSize>>10)}
	}
	if !utf8.Valid(data) {
		line := 1 + bytes.Count(data[:invalidUTF8At(data)], []byte("\n"))
		return nil, &Error{Source: name, Line: line, Msg: "not a text file (invalid UTF-8)"}
	}
	dec := toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields()
	if err := dec.Decode(&l.Config); err != nil {
		return nil, tomlError(name, err)
	}
	l.pos = &keyPositions{data: bytes.Clone(data)} // the caller may reuse data
	return l, nil
}

// LoadLayer reads and decodes a policy file of at most MaxFileSize bytes.
func LoadLayer(path string, kind Kind) (*Layer, error) {
	data, err := readSmallFile(path)
	if err != nil {
		return nil, err
	}
	l, err := ParseLayer(data, path, kind)
	if err != nil {
		return nil, err
	}
	l.Digest = sha256.Sum256(data)
	return l, nil
}

func readSmallFile(path string) ([]byte, error) {
	// O_NONBLOCK: opening a FIFO must not wait for a writer; it is then
	// refused as not a regular file.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, &Error{Source: path, Msg: "cannot read: " + errText(err), Err: err}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, &Error{Source: path, Msg: "cannot read: " + errText(err), Err: err}
	}
	if !st.Mode().IsRegular() {
		// A FIFO or a device would block or never end.
		return nil, &Error{Source: path, Msg: "not a regular file"}
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, &Error{Source: path, Msg: "cannot read: " + errText(err), Err: err}
	}
	if len(data) > MaxFileSize {
		return nil, &Error{Source: path, Msg: fmt.Sprintf("file is larger than %d KiB; a policy file is small text", MaxFileSize>>10)}
	}
	return data, nil
}

// errText is an OS error without the path it repeats.
func errText(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}

// tomlError turns go-toml's errors into an *Error with line and key.
func tomlError(name string, err error) error {
	var sm *toml.StrictMissingError
	if errors.As(err, &sm) && len(sm.Errors) > 0 {
		d := &sm.Errors[0]
		line, _ := d.Position()
		key := strings.Join(d.Key(), ".")
		msg := "unknown key"
		if len(sm.Errors) > 1 {
			msg += fmt.Sprintf(" (and %d more unknown keys)", len(sm.Errors)-1)
		}
		return &Error{Source: name, Line: line, Key: key, Msg: msg + "; see docs/profiles.md for the keys a policy file may hold", Err: err}
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		line, _ := de.Position()
		msg := strings.TrimPrefix(de.Error(), "toml: ")
		msg = typeMsg(msg)
		return &Error{Source: name, Line: line, Key: strings.Join(de.Key(), "."), Msg: msg, Err: err}
	}
	var pe *unstable.ParserError
	if errors.As(err, &pe) {
		return &Error{Source: name, Msg: pe.Message, Err: err}
	}
	return &Error{Source: name, Msg: err.Error(), Err: err}
}

var typeMsgRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^cannot decode TOML (\w+) into (?:struct field \S+ of type )?(\*?[\w.\[\]]+)$`)
})

// typeMsg rewords go-toml's Go-typed message for users.
func typeMsg(msg string) string {
	m := typeMsgRE().FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	want := m[2]
	switch strings.TrimLeft(want, "*") {
	case "string":
		want = "a string"
	case "bool":
		want = "true or false"
	case "int", "int64":
		want = "an integer"
	case "float64":
		want = "a number"
	default:
		switch {
		case strings.HasPrefix(want, "[]"):
			want = "a list"
		case strings.Contains(want, "PathEntry"):
			want = `a path string or a table {path = "..."}`
		case strings.HasPrefix(want, "map"):
			want = "a table"
		default:
			want = "a table"
		}
	}
	return fmt.Sprintf("wrong type: got a %s, want %s", m[1], want)
}

// keyLines maps every key of a document to its line: "a.b" for keys and
// tables, "a.b[2]" for array elements, "a.b[2].c" inside inline tables.
func keyLines(data []byte) (map[string]int, error) {
	out := map[string]int{}
	var p unstable.Parser
	p.Reset(data)
	nl := newlines(data)
	table := ""
	for p.NextExpression() {
		n := p.Expression()
		switch n.Kind {
		case unstable.Table, unstable.ArrayTable:
			it := n.Key()
			table = keyPath(&it)
			if first := n.Child(); first != nil {
				out[table] = nl.lineOf(first.Raw)
			}
		case unstable.KeyValue:
			it := n.Key()
			k := joinKey(table, keyPath(&it))
			out[k] = nl.lineOf(n.Raw)
			valueLines(nl, n.Value(), k, out)
		}
	}
	return out, p.Error()
}

func valueLines(nl newlineIndex, v *unstable.Node, key string, out map[string]int) {
	switch v.Kind {
	case unstable.Array:
		i := 0
		for it := v.Children(); it.Next(); {
			c := it.Node()
			if c.Kind == unstable.Comment {
				continue
			}
			k := key + "[" + strconv.Itoa(i) + "]"
			if c.Raw.Length > 0 {
				out[k] = nl.lineOf(c.Raw)
			}
			valueLines(nl, c, k, out)
			i++
		}
	case unstable.InlineTable:
		for it := v.Children(); it.Next(); {
			c := it.Node()
			if c.Kind != unstable.KeyValue {
				continue
			}
			kit := c.Key()
			k := joinKey(key, keyPath(&kit))
			out[k] = nl.lineOf(c.Raw)
			valueLines(nl, c.Value(), k, out)
		}
	}
}

func keyPath(it *unstable.Iterator) string {
	var parts []string
	for it.Next() {
		parts = append(parts, string(it.Node().Data))
	}
	return strings.Join(parts, ".")
}

func joinKey(a, b string) string {
	if a == "" {
		return b
	}
	return a + "." + b
}

// newlineIndex holds the offsets of a document's newlines, so that the
// line of every key is a binary search: the parser's Shape counts from the
// start of the document each time, which made the line numbers of a long
// list (the base profile's protect entries) quadratic, a tenth of a
// policy's resolution.
type newlineIndex []int

func newlines(data []byte) newlineIndex {
	var nl newlineIndex
	for i, c := range data {
		if c == '\n' {
			nl = append(nl, i)
		}
	}
	return nl
}

// lineOf is the 1-based line where r starts, or 0 for an empty range.
func (nl newlineIndex) lineOf(r unstable.Range) int {
	if r.Length == 0 && r.Offset == 0 {
		return 0
	}
	line, _ := slices.BinarySearch(nl, int(r.Offset))
	return line + 1
}
