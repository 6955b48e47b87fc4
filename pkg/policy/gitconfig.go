package policy

import (
	"path/filepath"
	"strings"
)

// gitPointer is a path a git config sends git to: a hooks directory
// (core.hooksPath) or a file it reads as more config (include.path,
// includeIf.*.path).
type gitPointer struct {
	path string
	dir  bool
}

// Bounds of gitConfigPointers: includes nest at most this deep, and each
// config is read up to maxSubmoduleConfig bytes.
const maxGitIncludeDepth = 4

// gitConfigPointers returns what the git config file at file points git to,
// following includes: core.hooksPath (taken relative to workTree, where
// git runs hooks; "" when the config belongs to no one repository, as the
// user's own: each writable root is then a work tree) and the files of
// include.path and includeIf.*.path (relative to the including file's
// directory; every includeIf counts, whatever its condition). A path that
// starts with "~/" is below home.
//
// The protected config of a repository in a writable directory is only as
// safe as what it points to: a hooksPath of .githooks/ (husky: .husky/_)
// or an include of a file in the work tree is as writable as the rest of
// the workspace, and git runs it at the next commit or status.
func gitConfigPointers(file, workTree, home string, roots []string) []gitPointer {
	var out []gitPointer
	seen := map[string]bool{}
	var read func(file string, depth int)
	read = func(file string, depth int) {
		if depth > maxGitIncludeDepth || seen[file] {
			return
		}
		seen[file] = true
		section := ""
		for _, line := range strings.Split(string(readSmall(file, maxSubmoduleConfig)), "\n") {
			line = strings.TrimSpace(line)
			if strings.HasPrefix(line, "[") {
				end := strings.IndexByte(line, ']')
				if end < 0 {
					continue
				}
				name, _, _ := strings.Cut(strings.TrimSpace(line[1:end]), " ")
				section = strings.ToLower(strings.TrimSpace(name))
				line = strings.TrimSpace(line[end+1:])
				if line == "" {
					continue
				}
			}
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				continue
			}
			k = strings.ToLower(strings.TrimSpace(k))
			v = gitConfigValue(v)
			if v == "" {
				continue
			}
			if strings.HasPrefix(v, "~/") && home != "" {
				v = filepath.Join(home, v[2:])
			}
			switch {
			case section == "core" && k == "hookspath":
				bases := []string{workTree}
				if workTree == "" {
					bases = roots
				}
				for _, b := range bases {
					p := v
					if !filepath.IsAbs(p) {
						p = filepath.Join(b, p)
					}
					out = append(out, gitPointer{filepath.Clean(p), true})
				}
			case (section == "include" || section == "includeif") && k == "path":
				p := v
				if !filepath.IsAbs(p) {
					p = filepath.Join(filepath.Dir(file), p)
				}
				p = filepath.Clean(p)
				out = append(out, gitPointer{p, false})
				read(p, depth+1)
			}
		}
	}
	read(file, 0)
	return out
}

// gitConfigValue is a config value as git reads it, for the plain cases:
// a comment (# or ;) outside quotes ends it, quotes are dropped and \" \\
// are unescaped.
func gitConfigValue(v string) string {
	var b strings.Builder
	quoted := false
	v = strings.TrimSpace(v)
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '"':
			quoted = !quoted
		case c == '\\' && i+1 < len(v):
			i++
			b.WriteByte(v[i])
		case (c == '#' || c == ';') && !quoted:
			return strings.TrimSpace(b.String())
		default:
			b.WriteByte(c)
		}
	}
	return strings.TrimSpace(b.String())
}
