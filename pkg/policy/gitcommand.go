package policy

import (
	"path"
	"path/filepath"
	"strings"
)

// What a command line in a git config runs. git hands these values to the
// shell (or runs them as a program); the sandbox may write into the work
// tree, and the host's git runs them later as the user. So the files they
// name are protected: this reader finds them. It is not a shell: it reads
// what git configs are written like, and where it cannot tell, it says so
// (ifExists) or names nothing, rather than guess a path that would become
// a placeholder in the user's repository.

// commandProgram is the first word of a shell command line as git's
// configs write them: a leading "!" dropped, VAR=value words skipped, and
// simple quoting ('...', "...", backslash) undone. Not a shell: what it
// cannot read (a subshell, a variable) gives a word with no path in it,
// or a path that does not exist.
func commandProgram(cmd string) string {
	cmd = strings.TrimPrefix(strings.TrimSpace(cmd), "!")
	for {
		cmd = strings.TrimLeft(cmd, " \t")
		word, rest := shellWord(cmd)
		if word == "" {
			return ""
		}
		if eq := strings.IndexByte(word, '='); eq > 0 && isShellName(word[:eq]) {
			cmd = rest
			continue
		}
		return word
	}
}

// cmdFile is a word of a command that names a file the command runs or
// may run, relative to the work tree's top unless absolute or under ~.
type cmdFile struct {
	word string
	// ifExists: a word that may name a file that runs, or may be an
	// argument that only looks like a path (sed's s/a/b/, a directory
	// to lint): protected only where a regular file is there already.
	ifExists bool
	// glob: word holds * ? or [: each regular file it matches.
	glob bool
	// pythonCwd: no file, but a note that the command runs Python with
	// a directory of the work tree first on its import path (the
	// current one for -m and -c, the script's for a script; without -P,
	// -I or PYTHONSAFEPATH), which no list of names can close.
	pythonCwd bool
	// envIgnored: that Python ignores PYTHONSAFEPATH (-E).
	envIgnored bool
}

// commandFiles returns the files a shell command line (as git's configs
// write them) runs:
//   - the program of each command in it (after ;, |, &&, {, then, ...,
//     and after prefixes such as env, exec, timeout 5, nice), when it is
//     a path;
//   - the script an interpreter runs (sh tools/x.sh, python3 -u
//     tools/clean.py, node scripts/x.js, deno run x.ts: the first word
//     after its options and their arguments and its subcommand), path or
//     not, as the interpreter opens it from the current directory;
//     ifExists unless it looks like a script (a slash or a script's
//     extension); python's -m module as its file; node's and ruby's
//     preloaded files (-r);
//   - the code of sh -c (and -lc, -ec, ...), read as a command line;
//   - ssh's -F file and ProxyCommand;
//   - ifExists, every other word with a slash in it.
//
// A relative path after `cd DIR` is taken in DIR. A word that starts
// with $(git rev-parse --show-toplevel) (or its backquoted form) is taken
// from the work tree's top, one that starts with $HOME or ${HOME} from
// the home directory; any other word with a $ or a backquote names
// nothing. Protecting only the program left `core.fsmonitor = sh
// tools/x.sh`'s script writable, and a plain git status ran what the
// sandbox wrote there (review 55); bash -lc's code, cd, the toplevel
// idiom and interpreters' options were misread (review 57).
func commandFiles(cmd string) []cmdFile {
	r := cmdReader{}
	r.read(strings.TrimPrefix(strings.TrimSpace(cmd), "!"), 0)
	return r.out
}

// maxCommandDepth bounds the command lines read inside each other (sh -c,
// ProxyCommand).
const maxCommandDepth = 3

type cmdReader struct {
	out []cmdFile
	// dir is where `cd` went, relative to the top ("" there); dirLost
	// says a cd went where this reader cannot follow.
	dir     string
	dirLost bool
	dirs    []cdState // the directories before each open subshell
	// safePath: the current python keeps the work tree off its import
	// path (-P, -I, or PYTHONSAFEPATH in the command); safeFlag: by a
	// flag; envIgnored: it was given -E, which ignores PYTHONSAFEPATH,
	// nsbox's own included.
	safePath, safeFlag, envIgnored bool
}

type cdState struct {
	dir  string
	lost bool
}

// add records word, a path relative to the command's current directory.
func (r *cmdReader) add(word string, ifExists bool) {
	for _, w := range braceExpand(word) {
		w, ok := r.place(w)
		if !ok {
			continue
		}
		f := cmdFile{word: w, ifExists: ifExists}
		if r.dirLost && !filepath.IsAbs(w) && !strings.HasPrefix(w, "~") {
			f.ifExists = true // where it is relative to is not known
		}
		if strings.ContainsAny(w, "*?[") {
			if ifExists {
				continue // an argument's pattern (eslint src/*.js, sed's s/^.*//)
			}
			// sh hooks/*.sh: a program's or a script's pattern, never a
			// placeholder named "*.sh".
			f.glob = true
		}
		r.out = append(r.out, f)
	}
}

// maxBraceWords bounds what one word's braces expand to.
const maxBraceWords = 16

// braceExpand expands the {a,b,...} groups of word, as bash does, into
// at most maxBraceWords words (the first ones), in time linear in that
// bound: the groups are expanded one round at a time, the words of a
// round capped before the next (a recursion over 40 groups of {a,b}
// took seconds, review 62). A word without a group is itself.
func braceExpand(word string) []string {
	out := []string{word}
	for round := 0; round < maxBraceWords; round++ {
		var next []string
		changed := false
		for _, w := range out {
			i := strings.IndexByte(w, '{')
			j := -1
			if i >= 0 {
				j = strings.IndexByte(w[i+1:], '}')
			}
			if j < 0 || !strings.Contains(w[i:i+1+j], ",") {
				next = append(next, w)
				continue
			}
			changed = true
			for _, alt := range strings.Split(w[i+1:i+1+j], ",") {
				if len(next) == maxBraceWords {
					break
				}
				next = append(next, w[:i]+alt+w[i+2+j:])
			}
		}
		out = next
		if !changed {
			break
		}
	}
	return out
}

// place turns word into a path from the top (or absolute, or under ~),
// or reports that it names nothing this reader can place.
func (r *cmdReader) place(word string) (string, bool) {
	for _, top := range []string{"$(git rev-parse --show-toplevel)", "`git rev-parse --show-toplevel`"} {
		if rest, ok := strings.CutPrefix(word, top); ok {
			rest = strings.TrimLeft(rest, "/")
			if rest == "" || strings.ContainsAny(rest, "$`") {
				return "", false
			}
			return rest, true
		}
	}
	for _, home := range []string{"${HOME}", "$HOME"} {
		if rest, ok := strings.CutPrefix(word, home); ok && (rest == "" || rest[0] == '/') {
			word = "~" + rest
			break
		}
	}
	if word == "" || strings.ContainsAny(word, "$`") {
		return "", false
	}
	if r.dir != "" && !filepath.IsAbs(word) && !strings.HasPrefix(word, "~") {
		word = filepath.Join(r.dir, word)
	}
	return word, true
}

// module records what `python -m MOD` runs from the current directory:
// MOD's own file and every package on the way (tools/__init__.py runs
// before tools/lint.py), protected where they are. Where they are not,
// no placeholder: an empty json.py at the top shadowed the standard
// library's json inside the sandbox, and Python takes a module from
// MOD.pyc or MOD.abi3.so as well, and from whatever MOD imports (review
// 61). What closes it is on the user's side (-P, PYTHONSAFEPATH): the
// reader notes the command (pythonCwd) and the resolver says so.
func (r *cmdReader) module(mod string) {
	if mod == "" || strings.ContainsAny(mod, "/$`") || strings.Count(mod, ".") > 8 {
		return
	}
	parts := strings.Split(mod, ".")
	for i := range parts {
		p := strings.Join(parts[:i+1], "/")
		r.add(p+".py", true)
		r.add(p+"/__init__.py", true)
	}
	r.add(strings.Join(parts, "/")+"/__main__.py", true)
	r.pythonCwd()
}

// pythonCwd notes a Python that imports from the current directory,
// unless -P or -I was given.
func (r *cmdReader) pythonCwd() {
	if !r.safePath {
		r.out = append(r.out, cmdFile{pythonCwd: true, envIgnored: r.envIgnored})
	}
}

// maxCdDepth bounds the directory a chain of cd reaches: past it the
// reader stops following (a hostile config of `cd a/a/...;` repeated
// made every later word a longer path).
const maxCdDepth = 64

// cd follows `cd DIR` for the words after it.
func (r *cmdReader) cd(dir string) {
	dir, ok := r.place(dir)
	switch {
	case !ok || dir == "-" || strings.HasPrefix(dir, "~"):
		r.dirLost = true
	case filepath.IsAbs(dir):
		r.dir = filepath.Clean(dir)
	default:
		// place() joined it to the current directory already.
		r.dir = filepath.Clean(dir)
		if r.dir == "." {
			r.dir = ""
		}
	}
	if strings.Count(r.dir, "/") >= maxCdDepth {
		r.dir, r.dirLost = "", true
	}
}

func (r *cmdReader) read(cmd string, depth int) {
	start := true // the next word is a command's program
	var prog, prefix, needSub string
	needDuration, safeEnv, forList := false, false, false
	splices := 0
	// What the next word is to the program: "script" (an interpreter's,
	// still to come), "code" (a command line), "arg" (an option's
	// argument, skipped), "file" (a file it reads and runs), "maybe" (an
	// option's argument that may be a file that runs), "module"
	// (python -m), "option" (ssh -o), "dir" (cd), "skip" (one word that
	// is no program: timeout's duration).
	next := ""
	for {
		cmd = strings.TrimLeft(cmd, " \t")
		if cmd == "" {
			return
		}
		switch c := cmd[0]; c {
		case ';', '|', '&', '\n':
			cmd = strings.TrimLeft(cmd, ";|&\n \t")
			start, next, prefix, needSub, safeEnv, forList = true, "", "", "", false, false
			continue
		case '(':
			// A subshell: its cd ends with it.
			cmd = cmd[1:]
			r.dirs = append(r.dirs, cdState{r.dir, r.dirLost})
			start, next = true, ""
			continue
		case ')':
			cmd = cmd[1:]
			if n := len(r.dirs); n > 0 {
				r.dir, r.dirLost = r.dirs[n-1].dir, r.dirs[n-1].lost
				r.dirs = r.dirs[:n-1]
			}
			start, next = false, ""
			continue
		case '<', '>':
			// A redirection: its target is a file read or written,
			// not run.
			cmd = strings.TrimLeft(cmd, "<>&")
			cmd = strings.TrimLeft(cmd, " \t")
			_, cmd = shellWord(cmd)
			continue
		}
		word, rest := shellWord(cmd)
		cmd = rest
		if word == "" {
			continue
		}
		switch next {
		case "code":
			if depth < maxCommandDepth {
				saved := *r
				r.read(word, depth+1)
				// The code's cd stays in its shell.
				r.dir, r.dirLost, r.dirs = saved.dir, saved.dirLost, saved.dirs
			}
			next = ""
			continue
		case "arg":
			next = "script"
			continue
		case "skip":
			next = ""
			continue
		case "file":
			r.add(word, false)
			next = ""
			continue
		case "maybe":
			// A file, or a package's module (-r ts-node/register).
			r.add(word, !isPathWord(word))
			next = "script"
			continue
		case "module":
			r.module(word)
			next = ""
			continue
		case "option":
			r.sshOption(word, depth)
			next = ""
			continue
		case "dir":
			if strings.HasPrefix(word, "-") && word != "-" {
				continue // cd -P DIR, cd -- DIR
			}
			r.cd(word)
			next = ""
			continue
		case "split":
			if splices < maxCommandDepth {
				splices++
				cmd = word + " " + cmd // env -S: read in its place
			}
			next = ""
			continue
		case "scriptdir":
			r.cd(word) // uv run --directory DIR, bun --cwd DIR
			next = "script"
			continue
		}
		if start {
			if eq := strings.IndexByte(word, '='); eq > 0 && isShellName(word[:eq]) {
				// VAR=value before the program (or after env).
				// PYTHONSAFEPATH keeps the working directory off
				// Python's import path, as -P does.
				if word[:eq] == "PYTHONSAFEPATH" && word[eq+1:] != "" {
					safeEnv = true
				}
				continue
			}
			base := path.Base(word)
			if commandKeywords[word] || strings.HasSuffix(word, "()") {
				continue // the program comes next
			}
			if needSub != "" && !strings.HasPrefix(word, "-") {
				// A runner's subcommand (uv run, bundle exec): the
				// command comes next.
				if word == needSub {
					needSub = ""
					if prefix == "direnv" {
						next = "skip" // direnv exec DIR COMMAND
					}
				} else {
					needSub, prefix = "", ""
					start = false // another subcommand: nothing is run
				}
				continue
			}
			if word == "--" || (prefix == "mise" && strings.Contains(word, "@")) {
				continue // the end of options; mise exec's tool@version
			}
			if sub, ok := commandRunners[base]; ok {
				if _, runner := commandRunners[prefix]; !runner {
					prefix, needSub = base, sub // also after env, exec, timeout
					continue
				}
			}
			if commandPrefixes[base] {
				prefix, needDuration = base, base == "timeout"
				continue
			}
			if needDuration && !strings.HasPrefix(word, "-") {
				needDuration = false // timeout's duration, then the program
				continue
			}
			if strings.HasPrefix(word, "-") {
				// A prefix's option (nice -n 5, env -i), and its
				// argument where it takes one; env -C DIR changes
				// the directory.
				flag, val, attached := strings.Cut(word, "=")
				switch {
				case (prefix == "env" && (flag == "-C" || flag == "--chdir")) || dirFlags[prefix][flag]:
					if attached {
						r.cd(val)
					} else {
						next = "dir"
					}
				case prefix == "npx" && (flag == "-c" || flag == "--call"):
					if attached {
						r.read(val, depth+1)
					} else {
						next = "code"
					}
				case prefix == "env" && (flag == "-S" || flag == "--split-string"):
					// env -S 'python3 -u' x.py: the string is the
					// start of the command, read in its place; a few
					// times a command at most (env -S=-S=... spliced
					// the rest of the line again each time, review 66).
					switch {
					case splices >= maxCommandDepth:
						next = "skip"
					case attached:
						splices++
						cmd = val + " " + cmd
					default:
						next = "split"
					}
				case prefixArgFlags[prefix][flag] && !attached:
					next = "skip"
				}
				continue
			}
			if _, runner := commandRunners[prefix]; runner {
				// uv run x.py: a script by name, run as Python is.
				if looksLikeScript(word) && !strings.Contains(word, "/") {
					r.add(word, false)
					if strings.HasSuffix(word, ".py") && !safeEnv {
						r.pythonCwd()
					}
				}
			}
			if strings.Contains(word, "/") {
				r.add(word, false)
			}
			start, prog, next, prefix = false, base, "", ""
			r.safePath, r.safeFlag, r.envIgnored = safeEnv, false, false
			switch {
			case prog == "cd" || prog == "pushd":
				next = "dir"
			case isInterpreter(prog):
				next = "script"
			}
			continue
		}
		if next == "script" {
			r.scriptWord(prog, word, &next)
			continue
		}
		if prog == "ssh" {
			switch {
			case word == "-F":
				next = "file"
				continue
			case strings.HasPrefix(word, "-F"):
				r.add(word[2:], false)
				continue
			case word == "-o":
				next = "option"
				continue
			case strings.HasPrefix(word, "-o"):
				r.sshOption(word[2:], depth)
				continue
			}
		}
		if prog == "for" && word == "in" {
			forList = true
			continue
		}
		if strings.Contains(word, "/") && !strings.HasPrefix(word, "-") {
			// The words a for loop goes over are what its body runs,
			// as a rule (for f in tools/*.sh; do sh "$f"; done).
			r.add(word, !forList)
		}
	}
}

// sshOption reads an ssh -o option (KEY=VALUE, or KEY VALUE as
// ssh_config writes it): the ones whose value is a command line ssh runs.
func (r *cmdReader) sshOption(opt string, depth int) {
	k, v, ok := strings.Cut(opt, "=")
	if !ok {
		k, v, ok = strings.Cut(strings.TrimSpace(opt), " ")
	}
	if !ok || depth >= maxCommandDepth {
		return
	}
	switch strings.ToLower(strings.TrimSpace(k)) {
	case "proxycommand", "knownhostscommand", "localcommand", "remotecommand":
		saved := *r
		r.read(v, depth+1)
		r.dir, r.dirLost, r.dirs = saved.dir, saved.dirLost, saved.dirs
	}
}

// scriptWord reads word, which follows interpreter prog before its
// script: an option (and whether an argument follows), a subcommand, or
// the script.
func (r *cmdReader) scriptWord(prog, word string, next *string) {
	family := interpreterFamily(prog)
	if strings.HasPrefix(word, "-") && word != "-" {
		flag, attached, _ := strings.Cut(word, "=")
		switch {
		case family == "sh" && shellFlags(word, 'c'):
			*next = "code"
		case family == "sh" && (shellFlags(word, 'o') || shellFlags(word, 'O')) && strings.IndexAny(word, "oO") == len(word)-1:
			*next = "arg" // -o pipefail, -euo pipefail
		case family == "python" && shellFlags(word, 'E') && !shellFlags(word, 'P') && !shellFlags(word, 'I'):
			// -E ignores PYTHONSAFEPATH (every PYTHON* variable).
			r.safePath, r.envIgnored = r.safeFlag, true
			switch {
			case strings.HasSuffix(word, "m"):
				*next = "module"
			case strings.HasSuffix(word, "c"):
				r.pythonCwd()
				*next = "skip"
			}
		case family == "python" && shellFlags(word, 'P') || family == "python" && shellFlags(word, 'I'):
			r.safePath, r.safeFlag = true, true
			switch {
			case strings.HasSuffix(word, "m"):
				*next = "module" // -Pm MOD
			case strings.HasSuffix(word, "c"):
				*next = "skip" // -Pc CODE: code, no script
			}
		case family == "python" && strings.HasPrefix(word, "-m") && len(word) > 2:
			r.module(word[2:]) // -mMOD
			*next = ""
		case family == "python" && shellFlags(word, 'm') && strings.HasSuffix(word, "m"):
			*next = "module" // -m MOD, -um MOD
		case family == "python" && shellFlags(word, 'c') && strings.HasSuffix(word, "c"):
			r.pythonCwd() // -c CODE: imports from the current directory too
			*next = "skip"
		case codeFlags[family][flag]:
			*next = "skip" // code given inline (node -e): no script
		case dirFlags[family][flag] && attached != "":
			r.cd(attached)
		case dirFlags[family][flag]:
			*next = "scriptdir"
		case fileFlags[family][flag] && attached != "":
			r.add(attached, !isPathWord(attached)) // node --import=FILE
		case fileFlags[family][flag]:
			*next = "maybe" // node -r FILE, ruby -r FILE
		case argFlags[family][flag] && attached == "":
			*next = "arg"
		}
		return
	}
	if subcommands[family][word] {
		return // deno run, bun test: the script comes next
	}
	if family == "deno" && word == "eval" {
		*next = "" // code, not a script
		return
	}
	*next = ""
	r.add(word, !looksLikeScript(word))
	if family == "python" {
		// The script's directory comes first on its import path: a
		// json.py a sandbox makes beside tools/x.py runs too.
		r.pythonCwd()
	}
}

// isPathWord: a word that names a path for sure, not a module: "./x",
// "../x", "/x".
func isPathWord(w string) bool {
	return strings.HasPrefix(w, "./") || strings.HasPrefix(w, "../") || strings.HasPrefix(w, "/")
}

// shellFlags reports whether word is a group of a shell's one-letter
// options (-c, -lc, -euc) holding f.
func shellFlags(word string, f byte) bool {
	if len(word) < 2 || word[0] != '-' || word[1] == '-' {
		return false
	}
	for i := 1; i < len(word); i++ {
		if !isASCIIAlpha(word[i]) {
			return false
		}
	}
	return strings.IndexByte(word[1:], f) >= 0
}

// looksLikeScript: a word that is a script's path for sure (a slash in it,
// or a script's extension); another one (bun test) may be a subcommand or
// a file.
func looksLikeScript(word string) bool {
	if strings.Contains(word, "/") {
		return true
	}
	switch filepath.Ext(word) {
	case ".sh", ".bash", ".zsh", ".py", ".js", ".mjs", ".cjs", ".ts", ".mts", ".cts", ".rb", ".pl", ".pm", ".php", ".lua", ".tcl", ".ps1", ".R", ".r":
		return true
	}
	return false
}

// commandRunners run the command after their subcommand (uv run CMD,
// bundle exec CMD); npx runs a package's program or a script.
var commandRunners = map[string]string{
	"uv": "run", "poetry": "run", "pipenv": "run", "conda": "run", "pixi": "run",
	"bundle": "exec", "direnv": "exec", "mise": "exec", "pnpm": "exec",
	"npx": "", // npx PROGRAM: no subcommand
}

// prefixArgFlags are command prefixes' options that take an argument,
// which is not the program.
var prefixArgFlags = map[string]map[string]bool{
	"nice":    {"-n": true, "--adjustment": true},
	"ionice":  {"-c": true, "-n": true, "-p": true},
	"timeout": {"-s": true, "--signal": true, "-k": true, "--kill-after": true},
	"sudo":    {"-u": true, "-g": true, "-C": true, "-D": true, "-h": true, "-p": true, "-r": true, "-t": true, "-U": true},
	"doas":    {"-u": true, "-C": true},
	"env":     {"-u": true, "--unset": true, "-S": true, "--split-string": true},
	"xargs":   {"-a": true, "-d": true, "-E": true, "-I": true, "-L": true, "-n": true, "-P": true, "-s": true},
	"stdbuf":  {"-i": true, "-o": true, "-e": true},
	"uv":      {"--python": true, "-p": true, "--with": true, "--with-requirements": true, "--project": true, "--env-file": true, "--package": true},
	"poetry":  {"-C": true, "--directory": true, "-P": true, "--project": true},
	"conda":   {"-n": true, "--name": true, "-p": true, "--prefix": true},
	"pixi":    {"-e": true, "--environment": true, "--manifest-path": true},
	"npx":     {"-p": true, "--package": true},
}

// commandKeywords start a command: the program comes after them.
var commandKeywords = map[string]bool{
	"{": true, "(": true, "!": true, "if": true, "then": true, "else": true, "elif": true,
	"do": true, "while": true, "until": true, "time": true,
}

// commandPrefixes run the command that follows them (after their options,
// which start with "-"; timeout's duration is skipped).
var commandPrefixes = map[string]bool{
	"exec": true, "command": true, "builtin": true, "nohup": true, "env": true,
	"nice": true, "ionice": true, "timeout": true, "sudo": true, "doas": true, "xargs": true,
	"stdbuf": true, "setsid": true, "chronic": true,
}

// isShell reports whether prog, a program's base name, is a shell.
func isShell(prog string) bool { return interpreterFamily(prog) == "sh" }

// isInterpreter reports whether prog, a program's base name, runs a script
// named by an argument.
func isInterpreter(prog string) bool { return interpreterFamily(prog) != "" }

// interpreterFamily names the kind of interpreter prog is ("" for none):
// its options and subcommands are read from the tables below.
func interpreterFamily(prog string) string {
	switch prog {
	case "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", ".", "source":
		return "sh" // . and source: the shell reads the file itself
	case "deno", "bun", "pwsh", "tclsh", "Rscript":
		return prog
	}
	for _, p := range []string{"python", "perl", "ruby", "node", "nodejs", "php", "lua"} {
		if prog == p || (strings.HasPrefix(prog, p) && strings.Trim(prog[len(p):], "0123456789.") == "") {
			if p == "nodejs" {
				return "node"
			}
			return p // python3, python3.11, perl5.36, lua5.4
		}
	}
	return ""
}

// codeFlags give code inline: no script follows.
var codeFlags = map[string]map[string]bool{
	"python":  {"-c": true},
	"node":    {"-e": true, "--eval": true, "-p": true, "--print": true},
	"perl":    {"-e": true, "-E": true},
	"ruby":    {"-e": true},
	"php":     {"-r": true},
	"lua":     {"-e": true},
	"Rscript": {"-e": true},
	"pwsh":    {"-c": true, "-Command": true},
}

// fileFlags take a file that is loaded and run before the script.
var fileFlags = map[string]map[string]bool{
	"node": {"-r": true, "--require": true, "--import": true, "--loader": true},
	"ruby": {"-r": true},
	"php":  {"-f": true},
	"pwsh": {"-File": true, "-f": true},
}

// dirFlags take the directory the script is run from.
var dirFlags = map[string]map[string]bool{
	"uv":     {"--directory": true},
	"bun":    {"--cwd": true},
	"poetry": {"-C": true, "--directory": true},
	"conda":  {"--cwd": true},
}

// argFlags take an argument that is not the script.
var argFlags = map[string]map[string]bool{
	"python": {"-W": true, "-X": true, "-Q": true},
	"node":   {"--env-file": true, "--conditions": true, "-C": true, "--input-type": true, "--title": true},
	"perl":   {"-I": true},
	"ruby":   {"-I": true, "-C": true, "-E": true},
	"php":    {"-c": true, "-d": true, "-z": true},
	"lua":    {"-l": true},
	"deno":   {"--config": true, "-c": true, "--import-map": true, "--lock": true, "--env-file": true},
	"bun":    {"--config": true, "-c": true, "--env-file": true, "-r": true, "--preload": true},
}

// subcommands come before the script.
var subcommands = map[string]map[string]bool{
	"deno": {"run": true, "test": true, "bench": true, "serve": true},
	"bun":  {"run": true, "test": true, "x": true, "exec": true},
}

// shellWord splits the first word off s. A $(...) or `...` stays inside
// the word, spaces and all, as the shell keeps it.
func shellWord(s string) (word, rest string) {
	var b strings.Builder
	quote := byte(0)
	depth, backquote := 0, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == '\'' && c == '\'':
			quote = 0
		case quote == '"' && c == '"' && depth == 0 && !backquote:
			quote = 0
		case quote == 0 && depth == 0 && !backquote && (c == '\'' || c == '"'):
			quote = c
		case quote != '\'' && c == '\\' && i+1 < len(s):
			i++
			b.WriteByte(s[i])
		case quote != '\'' && c == '$' && i+1 < len(s) && s[i+1] == '(':
			depth++
			i++
			b.WriteString("$(")
		case quote != '\'' && c == '(' && depth > 0:
			depth++ // $((1+1)), a subshell inside $(...)
			b.WriteByte(c)
		case quote != '\'' && c == ')' && depth > 0:
			depth--
			b.WriteByte(c)
		case quote != '\'' && c == '`':
			backquote = !backquote
			b.WriteByte(c)
		case quote == 0 && depth == 0 && !backquote && c == '(' && i+1 < len(s) && s[i+1] == ')' && b.Len() > 0:
			b.WriteString("()") // a function's name: f() { ...; }
			i++
		case quote == 0 && depth == 0 && !backquote && strings.IndexByte(" \t\n;|&()<>", c) >= 0:
			return b.String(), s[i:]
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), ""
}

func isShellName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || isASCIIAlpha(c) || (i > 0 && c >= '0' && c <= '9')) {
			return false
		}
	}
	return s != ""
}
