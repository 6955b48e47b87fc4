package policy

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// Configs git reads in ways a line-by-line reader did not; each was
// checked against git 2.39 (the comments say what git reads).
var gitConfigCases = []struct {
	name, text string
	want       []string // name=value of every variable, in order; a value's readings joined by "|"
}{
	{"comment ending in a backslash does not continue",
		"[core]\n\teditor = vim ; comment \\\n\thooksPath = evil\n",
		[]string{"core.editor=vim", "core.hookspath=evil"}},
	{"a comment line ending in a backslash does not swallow the header",
		"# top \\\n[core]\n\thooksPath = evil2\n",
		[]string{"core.hookspath=evil2"}},
	{"quoted subsection holding ] with the variable on the header's line",
		"[includeIf \"onbranch:x]\"] path = inc.cfg\n",
		[]string{"includeif.onbranch:x].path=inc.cfg"}},
	{"escapes in a subsection",
		"[includeIf \"onbranch:a\\\"]b\"] path = one\n[includeIf \"x\\\\\"]path=two\n",
		[]string{"includeif.onbranch:a\"]b.path=one", "includeif.x\\.path=two"}},
	{"byte order mark",
		"\xef\xbb\xbf[core]\n\thooksPath = bomhooks\n",
		[]string{"core.hookspath=bomhooks"}},
	{"whitespace inside a value: a space for older git (2.39), as written for newer",
		"[core]\n\thooksPath\t=\tx\\\n\ty\n",
		[]string{"core.hookspath=x y|x\ty"}},
	{"quotes, comments and escapes",
		"[core]\n\thooksPath = \"a;b\" ; c\n\tworktree = \"  sp  \"  # c\n\tpager = a\\tb\\\\c\\\"d\n",
		[]string{"core.hookspath=a;b", "core.worktree=  sp  ", "core.pager=a\tb\\c\"d"}},
	{"case, sections on one line, old dotted form, booleans",
		"[Include]PATH=three\n[include.Sub] path = four\n[x] [core] bare\n[CORE \"Sub\"] hooksPath = h2\r\n",
		[]string{"include.path=three", "include.sub.path=four", "core.bare", "core.Sub.hookspath=h2"}},
	{"continued value, CRLF",
		"[core]\r\n\thooksPath = .git\\\r\nhooks\r\n",
		[]string{"core.hookspath=.githooks"}},
}

func renderGitConfig(vars []gitConfigVar) []string {
	var out []string
	for _, v := range vars {
		s := v.name()
		if v.values != nil {
			s += "="
			for i, val := range v.values {
				if i > 0 {
					s += "|"
				}
				s += val
			}
		}
		out = append(out, s)
	}
	return out
}

func TestParseGitConfig(t *testing.T) {
	for _, c := range gitConfigCases {
		if got := renderGitConfig(parseGitConfig([]byte(c.text))); !slices.Equal(got, c.want) {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

// gitReads is what git itself reads of a config file (`git config --list`),
// as name=value lines; ok is false when git refuses the file or is absent.
func gitReads(t testing.TB, dir string, text []byte) (out []string, ok bool) {
	f := filepath.Join(dir, "config")
	if err := os.WriteFile(f, text, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("git", "config", "--file", f, "--list", "--null")
	cmd.Env = []string{"HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1", "PATH=" + os.Getenv("PATH")}
	b, err := cmd.Output()
	if err != nil {
		return nil, false
	}
	for _, e := range bytes.Split(b, []byte{0}) {
		if len(e) == 0 {
			continue
		}
		name, value, hasValue := bytes.Cut(e, []byte{'\n'})
		s := string(name)
		if hasValue {
			s += "=" + string(value)
		}
		out = append(out, s)
	}
	return out, true
}

// agreesWithGit: every variable git reads, in order, with git's value
// among the readings parseGitConfig keeps.
func agreesWithGit(git []string, vars []gitConfigVar) bool {
	if len(git) != len(vars) {
		return false
	}
	for i, v := range vars {
		if v.values == nil {
			if git[i] != v.name() {
				return false
			}
			continue
		}
		if !slices.ContainsFunc(v.values, func(val string) bool { return git[i] == v.name()+"="+val }) {
			return false
		}
	}
	return true
}

// The same configs, read by the git on this machine (skipped without one).
func TestParseGitConfigAgreesWithGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed: nothing to compare with")
	}
	dir := t.TempDir()
	for _, c := range gitConfigCases {
		git, ok := gitReads(t, dir, []byte(c.text))
		if !ok {
			t.Errorf("%s: git refuses the file", c.name)
			continue
		}
		if vars := parseGitConfig([]byte(c.text)); !agreesWithGit(git, vars) {
			t.Errorf("%s:\n git reads %q\n we read   %q", c.name, git, renderGitConfig(vars))
		}
	}
}

// FuzzParseGitConfig compares parseGitConfig with git on any file git
// accepts (go test -run '^$' -fuzz FuzzParseGitConfig ./pkg/policy: each
// input runs git once). A file git refuses is read by git not at all, so
// only those it accepts are compared; parseGitConfig must not panic on
// any.
func FuzzParseGitConfig(f *testing.F) {
	for _, c := range gitConfigCases {
		f.Add([]byte(c.text))
	}
	_, err := exec.LookPath("git")
	haveGit := err == nil
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, text []byte) {
		vars := parseGitConfig(text)
		if !haveGit || bytes.IndexByte(text, 0) >= 0 {
			return
		}
		if git, ok := gitReads(t, dir, text); ok && !agreesWithGit(git, vars) {
			t.Fatalf("%q:\n git reads %q\n we read   %q", text, git, renderGitConfig(vars))
		}
	})
}

// A .git file and a commondir are read as git reads them (the whole file
// after "gitdir: ", less the newlines that end it, spaces kept), beside
// the first line trimmed; `git rev-parse --git-dir` on "gitdir: ../r \n"
// names "../r ".
func TestGitfileValues(t *testing.T) {
	for _, c := range []struct {
		text, prefix string
		want         []string
	}{
		{"gitdir: ../repo\n", "gitdir:", []string{"../repo"}},
		{"gitdir: ../repo \r\n\n", "gitdir:", []string{"../repo ", "../repo"}},
		{"gitdir:  ../repo", "gitdir:", []string{" ../repo", "../repo"}},
		{"gitdir:../repo\n", "gitdir:", []string{"../repo"}}, // git refuses it; protecting it costs nothing
		{"gitdir: a\nb\n", "gitdir:", []string{"a\nb", "a"}},
		{"gitdir: a\x00b\n", "gitdir:", []string{"a"}},
		{"../..\n", "", []string{"../.."}},
		{"", "gitdir:", nil},
	} {
		if got := gitfileValues([]byte(c.text), c.prefix); !slices.Equal(got, c.want) {
			t.Errorf("%q: %q, want %q", c.text, got, c.want)
		}
	}
}

// Include paths and core.hooksPath are expanded as git expands them: "~/"
// below the home directory, "~name/" below that user's (`git config
// --includes` reads /root/inc for "path = ~root/inc").
func TestExpandGitUserPath(t *testing.T) {
	for _, c := range []struct {
		in, want string
		ok       bool
	}{
		{"~/inc", "/home/u/inc", true},
		{"~", "/home/u", true},
		{"~root/inc", "/root/inc", true},
		{"~no-such-user-nsbox/inc", "", false},
		{"rel/~x", "rel/~x", true},
		{"/abs", "/abs", true},
	} {
		got, ok := expandGitUserPath(c.in, "/home/u")
		if got != c.want || ok != c.ok {
			t.Errorf("%q: %q %v, want %q %v", c.in, got, ok, c.want, c.ok)
		}
	}
	if _, ok := expandGitUserPath("~/x", ""); ok {
		t.Error("~/ without a home directory expanded")
	}
}

// The program of a command git runs from a config: its first word, as a
// shell would split it.
func TestCommandProgram(t *testing.T) {
	for in, want := range map[string]string{
		"./tools/crypt --smudge":          "./tools/crypt",
		"!FOO=1 'tools/lint it.sh' --all": "tools/lint it.sh",
		`"/opt/my tool" -x`:               "/opt/my tool",
		`!scripts/a\ b.sh;echo`:           "scripts/a b.sh",
		"git-lfs filter-process":          "git-lfs",
		"  less -R":                       "less",
		"true":                            "true",
		"A=1 B=2":                         "",
		"!sh -c 'tools/x'":                "sh",
		"\"~/bin/helper\" get":            "~/bin/helper",
		"!f() { ./x; }; f":                "f()",
		"":                                "",
		"1A=x ./run":                      "1A=x",
	} {
		if got := commandProgram(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

// Which programs of a config are files that git would run: by variable,
// relative to the work tree (or to each writable tree for the user's own
// config), never a word git finds in PATH.
func TestCommandPointers(t *testing.T) {
	vars := parseGitConfig([]byte("[core]\n\tfsmonitor = true\n\tpager = less\n\teditor = ./ed\n[diff \"pdf\"]\n\ttextconv = bin/pdf2txt\n" +
		"[alias]\n\tst = status\n\tx = !~/bin/x\n[user]\n\tname = ./not-a-command\n" +
		"[gpg \"ssh\"]\n\tdefaultKeyCommand = ./keys.sh\n[submodule \"lib\"]\n\tupdate = !./sync.sh\n[remote \"o\"]\n\tuploadpack = ./up\n"))
	var got []string
	for _, v := range vars {
		for _, p := range commandPointers(v, "/w", "/home/u", nil) {
			got = append(got, p.path)
		}
	}
	if want := []string{"/w/ed", "/w/bin/pdf2txt", "/home/u/bin/x", "/w/keys.sh", "/w/sync.sh", "/w/up"}; !slices.Equal(got, want) {
		t.Errorf("repository config: %q, want %q", got, want)
	}
	got = nil
	for _, p := range commandPointers(vars[2], "", "/home/u", []string{"/a", "/b"}) {
		got = append(got, p.path)
	}
	if want := []string{"/a/ed", "/b/ed"}; !slices.Equal(got, want) {
		t.Errorf("user config: %q, want %q", got, want)
	}
}

// commandFiles: what a command line runs, as git's configs write it.
// Review 55: the script of an interpreter, sh -c's code, ssh's -F file
// and ProxyCommand were left writable when only the program counted.
func TestCommandFiles(t *testing.T) {

	for in, want := range map[string][]cmdFile{
		"tools/fsmonitor":                      {{word: "tools/fsmonitor"}},
		"sh tools/fsmonitor.sh":                {{word: "tools/fsmonitor.sh"}},
		"python3 -u tools/clean.py --in %f":    {{word: "tools/clean.py"}, {pythonCwd: true}},
		"node scripts/x.js":                    {{word: "scripts/x.js"}},
		"!bash scripts/lint.sh":                {{word: "scripts/lint.sh"}},
		"bash lint.sh":                         {{word: "lint.sh"}},
		"!sh -c 'tools/x --all'":               {{word: "tools/x"}},
		"!sh -c 'sh ./y.sh' arg0":              {{word: "./y.sh"}},
		"python3 -c 'print(1)' tools/data":     {{pythonCwd: true}, {word: "tools/data", ifExists: true}},
		"python3 -P -c 'print(1)'":             nil,
		"perl -e 'print' ":                     nil,
		"ssh -F tools/ssh_config -q":           {{word: "tools/ssh_config"}},
		"ssh -o ProxyCommand=tools/proxy host": {{word: "tools/proxy"}},
		"ssh -oProxyCommand='tools/p %h' host": {{word: "tools/p"}},
		"!git log | sed 's/a/b/'":              {{word: "s/a/b/", ifExists: true}},
		"!f() { ./x; }; f":                     {{word: "./x"}},
		"!cd sub && ./build.sh":                {{word: "sub/build.sh"}},
		"FOO=1 env BAR=2 tools/run":            {{word: "tools/run"}},
		"less -R":                              nil,
		"git-lfs filter-process":               nil,
		"difft --color=always":                 nil,
		"tools/zstd-wrap -c":                   {{word: "tools/zstd-wrap"}},
		"python3.11 tools/t.py":                {{word: "tools/t.py"}, {pythonCwd: true}},
		"python3 -P tools/t.py":                {{word: "tools/t.py"}},
		"!. tools/env.sh && make":              {{word: "tools/env.sh"}},
		"!source env.sh; make":                 {{word: "env.sh"}},
		"timeout 5 tools/check":                {{word: "tools/check"}},
		"/usr/bin/env python3 tools/x.py":      {{word: "tools/x.py"}, {pythonCwd: true}},
		"node -r ./tools/hook.js app.js":       {{word: "./tools/hook.js"}, {word: "app.js"}},
		"node -r ts-node/register app.ts":      {{word: "ts-node/register", ifExists: true}, {word: "app.ts"}},
		"uv run --with rich tools/x.py":        {{word: "tools/x.py"}},
		"bash -lc 'cd web && ./lint'; ./top":   {{word: "web/lint"}, {word: "./top"}},
		"$HOME/bin/x":                          {{word: "~/bin/x"}},
		"${SCRIPTS}/x":                         nil,
		"bun test":                             nil,
		"npx sh tb/b.sh":                       {{word: "tb/b.sh"}},
		"uv run sh ta/a.sh":                    {{word: "ta/a.sh"}},
		"python3 lint":                         {{word: "lint", ifExists: true}, {pythonCwd: true}},
	} {
		if got := commandFiles(in); !slices.Equal(got, want) {
			t.Errorf("%q: %+v, want %+v", in, got, want)
		}
	}

	// sh -c inside sh -c inside ...: bounded.
	deep := "tools/x"
	for i := 0; i < 20; i++ {
		deep = "sh -c " + strconv.Quote(deep)
	}
	if got := commandFiles(deep); len(got) != 0 {
		t.Errorf("past maxCommandDepth: %+v", got)
	}
}
