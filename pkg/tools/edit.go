package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/nsbox/nsbox/pkg/sandbox"
	"golang.org/x/sys/unix"
)

// ---- edit_file

// maxEditSize bounds the file edit_file reads into memory.
const maxEditSize = 16 << 20

type editFileTool struct{}

func (editFileTool) Definition() Definition {
	return Definition{
		Name: "edit_file",
		Description: "Edit a text file of the workspace in place, in one of two forms. " +
			"Replace: old_string (exact text, whitespace included) is replaced by new_string; old_string must occur exactly once unless replace_all is set. " +
			"Diff: a unified diff (as diff -u or git diff print it) is applied to the file; a hunk that does not match fails the whole edit. " +
			"The file is replaced atomically: on any error it is unchanged. Protected paths (.git, the policy's own) are refused.",
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "File path, relative to the workspace root (or absolute, inside the workspace)"},
    "old_string": {"type": "string", "minLength": 1, "maxLength": 1048576, "description": "Exact text to replace"},
    "new_string": {"type": "string", "maxLength": 1048576, "description": "Replacement text (with old_string)"},
    "replace_all": {"type": "boolean", "description": "Replace every occurrence of old_string (default false: it must occur exactly once)"},
    "diff": {"type": "string", "minLength": 1, "maxLength": 4194304, "description": "A unified diff of this one file, instead of old_string/new_string"}
  },
  "required": ["path"],
  "additionalProperties": false
}`),
	}
}

type editFileArgs struct {
	Path       string  `json:"path"`
	OldString  *string `json:"old_string"`
	NewString  *string `json:"new_string"`
	ReplaceAll bool    `json:"replace_all"`
	Diff       string  `json:"diff"`
}

type editFileOutput struct {
	Path         string `json:"path"`
	Replacements int    `json:"replacements,omitempty"`
	HunksApplied int    `json:"hunks_applied,omitempty"`
	// FirstLine is the line (1-based, in the new file) of the first change.
	FirstLine    int `json:"first_line"`
	BytesWritten int `json:"bytes_written"`
}

// EditError is an edit that could not be made; the file is unchanged.
type EditError struct {
	Path string
	Msg  string
}

func (e *EditError) Error() string {
	return fmt.Sprintf("edit of %q: %s; the file is unchanged", e.Path, e.Msg)
}

func (editFileTool) Run(ctx context.Context, env sandbox.ToolEnv, args json.RawMessage) Result {
	var a editFileArgs
	if err := decode(args, &a); err != nil {
		return failErr(err)
	}
	switch {
	case a.Diff != "" && (a.OldString != nil || a.NewString != nil || a.ReplaceAll):
		return Fail(`arguments: give either "diff" or "old_string" and "new_string", not both`)
	case a.Diff == "" && (a.OldString == nil || a.NewString == nil):
		return Fail(`arguments: give "old_string" and "new_string" (an exact replacement), or "diff" (a unified diff)`)
	}
	root, err := openWorkspace(env)
	if err != nil {
		return failErr(err)
	}
	defer root.Close()
	out, err := editFile(ctx, root, a)
	if err != nil {
		return failErr(err)
	}
	return OK(out)
}

// editFile reads the file, computes the new content and replaces the file
// atomically through the same checks as write_file (replaceFile).
func editFile(ctx context.Context, root *Root, a editFileArgs) (*editFileOutput, error) {
	rel, err := root.Rel(a.Path)
	if err != nil {
		return nil, err
	}
	if rel == "." {
		return nil, &PathError{Path: a.Path, Err: unix.EISDIR}
	}
	if root.protects(rel) {
		return nil, &PathError{Path: a.Path, Err: ErrProtectedPath}
	}
	fd, _, err := root.open(rel, unix.O_PATH, 0)
	if err != nil {
		return nil, reword(err, a.Path)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, pathErr(a.Path, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFDIR:
		return nil, &PathError{Path: a.Path, Err: unix.EISDIR}
	default:
		return nil, notRegular(a.Path, &st)
	}
	if st.Size > maxEditSize {
		return nil, &EditError{Path: a.Path, Msg: fmt.Sprintf("the file has %d bytes, more than edit_file reads (%d); use write_file or run_command", st.Size, maxEditSize)}
	}
	// The very inode checked, read through the O_PATH fd.
	rfd, err := reopen(fd, unix.O_RDONLY|unix.O_NOCTTY|unix.O_NONBLOCK)
	if err != nil {
		return nil, pathErr(a.Path, err)
	}
	f := os.NewFile(uintptr(rfd), a.Path)
	old, err := io.ReadAll(io.LimitReader(f, maxEditSize+1))
	f.Close()
	if err != nil {
		return nil, pathErr(a.Path, unwrapOS(err))
	}
	if len(old) > maxEditSize {
		return nil, &EditError{Path: a.Path, Msg: fmt.Sprintf("the file has more than %d bytes; use write_file or run_command", maxEditSize)}
	}
	if bytes.IndexByte(old, 0) >= 0 {
		return nil, &EditError{Path: a.Path, Msg: "it is a binary file (it has a NUL byte); edit_file edits text only"}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := &editFileOutput{Path: rel}
	var content []byte
	if a.Diff != "" {
		content, out.HunksApplied, out.FirstLine, err = applyUnifiedDiff(old, a.Diff)
	} else {
		content, out.Replacements, out.FirstLine, err = replaceString(old, *a.OldString, *a.NewString, a.ReplaceAll)
	}
	if err != nil {
		return nil, &EditError{Path: a.Path, Msg: err.Error()}
	}
	// A write to the file while it was edited (in place, same inode)
	// would be lost by the replace: refused instead.
	var now unix.Stat_t
	if err := unix.Fstat(fd, &now); err != nil || now.Size != st.Size || now.Mtim != st.Mtim || int64(len(old)) != st.Size {
		return nil, &EditError{Path: a.Path, Msg: "the file changed while it was being edited; read it again"}
	}
	if err := replaceFile(root, a.Path, fd, content); err != nil {
		return nil, err
	}
	out.BytesWritten = len(content)
	return out, nil
}

// replaceString replaces old by new in content: exactly one occurrence, or
// all of them with all. It returns the new content, how many replacements
// were made and the line of the first.
func replaceString(content []byte, old, new string, all bool) ([]byte, int, int, error) {
	if old == new {
		return nil, 0, 0, errors.New("old_string and new_string are the same: nothing to change")
	}
	n := bytes.Count(content, []byte(old))
	first := bytes.Index(content, []byte(old))
	switch {
	case n == 0:
		msg := "old_string was not found in the file"
		if trimmed := strings.TrimSpace(old); trimmed != old && trimmed != "" && bytes.Contains(content, []byte(trimmed)) {
			msg += " (it is found without its leading or trailing whitespace: check the indentation and line ends)"
		} else if strings.Contains(old, "\n") && bytes.Contains(content, []byte("\r\n")) {
			msg += " (the file has CRLF line ends)"
		}
		return nil, 0, 0, errors.New(msg)
	case n > 1 && !all:
		return nil, 0, 0, fmt.Errorf("old_string occurs %d times (lines %s); include more of the surrounding text to make it unique, or set replace_all", n, occurrenceLines(content, old, 5))
	}
	line := 1 + bytes.Count(content[:first], []byte("\n"))
	if !all {
		n = 1
	}
	// The result is bounded as the file read is, before it is built: the
	// worker runs outside the sandbox's memory limit, and a 16 MiB file
	// of "a" with every "a" replaced by 64 KiB asked it for 1 TiB at once
	// (a fatal out-of-memory that ended the session; review 46).
	if size := len(content) + n*(len(new)-len(old)); size > maxEditSize {
		return nil, 0, 0, fmt.Errorf("the result would have %d bytes, more than edit_file writes (%d); use write_file or run_command", size, maxEditSize)
	}
	return bytes.Replace(content, []byte(old), []byte(new), n), n, line, nil
}

// occurrenceLines lists the lines where s starts, at most max of them.
func occurrenceLines(content []byte, s string, max int) string {
	var lines []string
	off, line := 0, 1
	for len(lines) < max {
		i := bytes.Index(content[off:], []byte(s))
		if i < 0 {
			break
		}
		line += bytes.Count(content[off:off+i], []byte("\n"))
		lines = append(lines, strconv.Itoa(line))
		line += strings.Count(s, "\n")
		off += i + len(s)
	}
	out := strings.Join(lines, ", ")
	if strings.Count(string(content), s) > max {
		out += ", ..."
	}
	return out
}
