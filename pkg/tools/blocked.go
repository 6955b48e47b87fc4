package tools

import (
	"fmt"
	"path"
	"regexp"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/syntax"
)

// The blocked-command list is a guard on top of the sandbox, NOT the
// boundary: it stops an agent from doing something obviously unwanted
// (sudo, rm -rf /) with a clear message, before anything runs. What keeps
// the host safe is the sandbox itself (no capabilities, no setuid, a
// read-only root, seccomp). A determined program can always build a command
// name the parser cannot see (`$(printf su)do`, a script file, an alias);
// such names are not resolved here, and the sandbox still contains them.

// DefaultBlockedCommands applies when the policy sets none.
var DefaultBlockedCommands = []string{
	"sudo", "su", "doas",
	"shutdown", "reboot", "halt", "poweroff",
	"mkfs*",
	"rm -rf /",
}

// BlockedError is a command refused by the blocked-command list.
type BlockedError struct {
	Command string // the offending command as parsed ("sudo id")
	Rule    string // the list entry that matched ("sudo")
}

func (e *BlockedError) Error() string {
	return fmt.Sprintf("command %q is blocked by the policy (rule %q); this is a guard, the sandbox would contain it anyway", e.Command, e.Rule)
}

// blockRule is one parsed entry of the list: a command-name glob, and
// optionally arguments that must all be present.
type blockRule struct {
	text  string
	name  string          // glob on the command's base name
	flags map[rune]bool   // short flags that must all be set ("-rf")
	words []string        // other words that must all be present
	root  bool            // an operand naming "/" (or "/*") must be present
	long  map[string]rune // long options that count as a short flag
}

// BlockList is a compiled blocked-command list.
type BlockList struct {
	rules []blockRule
}

// NewBlockList compiles entries: "NAME" (a glob: "mkfs*") blocks the command
// whatever its arguments; "NAME ARGS..." blocks it only when every listed
// argument is present, where a short-flag cluster ("-rf") is satisfied by
// the flags in any spelling (-rf, -fr, -r -f, -Rf, --recursive --force) and
// "/" is satisfied by any operand that names the root ("/", "//", "/*").
func NewBlockList(entries []string) (*BlockList, error) {
	bl := &BlockList{}
	for _, e := range entries {
		fields := strings.Fields(e)
		if len(fields) == 0 {
			continue
		}
		if _, err := path.Match(fields[0], "x"); err != nil {
			return nil, fmt.Errorf("blocked command %q: bad pattern: %v", e, err)
		}
		r := blockRule{text: e, name: fields[0]}
		for _, f := range fields[1:] {
			switch {
			case isRootOperand(f):
				r.root = true
			case len(f) > 1 && f[0] == '-' && f[1] != '-':
				if r.flags == nil {
					r.flags = map[rune]bool{}
				}
				for _, c := range f[1:] {
					r.flags[c] = true
				}
			default:
				r.words = append(r.words, f)
			}
		}
		if fields[0] == "rm" {
			// rm's own aliases of -r and -f.
			r.long = map[string]rune{"--recursive": 'r', "-R": 'r', "--force": 'f'}
		}
		bl.rules = append(bl.rules, r)
	}
	return bl, nil
}

// rootOperand matches "/", "//", "/.", "/*", "/./*": operands that mean the
// whole root (a glob that expands to every top-level entry included).
var rootOperand = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^/[/.*]*$`) })

func isRootOperand(s string) bool { return rootOperand().MatchString(s) }

func (r *blockRule) matches(argv []string) bool {
	if ok, _ := path.Match(r.name, path.Base(argv[0])); !ok {
		return false
	}
	if len(r.flags) == 0 && len(r.words) == 0 && !r.root {
		return true
	}
	have := map[rune]bool{}
	words := map[string]bool{}
	root := false
	endOpts := false
	for _, a := range argv[1:] {
		switch {
		case endOpts:
			root = root || isRootOperand(a)
		case a == "--":
			endOpts = true
		case r.long[a] != 0:
			have[r.long[a]] = true
		case len(a) > 1 && a[0] == '-' && a[1] != '-':
			for _, c := range a[1:] {
				if alias, ok := r.long["-"+string(c)]; ok {
					c = alias
				}
				have[c] = true
			}
		default:
			root = root || isRootOperand(a)
		}
		words[a] = true
	}
	for f := range r.flags {
		if !have[f] {
			return false
		}
	}
	for _, w := range r.words {
		if !words[w] {
			return false
		}
	}
	return !r.root || root
}

// dynamicWord stands for a word whose value is only known at run time. It
// holds a NUL byte, which no real argument can, so it matches no rule.
const dynamicWord = "\x00dynamic"

// maxNesting bounds how deep `sh -c '...'` and eval strings are re-parsed.
const maxNesting = 4

// CheckShell parses a shell command line (as /bin/sh -c would run it) and
// checks every simple command in it: in pipelines, lists (&&, ||, ;),
// subshells, command substitutions, functions, and the strings given to
// `sh -c` and `eval`. A line that does not parse is refused: the guard
// fails closed.
func (bl *BlockList) CheckShell(cmd string) error {
	return bl.checkShell(cmd, 0)
}

func (bl *BlockList) checkShell(cmd string, depth int) error {
	if depth > maxNesting {
		return fmt.Errorf("command nests shells more than %d levels deep", maxNesting)
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(cmd), "")
	if err != nil {
		return fmt.Errorf("cannot parse the command line: %v", err)
	}
	var found error
	syntax.Walk(f, func(n syntax.Node) bool {
		if found != nil {
			return false
		}
		ce, ok := n.(*syntax.CallExpr)
		if !ok || len(ce.Args) == 0 {
			return true
		}
		argv := make([]string, len(ce.Args))
		for i, w := range ce.Args {
			// A word with an expansion ($x, $(...)) has no static value:
			// it matches no rule (its inner commands are visited by Walk
			// on their own).
			if v, ok := literal(w); ok {
				argv[i] = v
			} else {
				argv[i] = dynamicWord
			}
		}
		found = bl.checkArgv(argv, depth)
		return found == nil
	})
	return found
}

// CheckArgv checks a command given as an argv (no shell involved).
func (bl *BlockList) CheckArgv(argv []string) error {
	return bl.checkArgv(argv, 0)
}

func (bl *BlockList) checkArgv(argv []string, depth int) error {
	argv = unwrap(argv)
	if len(argv) == 0 || argv[0] == "" || argv[0] == dynamicWord {
		return nil
	}
	for i := range bl.rules {
		if bl.rules[i].matches(argv) {
			return &BlockedError{Command: strings.Join(argv, " "), Rule: bl.rules[i].text}
		}
	}
	// A shell's -c string and eval's arguments are command lines of their
	// own.
	switch path.Base(argv[0]) {
	case "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox":
		for i := 1; i+1 < len(argv); i++ {
			if argv[i] == "-c" || (len(argv[i]) > 1 && argv[i][0] == '-' && argv[i][1] != '-' && strings.ContainsRune(argv[i], 'c')) {
				return bl.checkShell(argv[i+1], depth+1)
			}
		}
	case "eval":
		return bl.checkShell(strings.Join(argv[1:], " "), depth+1)
	}
	return nil
}

// wrappers run their operand as a command; the value says how many of their
// own option words take an argument (so that the operand can be found).
var wrappers = map[string]map[string]bool{
	"exec": {"-a": true}, "command": {}, "builtin": {}, "nohup": {}, "setsid": {},
	"time": {"-f": true, "-o": true}, "nice": {"-n": true}, "ionice": {"-c": true, "-n": true, "-t": false},
	"env": {"-u": true, "-C": true, "-S": true}, "stdbuf": {"-i": true, "-o": true, "-e": true},
	"timeout": {"-s": true, "-k": true}, "xargs": {"-a": true, "-d": true, "-E": true, "-I": true, "-L": true, "-n": true, "-P": true, "-s": true},
	"chrt": {}, "taskset": {}, "flock": {"-w": true, "-E": true}, "unbuffer": {},
}

// unwrap strips wrapper commands (env, nice, timeout, xargs, busybox ...)
// to find the command that actually runs: `env sudo id` runs sudo.
func unwrap(argv []string) []string {
	for n := 0; n < 8 && len(argv) > 0; n++ {
		name := path.Base(argv[0])
		if name == "busybox" && len(argv) > 1 && !strings.HasPrefix(argv[1], "-") {
			argv = argv[1:]
			continue
		}
		opts, ok := wrappers[name]
		if !ok {
			return argv
		}
		if name == "command" && len(argv) > 1 && (argv[1] == "-v" || argv[1] == "-V") {
			return nil // `command -v sudo` looks a name up, it runs nothing
		}
		i := 1
		for i < len(argv) {
			a := argv[i]
			if a == "--" {
				i++
				break
			}
			if name == "env" && strings.Contains(a, "=") && !strings.HasPrefix(a, "-") {
				i++ // VAR=value
				continue
			}
			if !strings.HasPrefix(a, "-") || a == "-" {
				break
			}
			if name == "env" && (a == "-S" || strings.HasPrefix(a, "--split-string")) && i+1 < len(argv) {
				// env -S "sudo id": the string is split into words.
				return unwrap(append(strings.Fields(argv[i+1]), argv[i+2:]...))
			}
			if opts[a] {
				i++
			}
			i++
		}
		// timeout DURATION CMD, chrt PRIO CMD, taskset MASK CMD, flock FILE CMD
		switch name {
		case "timeout", "chrt", "taskset", "flock":
			i++
		}
		if i >= len(argv) {
			return nil
		}
		argv = argv[i:]
	}
	return argv
}

// literal returns the static value of a shell word, with quotes and
// escapes removed, and whether it had one.
func literal(w *syntax.Word) (string, bool) {
	var b strings.Builder
	static := true
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			b.WriteString(unescape(p.Value, false))
		case *syntax.SglQuoted:
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				if l, ok := q.(*syntax.Lit); ok {
					b.WriteString(unescape(l.Value, true))
				} else {
					static = false
				}
			}
		default:
			static = false
		}
	}
	return b.String(), static
}

// unescape removes shell backslash escapes: every one outside quotes, and
// only those before $ ` " \ and newline inside double quotes.
func unescape(s string, dquoted bool) string {
	if !strings.ContainsRune(s, '\\') {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			next := s[i+1]
			if !dquoted || strings.IndexByte("$`\"\\\n", next) >= 0 {
				if next != '\n' {
					b.WriteByte(next)
				}
				i++
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
