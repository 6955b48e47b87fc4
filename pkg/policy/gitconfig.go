package policy

import (
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// gitPointer is a path a git config sends git to: a hooks directory
// (core.hooksPath) or a file it reads as more config (include.path,
// includeIf.*.path).
type gitPointer struct {
	path string
	dir  bool
	// ifExists: protected only where something is there already (a word
	// of a command that may name a file, or may be an argument that only
	// looks like a path: sed's s/a/b/).
	ifExists bool
	// glob: path is a pattern: each regular file it matches.
	glob bool
	// pythonCwd names a command (key and value) that runs Python with
	// the current directory first on its import path: no path, a
	// warning.
	pythonCwd string
	// envIgnored: that Python ignores PYTHONSAFEPATH (-E).
	envIgnored bool
}

// Bounds of gitConfigPointers: includes nest at most this deep, and each
// config is read up to maxSubmoduleConfig bytes.
const maxGitIncludeDepth = 4

// gitConfigPointers returns what the git config file at file points git to,
// following includes: core.hooksPath (taken relative to workTree, where
// git runs hooks; "" when the config belongs to no one repository, as the
// user's own: each of trees is then a work tree) and the files of
// include.path and includeIf.*.path (relative to the including file's
// directory; every includeIf counts, whatever its condition). A path that
// starts with "~/" is below home, one that starts with "~name/" below that
// user's home directory.
//
// The protected config of a repository in a writable directory is only as
// safe as what it points to: a hooksPath of .githooks/ (husky: .husky/_)
// or an include of a file in the work tree is as writable as the rest of
// the workspace, and git runs it at the next commit or status.
func gitConfigPointers(file, workTree, home string, roots, trees []string) []gitPointer {
	return gitVarsPointers(nil, file, workTree, home, roots, trees)
}

// gitVarsPointers is gitConfigPointers for the variables vars, given
// other than in a file (the environment's GIT_CONFIG_PARAMETERS and
// GIT_CONFIG_KEY_n), followed by
// those of the file at file (none when file is ""). A relative include of
// vars has no file to be relative to: git refuses it.
func gitVarsPointers(vars []gitConfigVar, file, workTree, home string, roots, trees []string) []gitPointer {
	return gitVarsPointersAt(vars, file, file, workTree, home, roots, trees)
}

// gitVarsPointersAt is gitVarsPointers reading the file at file as if it
// were at base: git resolves a relative include against the directory of
// the path it opened (a symlinked ~/.gitconfig: the home directory), not
// of where the link leads.
func gitVarsPointersAt(vars []gitConfigVar, file, base, workTree, home string, roots, trees []string) []gitPointer {
	var out []gitPointer
	seen := map[string]bool{}
	var read func(file string, vars []gitConfigVar, depth int)
	read = func(file string, vars []gitConfigVar, depth int) {
		for _, v := range vars {
			// Any subsection counts ([core "x"] hooksPath is not git's
			// core.hooksPath, and include.x.path includes nothing): at
			// worst more is protected.
			hooks := gitDirPointer(v)
			include := (v.section == "include" || v.section == "includeif") && v.key == "path"
			if !hooks && !include {
				out = append(out, commandPointers(v, workTree, home, trees)...)
				continue
			}
			for _, val := range v.values {
				if val == "" {
					continue
				}
				var ok bool
				if val, ok = expandGitUserPath(val, home); !ok {
					continue // git fails on it: nothing is read there
				}
				if hooks {
					out = append(out, workTreePointers(val, true, workTree, trees)...)
					continue
				}
				p := val
				if !filepath.IsAbs(p) {
					if file == "" {
						continue
					}
					p = filepath.Join(filepath.Dir(file), p)
				}
				p = filepath.Clean(p)
				out = append(out, gitPointer{path: p})
				if depth < maxGitIncludeDepth && !seen[p] {
					seen[p] = true
					// Read where its link leads (a dotfiles manager's
					// ~/.gitconfig.local), relative includes against p
					// as git takes them: read with O_NOFOLLOW, a linked
					// include was never read, what it names left
					// writable (review 51).
					rp := p
					if real, err := filepath.EvalSymlinks(p); err == nil {
						rp = real
					}
					read(p, parseGitConfig(readConfigFile(rp, roots)), depth+1)
				}
			}
		}
	}
	read("", vars, 0)
	if file != "" {
		seen[file] = true
		read(base, parseGitConfig(readConfigFile(file, roots)), 0)
	}
	return out
}

// gitEnvConfig is the configuration git takes from the environment:
// GIT_CONFIG_PARAMETERS (what `git -c` and wrappers pass on) and
// GIT_CONFIG_COUNT with GIT_CONFIG_KEY_n and GIT_CONFIG_VALUE_n, as
// variables. git refuses the lot when either is malformed, and so does
// this reading (nil).
func gitEnvConfig(lookup func(string) (string, bool)) []gitConfigVar {
	var out []gitConfigVar
	if params, ok := lookup("GIT_CONFIG_PARAMETERS"); ok && params != "" {
		vars, ok := gitConfigParameters(params)
		if !ok {
			return nil
		}
		out = append(out, vars...)
	}
	count, ok := lookup("GIT_CONFIG_COUNT")
	if !ok || count == "" {
		return out
	}
	n, err := strconv.Atoi(count)
	if err != nil || n < 0 || n > maxGitEnvConfig {
		return nil
	}
	for i := 0; i < n; i++ {
		key, okk := lookup("GIT_CONFIG_KEY_" + strconv.Itoa(i))
		value, okv := lookup("GIT_CONFIG_VALUE_" + strconv.Itoa(i))
		v, ok := gitEnvVar(key, &value)
		if !okk || !okv || !ok {
			return nil
		}
		out = append(out, v)
	}
	return out
}

// gitEnvPrograms reads the environment variables git takes in place of a
// config key that names a program or a directory it runs from:
// GIT_TEMPLATE_DIR, GIT_EXTERNAL_DIFF, GIT_SSH_COMMAND, GIT_SSH,
// GIT_EDITOR, GIT_SEQUENCE_EDITOR, GIT_PAGER, GIT_ASKPASS, and the
// fallbacks git (and every other program) takes: VISUAL, EDITOR, PAGER,
// SSH_ASKPASS. direnv's `export GIT_EXTERNAL_DIFF=$PWD/tools/difft` left
// the program writable, and the next git diff in that shell ran what the
// sandbox wrote there (review 55). GIT_SSH and the askpass variables
// name one program, run without a shell: its path is the whole value.
func gitEnvPrograms(lookup func(string) (string, bool)) []gitConfigVar {
	var out []gitConfigVar
	for _, e := range []struct{ env, section, key string }{
		{"GIT_TEMPLATE_DIR", "init", "templatedir"},
		{"GIT_EXTERNAL_DIFF", "diff", "external"},
		{"GIT_SSH_COMMAND", "core", "sshcommand"},
		{"GIT_SSH", "core", "sshcommand"},
		{"GIT_EDITOR", "core", "editor"},
		{"GIT_SEQUENCE_EDITOR", "sequence", "editor"},
		{"GIT_PAGER", "core", "pager"},
		{"GIT_ASKPASS", "core", "askpass"},
		{"VISUAL", "core", "editor"},
		{"EDITOR", "core", "editor"},
		{"PAGER", "core", "pager"},
		{"SSH_ASKPASS", "core", "askpass"},
	} {
		v, ok := lookup(e.env)
		if !ok || v == "" {
			continue
		}
		switch e.env {
		case "GIT_SSH", "GIT_ASKPASS", "SSH_ASKPASS":
			v = "'" + strings.ReplaceAll(v, "'", `'\''`) + "'" // one word
		}
		out = append(out, gitConfigVar{base: e.section, section: e.section, key: e.key, values: []string{v}})
	}
	return out
}

// gitEnvVar is the variable key (section[.subsection].key) with value
// (nil: a boolean true), named as git names it: section and key in lower
// case, a subsection as written.
func gitEnvVar(key string, value *string) (gitConfigVar, bool) {
	first, last := strings.IndexByte(key, '.'), strings.LastIndexByte(key, '.')
	if first <= 0 || last == len(key)-1 {
		return gitConfigVar{}, false
	}
	v := gitConfigVar{base: strings.ToLower(key[:first]) + key[first:last], section: strings.ToLower(key[:first]), key: strings.ToLower(key[last+1:])}
	if value != nil {
		v.values = []string{*value}
	}
	return v, true
}

// gitConfigParameters reads GIT_CONFIG_PARAMETERS as git does
// (config.c, parse_config_env_list): shell single-quoted words separated
// by spaces, each 'key'='value', 'key'= (a boolean) or the older
// 'key=value'; false when git would call it bogus.
func gitConfigParameters(s string) ([]gitConfigVar, bool) {
	var out []gitConfigVar
	for {
		s = strings.TrimLeft(s, " \t\n")
		if s == "" {
			return out, true
		}
		if len(out) >= maxGitEnvConfig {
			return nil, false
		}
		key, rest, ok := sqDequoteStep(s)
		if !ok {
			return nil, false
		}
		var v gitConfigVar
		switch {
		case rest == "" || isSQSpace(rest[0]):
			// The older 'key=value'.
			k, val, hasValue := strings.Cut(key, "=")
			var value *string
			if hasValue {
				value = &val
			}
			if v, ok = gitEnvVar(k, value); !ok {
				return nil, false
			}
		case rest[0] == '=':
			rest = rest[1:]
			var value *string
			switch {
			case rest != "" && rest[0] == '\'':
				val, r, ok := sqDequoteStep(rest)
				if !ok || (r != "" && !isSQSpace(r[0])) {
					return nil, false
				}
				value, rest = &val, r
			case rest == "" || isSQSpace(rest[0]):
				// 'key'=: a boolean.
			default:
				return nil, false
			}
			if v, ok = gitEnvVar(key, value); !ok {
				return nil, false
			}
		default:
			return nil, false
		}
		out = append(out, v)
		s = rest
	}
}

// sqDequoteStep reads one word of git's shell quoting (quote.c): '...',
// where a quote is written '\” and an exclamation mark '\!'.
func sqDequoteStep(s string) (word, rest string, ok bool) {
	if s == "" || s[0] != '\'' {
		return "", "", false
	}
	var b strings.Builder
	i := 1
	for {
		j := strings.IndexByte(s[i:], '\'')
		if j < 0 {
			return "", "", false
		}
		b.WriteString(s[i : i+j])
		i += j + 1
		// '\'' and '\!' go on with the word.
		if i+2 < len(s) && s[i] == '\\' && (s[i+1] == '\'' || s[i+1] == '!') && s[i+2] == '\'' {
			b.WriteByte(s[i+1])
			i += 3
			continue
		}
		return b.String(), s[i:], true
	}
}

func isSQSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' }

// maxGitEnvConfig bounds the variables read from the environment.
const maxGitEnvConfig = 1024

// expandGitUserPath expands a leading "~" ("~/x": below home) or "~name"
// ("~alice/x": below alice's home directory), as git does for include
// paths and core.hooksPath (interpolate_path); false when git could not
// (an unknown user, or "~" without a home).
func expandGitUserPath(p, home string) (string, bool) {
	rest, ok := strings.CutPrefix(p, "~")
	if !ok {
		return p, true
	}
	name, tail, _ := strings.Cut(rest, "/")
	dir := home
	if name != "" {
		u, err := user.Lookup(name)
		if err != nil {
			return "", false
		}
		dir = u.HomeDir
	}
	if dir == "" {
		return "", false
	}
	return filepath.Join(dir, tail), true
}

// beneathWritable finds the longest writable root of roots strictly above
// p and p relative to it; root is "" when p lies in none of them (read-only
// inside, the host's as it is), and ok false when p cannot be put below
// its root.
func beneathWritable(p string, roots []string) (root, rel string, ok bool) {
	for _, rw := range roots {
		if within(p, rw) && p != rw && len(rw) > len(root) {
			root = rw
		}
	}
	if root == "" {
		return "", "", true
	}
	rel, err := filepath.Rel(root, p)
	if err != nil || strings.HasPrefix(rel, "..") {
		return "", "", false
	}
	return root, rel, true
}

// readConfigFile reads a git config file: inside a writable root by fd,
// never through a symlink and never past the root (the sandbox could have
// put one on the way, to make the host read a path of its choosing);
// elsewhere (the user's own configs) as it is. At most maxSubmoduleConfig
// bytes, never blocking on a FIFO; nil when it cannot.
func readConfigFile(file string, roots []string) []byte {
	root, rel, ok := beneathWritable(file, roots)
	if !ok {
		return nil
	}
	if root == "" {
		return readSmall(file, maxSubmoduleConfig)
	}
	fd, err := openBeneathRoot(root, rel, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return nil
	}
	f := os.NewFile(uintptr(fd), file)
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(f, maxSubmoduleConfig))
	return b
}

// gitDirPointer says whether v names a directory whose files git runs:
// core.hooksPath (the hooks), init.templateDir (copied into every
// repository git init, clone and submodule update make, its hooks/ run
// at once by clone's post-checkout and its config taken as the new
// repository's: the whole directory counts, review 55) and
// instaweb.modulePath (the modules git instaweb loads into its httpd).
func gitDirPointer(v gitConfigVar) bool {
	switch v.section + "." + v.key {
	case "core.hookspath", "init.templatedir", "instaweb.modulepath":
		return true
	}
	return false
}

// gitCommand says whether git runs the value of v as a command or a
// program of the user's (through the shell, or as a hook): those that
// name a file, such as "./tools/fsmonitor" or "!scripts/lint.sh", are a
// file git runs as the user, as a hooks directory is.
func gitCommand(v gitConfigVar) bool {
	switch v.section + "." + v.key {
	case "core.fsmonitor", "core.sshcommand", "core.editor", "core.pager", "core.askpass",
		"sequence.editor", "diff.external", "diff.textconv", "diff.command", "merge.driver",
		"filter.clean", "filter.smudge", "filter.process", "credential.helper", "gpg.program",
		"interactive.difffilter", "uploadpack.packobjectshook", "web.browser", "browser.cmd",
		"browser.path", "difftool.cmd", "difftool.path", "mergetool.cmd", "mergetool.path",
		"sendemail.sendmailcmd", "sendemail.smtpserver", "gpg.defaultkeycommand", "core.gitproxy",
		"remote.uploadpack", "remote.receivepack", "man.cmd", "man.path", "guitool.cmd",
		"trailer.command", "trailer.cmd", "submodule.update",
		// Review 55: config-based hooks (git 2.54), git imap-send's
		// tunnel, gc's hook for unreachable objects (2.42), fetch's
		// command for an alternate's refs, git archive's compressors,
		// git send-email's address and header commands, git instaweb's
		// server, git svn's author program, git gui's editor.
		"hook.command", "imap.tunnel", "gc.recentobjectshook", "core.alternaterefscommand",
		"tar.command", "sendemail.tocmd", "sendemail.cccmd", "sendemail.headercmd",
		"instaweb.httpd", "svn.authorsprog", "gui.editor":
		// (A subsection is not part of the name here: diff.pdf.textconv
		// is "diff.textconv", gpg.ssh.defaultKeyCommand
		// "gpg.defaultkeycommand", submodule.NAME.update "!cmd".)
		return true
	}
	switch v.section {
	case "alias", "pager":
		return true // alias.NAME = "!cmd", pager.CMD = "cmd"
	}
	return false
}

// commandPointers returns the files that v, a variable git runs as a
// command (gitCommand), names (commandFiles): its program, when that is
// a path, a script an interpreter it names runs, and any other word that
// is a path to something that exists. A relative one is taken from the
// work tree's top (where git runs them), or from each of trees for a
// config of no one repository.
func commandPointers(v gitConfigVar, workTree, home string, trees []string) []gitPointer {
	if !gitCommand(v) {
		return nil
	}
	var out []gitPointer
	for _, val := range v.values {
		for _, f := range commandFiles(val) {
			if f.pythonCwd {
				out = append(out, gitPointer{pythonCwd: v.base + "." + v.key + " = " + val, envIgnored: f.envIgnored})
				continue
			}
			p, ok := expandGitUserPath(f.word, home)
			if !ok {
				continue
			}
			for _, ptr := range workTreePointers(p, false, workTree, trees) {
				ptr.ifExists, ptr.glob = f.ifExists, f.glob
				out = append(out, ptr)
			}
		}
	}
	return out
}

// workTreePointers points to p as git takes a path it runs from a work
// tree's top (a hooks directory, a program): as it is when absolute, else
// below workTree, or below each of trees for a config of no one
// repository.
func workTreePointers(p string, dir bool, workTree string, trees []string) []gitPointer {
	if filepath.IsAbs(p) {
		return []gitPointer{{path: filepath.Clean(p), dir: dir}}
	}
	bases := []string{workTree}
	if workTree == "" {
		bases = trees
	}
	var out []gitPointer
	for _, b := range bases {
		if b != "" {
			out = append(out, gitPointer{path: filepath.Join(b, p), dir: dir})
		}
	}
	return out
}
