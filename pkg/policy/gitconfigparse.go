package policy

import "strings"

// A git config file read as git reads it (config.c's git_parse_source),
// for the variables that send git somewhere: the protections built from
// them are only as good as this reading. Every way git reads a line that a
// looser reading missed is a path the sandbox could write and host git
// would then run or include: a comment that ends in a backslash does not
// go on to the next line (a reader that joined them lost the next
// variable), a quoted subsection may hold "]" and the variable may follow
// on the header's line, a UTF-8 byte order mark is skipped.
//
// Where git's versions differ, every reading is kept: whitespace inside
// an unquoted value becomes a space in older git (2.39 among them) and
// is kept as written in newer releases, so such a value has both. Where git would refuse
// the file (a bad header or key, an unknown escape), git reads none of
// it; this reader goes on at the next line and keeps what it finds, which
// at worst protects more.

// gitConfigVar is one variable of a git config file.
type gitConfigVar struct {
	// base is the section as git names it: lower case, then a dot and
	// the quoted subsection as written ("includeif.gitdir:~/w/"); the
	// old "[section.sub]" form is all lower case.
	base string
	// section is base up to its first dot: the section's own name.
	section string
	key     string // lower case
	// values are the value's readings (one, or two where git versions
	// differ); nil for a key without "=" (a boolean true).
	values []string
}

// name is the variable's full name as `git config --list` prints it.
func (v gitConfigVar) name() string {
	if v.base == "" {
		return v.key // a variable before any section
	}
	return v.base + "." + v.key
}

// parseGitConfig reads the variables of a git config file, in order.
func parseGitConfig(b []byte) []gitConfigVar {
	p := &gitConfigParser{b: b}
	// git skips a UTF-8 byte order mark at the start of a file.
	if len(b) >= 3 && b[0] == 0xef && b[1] == 0xbb && b[2] == 0xbf {
		p.pos = 3
	}
	var out []gitConfigVar
	base := ""
	for {
		c, ok := p.next()
		if !ok {
			return out
		}
		switch {
		case c == '\n' || isConfigSpace(c):
		case c == '#' || c == ';':
			// A comment runs to the end of its line; a backslash at
			// its end does not continue it.
			p.skipLine()
		case c == '[':
			b, ok := p.header()
			if !ok {
				p.skipLine()
				continue
			}
			base = b
		case isASCIIAlpha(c):
			v, ok := p.variable(c)
			if !ok {
				p.skipLine()
				continue
			}
			v.base = base
			v.section, _, _ = strings.Cut(base, ".")
			out = append(out, v)
		default:
			p.skipLine()
		}
	}
}

type gitConfigParser struct {
	b   []byte
	pos int
}

// next is git's get_next_char: "\r\n" reads as "\n"; false at the end.
func (p *gitConfigParser) next() (byte, bool) {
	if p.pos >= len(p.b) {
		return 0, false
	}
	c := p.b[p.pos]
	p.pos++
	if c == '\r' && p.pos < len(p.b) && p.b[p.pos] == '\n' {
		p.pos++
		return '\n', true
	}
	return c, true
}

func (p *gitConfigParser) unread(c byte) {
	if c == '\n' && p.pos >= 2 && p.b[p.pos-2] == '\r' && p.b[p.pos-1] == '\n' {
		p.pos -= 2
		return
	}
	p.pos--
}

func (p *gitConfigParser) skipLine() {
	for {
		c, ok := p.next()
		if !ok || c == '\n' {
			return
		}
	}
}

// header reads a section header after its "[" and returns git's name for
// the section: `[name]`, `[name "sub"]` (the subsection quoted, with \"
// and \\ escapes, and any other byte but a newline: "]" too), or the old
// `[name.sub]`.
func (p *gitConfigParser) header() (string, bool) {
	var name strings.Builder
	for {
		c, more := p.next()
		if !more || c == '\n' {
			return "", false
		}
		if c == ']' {
			return name.String(), true
		}
		if isConfigSpace(c) {
			sub, ok := p.quotedSubsection()
			if !ok {
				return "", false
			}
			return name.String() + "." + sub, true
		}
		if !isKeyChar(c) && c != '.' {
			return "", false
		}
		name.WriteByte(toLowerASCII(c))
	}
}

func (p *gitConfigParser) quotedSubsection() (string, bool) {
	c, ok := p.next()
	for ok && isConfigSpace(c) {
		c, ok = p.next()
	}
	if !ok || c != '"' {
		return "", false
	}
	var sub strings.Builder
	for {
		c, ok = p.next()
		if !ok || c == '\n' {
			return "", false
		}
		if c == '"' {
			break
		}
		if c == '\\' {
			if c, ok = p.next(); !ok || c == '\n' {
				return "", false
			}
		}
		sub.WriteByte(c)
	}
	if c, ok = p.next(); !ok || c != ']' {
		return "", false
	}
	return sub.String(), true
}

// variable reads a key (its first letter is first) and its value.
func (p *gitConfigParser) variable(first byte) (gitConfigVar, bool) {
	var key strings.Builder
	key.WriteByte(toLowerASCII(first))
	c, ok := p.next()
	for ok && isKeyChar(c) {
		key.WriteByte(toLowerASCII(c))
		c, ok = p.next()
	}
	v := gitConfigVar{key: key.String()}
	for ok && isConfigSpace(c) {
		c, ok = p.next()
	}
	if !ok || c == '\n' {
		if ok {
			p.unread(c)
		}
		return v, true // no "=": a boolean true
	}
	if c != '=' {
		return v, false
	}
	v.values = p.value()
	return v, true
}

// value is git's parse_value, read twice at once: with whitespace inside
// the unquoted value turned into spaces, and kept as written.
func (p *gitConfigParser) value() []string {
	var spaced, kept strings.Builder
	quote, comment := false, false
	trimSpaced, trimKept := -1, -1 // where trailing unquoted whitespace began
	for {
		c, ok := p.next()
		if !ok || c == '\n' {
			// A newline inside quotes makes the file bad for git;
			// what was read is kept.
			s, k := spaced.String(), kept.String()
			if trimSpaced >= 0 {
				s = s[:trimSpaced]
			}
			if trimKept >= 0 {
				k = k[:trimKept]
			}
			if s == k {
				return []string{s}
			}
			return []string{s, k}
		}
		if comment {
			continue
		}
		if isConfigSpace(c) && !quote {
			if trimSpaced < 0 {
				trimSpaced, trimKept = spaced.Len(), kept.Len()
			}
			// Leading whitespace is dropped.
			if spaced.Len() > 0 {
				spaced.WriteByte(' ')
				kept.WriteByte(c)
			}
			continue
		}
		if !quote && (c == ';' || c == '#') {
			comment = true
			continue
		}
		trimSpaced, trimKept = -1, -1
		switch c {
		case '\\':
			e, ok := p.next()
			if !ok {
				continue
			}
			switch e {
			case '\n':
				continue // the value goes on on the next line
			case 't':
				e = '\t'
			case 'b':
				e = '\b'
			case 'n':
				e = '\n'
			}
			// \\ and \" are themselves; git refuses the file for any
			// other escape, read here as the byte.
			spaced.WriteByte(e)
			kept.WriteByte(e)
		case '"':
			quote = !quote
		default:
			spaced.WriteByte(c)
			kept.WriteByte(c)
		}
	}
}

// isConfigSpace is git's isspace (sane_ctype: space, tab, carriage
// return and newline; not \v or \f), but for the newline, which ends
// lines and values.
func isConfigSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r'
}

func isASCIIAlpha(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

func isKeyChar(c byte) bool { return isASCIIAlpha(c) || (c >= '0' && c <= '9') || c == '-' }

func toLowerASCII(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
