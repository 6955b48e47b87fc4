package tools

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/nsbox/nsbox/pkg/sandbox"
	"golang.org/x/sys/unix"
)

// ---- list_directory

// Bounds of list_directory.
const (
	DefaultMaxEntries = 1000
	MaxEntries        = 10000
)

type listDirectoryTool struct{}

func (listDirectoryTool) Definition() Definition {
	return Definition{
		Name:        "list_directory",
		Description: "List a directory of the workspace, optionally recursively and filtered by a glob. Files ignored by .gitignore, and .git itself, are left out unless include_ignored is set; .git is never entered. Paths are relative to the workspace root.",
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "maxLength": 4096, "description": "Directory, relative to the workspace root (default: the root)"},
    "recursive": {"type": "boolean", "description": "List subdirectories too (default false)"},
    "pattern": {"type": "string", "minLength": 1, "maxLength": 256, "description": "Glob on names (*.go) or on paths (src/**/*.go)"},
    "include_ignored": {"type": "boolean", "description": "Also list what .gitignore ignores, and .git (default false)"},
    "max_entries": {"type": "integer", "minimum": 1, "maximum": 10000, "description": "At most this many entries (default 1000)"}
  },
  "additionalProperties": false
}`),
	}
}

type listArgs struct {
	Path           string `json:"path"`
	Recursive      bool   `json:"recursive"`
	Pattern        string `json:"pattern"`
	IncludeIgnored bool   `json:"include_ignored"`
	MaxEntries     int    `json:"max_entries"`
}

type listEntry struct {
	Path   string `json:"path"`
	Type   string `json:"type"`
	Size   *int64 `json:"size,omitempty"`
	Target string `json:"target,omitempty"`
}

type listOutput struct {
	Path      string      `json:"path"`
	Entries   []listEntry `json:"entries"`
	Truncated bool        `json:"truncated"`
	// Warnings say what the listing may lack or include: ignore files
	// not honoured past the walk's bounds.
	Warnings []string `json:"warnings,omitempty"`
}

func (listDirectoryTool) Run(ctx context.Context, env sandbox.ToolEnv, args json.RawMessage) Result {
	var a listArgs
	if err := decode(args, &a); err != nil {
		return failErr(err)
	}
	if a.Pattern != "" {
		if err := validGlob(a.Pattern); err != nil {
			return Fail(fmt.Sprintf("argument \"pattern\": invalid glob: %s", clipMessage(err.Error())))
		}
	}
	limit := a.MaxEntries
	if limit <= 0 {
		limit = DefaultMaxEntries
	}
	root, err := openWorkspace(env)
	if err != nil {
		return failErr(err)
	}
	defer root.Close()
	out := listOutput{Entries: []listEntry{}}
	w := &walker{root: root, recursive: a.Recursive, gitignore: !a.IncludeIgnored, placeholders: placeholdersIn(env, root)}
	_, err = w.walk(ctx, a.Path, func(e walkEntry) error {
		// .git is repository metadata, not workspace content, and in a
		// workspace that is no repository it is nsbox's empty read-only
		// placeholder (docs/profiles.md): left out, as editors do.
		if !a.IncludeIgnored && strings.EqualFold(e.name, ".git") {
			return nil
		}
		if a.Pattern != "" && !globMatch(a.Pattern, e.label, e.name) {
			return nil
		}
		if len(out.Entries) >= limit {
			out.Truncated = true
			return errStop
		}
		le := listEntry{Path: e.label, Type: e.typeName()}
		switch {
		case e.isReg():
			size := e.size
			le.Size = &size
		case e.isLink():
			// The link's text, read from its directory fd: shown, never
			// followed.
			buf := make([]byte, 4096)
			if n, err := unix.Readlinkat(e.dirfd, e.name, buf); err == nil {
				le.Target = string(buf[:n])
			}
		}
		out.Entries = append(out.Entries, le)
		return nil
	})
	if err != nil {
		return failErr(err)
	}
	out.Path, _ = root.Rel(a.Path)
	out.Truncated = out.Truncated || w.truncated
	if msg := w.ignoreWarning(); msg != "" {
		out.Warnings = append(out.Warnings, msg)
	}
	return OK(out)
}

// ---- search_files

// Bounds of search_files.
const (
	MaxSearchResults = 1000
	maxSearchFile    = 32 << 20 // larger files are skipped
	maxLineLen       = 1 << 20  // a longer line ends the file's search (files_truncated)
	maxShownLine     = 500      // bytes of a matching line returned
)

type searchFilesTool struct{}

func (searchFilesTool) Definition() Definition {
	return Definition{
		Name:        "search_files",
		Description: "Search the text files of the workspace for a regular expression (RE2 syntax: no backreferences, linear time). Binary files and what .gitignore ignores are skipped. Returns at most max_results matches (default 50) with truncated: true when there were more.",
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "pattern": {"type": "string", "minLength": 1, "maxLength": 1000, "description": "Regular expression (Go RE2 syntax)"},
    "path": {"type": "string", "maxLength": 4096, "description": "Directory to search, relative to the workspace root (default: the root)"},
    "glob": {"type": "string", "minLength": 1, "maxLength": 256, "description": "Only files whose name (*.go) or path (src/**/*.go) matches"},
    "case_insensitive": {"type": "boolean"},
    "include_ignored": {"type": "boolean", "description": "Also search what .gitignore ignores (default false)"},
    "max_results": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "At most this many matches (default 50)"}
  },
  "required": ["pattern"],
  "additionalProperties": false
}`),
	}
}

type searchArgs struct {
	Pattern         string `json:"pattern"`
	Path            string `json:"path"`
	Glob            string `json:"glob"`
	CaseInsensitive bool   `json:"case_insensitive"`
	IncludeIgnored  bool   `json:"include_ignored"`
	MaxResults      int    `json:"max_results"`
}

type searchMatch struct {
	Path string `json:"path"`
	Line int    `json:"line"`
	Text string `json:"text"`
}

type searchOutput struct {
	Matches       []searchMatch `json:"matches"`
	Truncated     bool          `json:"truncated"`
	FilesSearched int           `json:"files_searched"`
	FilesSkipped  int           `json:"files_skipped"`
	// FilesTruncated counts files whose search stopped before their end:
	// a line longer than maxLineLen, or a read error. They are counted in
	// FilesSearched too, and named (the first few) in Warnings.
	FilesTruncated int      `json:"files_truncated"`
	Warnings       []string `json:"warnings,omitempty"`

	truncatedFiles []string
}

// maxNamedTruncated is how many truncated files a warning names.
const maxNamedTruncated = 5

func (searchFilesTool) Run(ctx context.Context, env sandbox.ToolEnv, args json.RawMessage) Result {
	var a searchArgs
	if err := decode(args, &a); err != nil {
		return failErr(err)
	}
	expr := a.Pattern
	if a.CaseInsensitive {
		expr = "(?i)" + expr
	}
	// Go's regexp is RE2: matching is linear in the input, so a hostile
	// pattern cannot backtrack catastrophically.
	re, err := regexp.Compile(expr)
	if err != nil {
		return Fail(fmt.Sprintf("argument \"pattern\": invalid regular expression: %s", clipString(err.Error(), maxQuoted+100)))
	}
	if a.Glob != "" {
		if err := validGlob(a.Glob); err != nil {
			return Fail(fmt.Sprintf("argument \"glob\": invalid glob: %s", clipMessage(err.Error())))
		}
	}
	limit := a.MaxResults
	if limit <= 0 {
		limit = maxResults(env)
	}
	root, err := openWorkspace(env)
	if err != nil {
		return failErr(err)
	}
	defer root.Close()
	out, err := search(ctx, root, a, re, limit)
	if err != nil {
		return failErr(err)
	}
	return OK(out)
}

func search(ctx context.Context, root *Root, a searchArgs, re *regexp.Regexp, limit int) (*searchOutput, error) {
	out := &searchOutput{Matches: []searchMatch{}}
	w := &walker{root: root, recursive: true, gitignore: !a.IncludeIgnored}
	buf := make([]byte, 64<<10)
	_, err := w.walk(ctx, a.Path, func(e walkEntry) error {
		if e.isDir() && e.name == ".git" {
			return fs.SkipDir
		}
		if !e.isReg() || (a.Glob != "" && !globMatch(a.Glob, e.label, e.name)) {
			return nil
		}
		if e.size > maxSearchFile {
			out.FilesSkipped++
			return nil
		}
		// Opened by its real path from the root, no symlink anywhere,
		// checked to be a regular file on the open fd: a file swapped
		// for a symlink or a FIFO since it was listed is skipped.
		fd, err := root.openNoFollow(e.rel, unix.O_PATH)
		if err != nil {
			return nil
		}
		f, err := regularFile(fd, e.rel)
		if err != nil {
			return nil
		}
		defer f.Close()
		r := bufio.NewReaderSize(f, len(buf))
		head, _ := r.Peek(binarySniff)
		if bytes.IndexByte(head, 0) >= 0 {
			out.FilesSkipped++
			return nil
		}
		out.FilesSearched++
		return searchFile(r, e.label, re, limit, out)
	})
	if err != nil {
		return nil, err
	}
	if out.FilesTruncated > 0 {
		msg := fmt.Sprintf("%d file(s) were searched only up to a line longer than %d bytes or a read error: %s", out.FilesTruncated, maxLineLen, strings.Join(out.truncatedFiles, ", "))
		if out.FilesTruncated > len(out.truncatedFiles) {
			msg += ", …"
		}
		out.Warnings = append(out.Warnings, msg)
	}
	if msg := w.ignoreWarning(); msg != "" {
		out.Warnings = append(out.Warnings, msg)
	}
	return out, nil
}

// searchFile scans one file line by line.
func searchFile(r *bufio.Reader, label string, re *regexp.Regexp, limit int, out *searchOutput) error {
	sc := bufio.NewScanner(io.LimitReader(r, maxSearchFile))
	sc.Buffer(make([]byte, 0, 64<<10), maxLineLen)
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if !re.Match(b) {
			continue
		}
		if len(out.Matches) >= limit {
			out.Truncated = true
			return errStop
		}
		out.Matches = append(out.Matches, searchMatch{Path: label, Line: line, Text: shorten(b, maxShownLine)})
	}
	// The scanner stops at a line over maxLineLen (bufio.ErrTooLong) or a
	// read error: the rest of the file was not searched, and the result
	// must say so rather than look like a complete search.
	if err := sc.Err(); err != nil {
		out.FilesTruncated++
		if len(out.truncatedFiles) < maxNamedTruncated {
			out.truncatedFiles = append(out.truncatedFiles, fmt.Sprintf("%s (from line %d)", label, line+1))
		}
	}
	return nil
}

// shorten cuts b to at most n bytes on a rune boundary.
func shorten(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return string(b[:cut]) + "…"
}
