package tools

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"unicode/utf8"

	"github.com/nsbox/nsbox/pkg/sandbox"
	"golang.org/x/sys/unix"
)

// binarySniff is how much of a file is looked at for a NUL byte.
const binarySniff = 8 << 10

// ---- read_file

type readFileTool struct{}

func (readFileTool) Definition() Definition {
	return Definition{
		Name:        "read_file",
		Description: "Read a text file of the workspace. Optionally only lines start_line..end_line (1-based, inclusive). Large files are cut at the output bound (truncated: true).",
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "File path, relative to the workspace root (or absolute, inside the workspace)"},
    "start_line": {"type": "integer", "minimum": 1, "maximum": 9007199254740991, "description": "First line to return (1-based)"},
    "end_line": {"type": "integer", "minimum": 1, "maximum": 9007199254740991, "description": "Last line to return (inclusive)"},
    "encoding": {"type": "string", "enum": ["text", "base64"], "description": "text (default), or base64 for the file's bytes (binary files; no line range)"}
  },
  "required": ["path"],
  "additionalProperties": false
}`),
	}
}

type readFileArgs struct {
	Path      string `json:"path"`
	StartLine int64  `json:"start_line"`
	EndLine   int64  `json:"end_line"`
	Encoding  string `json:"encoding"`
}

type readFileOutput struct {
	Path       string `json:"path"`
	Content    string `json:"content"`
	Size       int64  `json:"size"`
	StartLine  int64  `json:"start_line"`
	EndLine    int64  `json:"end_line"`
	TotalLines int64  `json:"total_lines,omitempty"`
	Truncated  bool   `json:"truncated"`
	// Binary: the content is not UTF-8 text (with encoding text, what is
	// not UTF-8 reads as U+FFFD: ask for base64 to get the bytes).
	Binary   bool   `json:"binary,omitempty"`
	Encoding string `json:"encoding,omitempty"`
}

func (readFileTool) Run(ctx context.Context, env sandbox.ToolEnv, args json.RawMessage) Result {
	var a readFileArgs
	if err := decode(args, &a); err != nil {
		return failErr(err)
	}
	if a.EndLine > 0 && a.StartLine > a.EndLine {
		return Fail(fmt.Sprintf(`argument "end_line": %d is before start_line %d`, a.EndLine, a.StartLine))
	}
	root, err := openWorkspace(env)
	if err != nil {
		return failErr(err)
	}
	defer root.Close()
	f, err := root.OpenFile(a.Path)
	if err != nil {
		return failErr(err)
	}
	defer f.Close()
	if a.Encoding == "base64" {
		if a.StartLine > 0 || a.EndLine > 0 {
			return Fail(`arguments: start_line and end_line select lines of text; with "encoding": "base64" the file is read from its start`)
		}
		out, err := readBase64(f, int64(budget(env)))
		if err != nil {
			return failErr(pathErr(a.Path, unwrapOS(err)))
		}
		out.Path, _ = root.Rel(a.Path)
		return OK(out)
	}
	out, err := readText(ctx, f, a, maxOutput(env))
	if err != nil {
		return failErr(err)
	}
	out.Path, _ = root.Rel(a.Path)
	return OK(out)
}

// readText reads the lines asked for, at most max bytes of them, without
// ever holding more than that (a single huge line is read in pieces).
func readText(ctx context.Context, f io.Reader, a readFileArgs, max int64) (*readFileOutput, error) {
	out := &readFileOutput{}
	if st, ok := f.(interface{ Stat() (fs.FileInfo, error) }); ok {
		if fi, err := st.Stat(); err == nil {
			out.Size = fi.Size()
		}
	}
	r := bufio.NewReaderSize(f, 2*binarySniff)
	head, _ := r.Peek(binarySniff)
	if bytes.IndexByte(head, 0) >= 0 {
		return nil, fmt.Errorf("%q is a binary file (it has a NUL byte in its first 8 KiB): call read_file with \"encoding\": \"base64\" to get its bytes", a.Path)
	}
	start := a.StartLine
	if start < 1 {
		start = 1
	}
	end := a.EndLine // 0: to the end
	var buf bytes.Buffer
	if a.StartLine <= 1 && a.EndLine == 0 {
		buf.Grow(int(min(out.Size, max)) + 1)
	}
	line := int64(1)
	atLineStart := true
	for {
		if line%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		chunk, err := r.ReadSlice('\n')
		if len(chunk) > 0 {
			if line >= start && (end == 0 || line <= end) {
				if room := max - int64(buf.Len()); int64(len(chunk)) > room {
					// Cut at a character, not inside one.
					buf.Write(trimRunes(chunk[:room], false))
					out.Truncated = true
				} else {
					buf.Write(chunk)
				}
				if out.StartLine == 0 {
					out.StartLine = line
				}
				out.EndLine = line
			}
			atLineStart = chunk[len(chunk)-1] == '\n'
			if atLineStart {
				line++
			}
		}
		if out.Truncated || (end > 0 && line > end) {
			// Past what was asked for: the rest is not read.
			break
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF {
			total := line - 1
			if !atLineStart {
				total = line
			}
			out.TotalLines = total
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if out.StartLine == 0 {
		if start > 1 && out.TotalLines < start {
			return nil, fmt.Errorf(`argument "start_line": %d is past the end of the file (%d lines)`, start, out.TotalLines)
		}
		out.StartLine = start
		out.EndLine = start - 1
	}
	out.Content = buf.String()
	out.Binary = !utf8.ValidString(out.Content)
	return out, nil
}

// readBase64 reads the first bytes of f that fit in n characters of base64.
func readBase64(f io.Reader, n int64) (*readFileOutput, error) {
	out := &readFileOutput{Encoding: "base64"}
	if st, ok := f.(interface{ Stat() (fs.FileInfo, error) }); ok {
		if fi, err := st.Stat(); err == nil {
			out.Size = fi.Size()
		}
	}
	limit := n / 4 * 3
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		b, out.Truncated = b[:limit], true
	}
	out.Binary = bytes.IndexByte(b, 0) >= 0 || !utf8.Valid(b)
	out.Content = base64.StdEncoding.EncodeToString(b)
	return out, nil
}

// ---- write_file

type writeFileTool struct{}

func (writeFileTool) Definition() Definition {
	return Definition{
		Name:        "write_file",
		Description: "Write a text file in the workspace, replacing its content; missing parent directories are created. Protected paths (anything in a .git directory, a file named .git, and the policy's own) are refused.",
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "File path, relative to the workspace root (or absolute, inside the workspace)"},
    "content": {"type": "string", "description": "The file's new content"},
    "create_dirs": {"type": "boolean", "description": "Create missing parent directories (default true)"}
  },
  "required": ["path", "content"],
  "additionalProperties": false
}`),
	}
}

type writeFileArgs struct {
	Path       string `json:"path"`
	Content    string `json:"content"`
	CreateDirs *bool  `json:"create_dirs"`
}

type writeFileOutput struct {
	Path         string `json:"path"`
	BytesWritten int    `json:"bytes_written"`
	Created      bool   `json:"created"`
}

func (writeFileTool) Run(ctx context.Context, env sandbox.ToolEnv, args json.RawMessage) Result {
	var a writeFileArgs
	if err := decode(args, &a); err != nil {
		return failErr(err)
	}
	root, err := openWorkspace(env)
	if err != nil {
		return failErr(err)
	}
	defer root.Close()
	out, err := writeFile(root, a.Path, []byte(a.Content), a.CreateDirs == nil || *a.CreateDirs)
	if err != nil {
		return failErr(err)
	}
	return OK(out)
}

// writeFile writes content to the user path p below root. Every check is
// made on what the kernel resolved, by fd, before a byte is written.
func writeFile(root *Root, p string, content []byte, mkdirs bool) (*writeFileOutput, error) {
	rel, err := root.Rel(p)
	if err != nil {
		return nil, err
	}
	if rel == "." {
		return nil, &PathError{Path: p, Err: unix.EISDIR}
	}
	// Refused up front by name, before any directory is created.
	if root.protects(rel) {
		return nil, &PathError{Path: p, Err: ErrProtectedPath}
	}
	parent, base := path.Dir(rel), path.Base(rel)
	if mkdirs {
		if err := root.MkdirAll(parent); err != nil {
			return nil, err
		}
	}
	pfd, _, err := root.open(parent, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, reword(err, p)
	}
	defer unix.Close(pfd)
	// The parent, as resolved (through symlinks inside the workspace),
	// must not be a protected place either: "hooks-link/pre-commit" with
	// hooks-link -> .git/hooks.
	prel, err := root.RelOf(pfd)
	if err != nil {
		return nil, &PathError{Path: p, Err: ErrOutsideWorkspace}
	}
	if root.protects(joinRel(prel, base)) {
		return nil, &PathError{Path: p, Err: ErrProtectedPath, Detail: "through a symlink"}
	}
	// A read-only mount is how the policy's protected paths (and anything
	// outside the writable binds) are enforced: say so before trying.
	if readOnlyMount(pfd) {
		return nil, &PathError{Path: p, Err: ErrProtectedPath}
	}

	// An existing file: opened below the root (symlinks followed only
	// while they stay inside) as O_PATH, only to look at it: nothing is
	// written through this fd unless the file cannot be replaced.
	fd, _, err := root.open(rel, unix.O_PATH, 0)
	if errors.Is(err, ErrNotExist) {
		// A new file, renamed into place exactly at parent/base with
		// RENAME_NOREPLACE: a dangling symlink planted here is an error
		// (EEXIST), not a way to create its target.
		err := atomicWrite(pfd, base, content, nil)
		if errors.Is(err, unix.EEXIST) {
			return nil, &PathError{Path: p, Err: unix.EEXIST, Detail: "it is a symlink to a missing file, or it appeared during the write; no file was written"}
		}
		if err != nil {
			return nil, writeErr(p, err, true)
		}
		return &writeFileOutput{Path: rel, BytesWritten: len(content), Created: true}, nil
	} else if err != nil {
		return nil, reword(err, p)
	}
	defer unix.Close(fd)
	if err := replaceFile(root, p, fd, content); err != nil {
		return nil, err
	}
	return &writeFileOutput{Path: rel, BytesWritten: len(content)}, nil
}

// replaceFile gives the existing file fd (an O_PATH fd opened below root
// for the user path p) the new content, atomically (atomic.go): in the
// directory the file really is in, as the kernel resolved it, so that a
// write through a symlink inside the workspace replaces the target and
// keeps the link.
func replaceFile(root *Root, p string, fd int, content []byte) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return pathErr(p, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFDIR:
		return &PathError{Path: p, Err: unix.EISDIR}
	default:
		return notRegular(p, &st)
	}
	// Where the file really is, now that it is open: a symlink to
	// .git/config is refused here, before anything is written.
	frel, err := root.RelOf(fd)
	if err != nil || frel == "." {
		return &PathError{Path: p, Err: ErrOutsideWorkspace}
	}
	if root.protects(frel) || readOnlyMount(fd) {
		return &PathError{Path: p, Err: ErrProtectedPath}
	}
	// A rename needs only the directory to be writable: the file's own
	// permission (a 0444 file, an immutable one) is checked by opening it
	// for writing, without O_TRUNC, as the in-place write did.
	wfd, err := reopen(fd, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		return pathErr(p, err)
	}
	defer unix.Close(wfd)
	// The real directory, opened with no symlink on the way (frel is what
	// the kernel reported, so a symlink there now means a swap: refused).
	dfd, err := root.openNoFollow(path.Dir(frel), unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return pathErr(p, err)
	}
	defer unix.Close(dfd)
	if drel, err := root.RelOf(dfd); err != nil || root.protects(joinRel(drel, path.Base(frel))) {
		return &PathError{Path: p, Err: ErrProtectedPath}
	}
	// The name must still be the inode that was checked: a file swapped in
	// meanwhile (another hard link, a FIFO) is not replaced blindly.
	var now unix.Stat_t
	if err := unix.Fstatat(dfd, path.Base(frel), &now, unix.AT_SYMLINK_NOFOLLOW); err != nil || now.Dev != st.Dev || now.Ino != st.Ino {
		return &PathError{Path: p, Err: unix.EAGAIN, Detail: "it was replaced during the write; nothing was changed"}
	}
	err = atomicWrite(dfd, path.Base(frel), content, &st)
	if err == nil {
		return nil
	}
	if replaceable(err) {
		return writeErr(p, err, false)
	}
	// The directory cannot take a new entry, or the file is a mount
	// point of its own: write in place, space reserved first.
	if changed, err := inPlaceWrite(wfd, content); err != nil {
		if !changed {
			return writeErr(p, err, false)
		}
		return pathErr(p, err)
	}
	return nil
}

// writeErr is a failed write that left the file as it was (or absent).
func writeErr(p string, err error, created bool) error {
	if errors.Is(err, unix.EROFS) {
		return &PathError{Path: p, Err: ErrProtectedPath}
	}
	if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
		return &PathError{Path: p, Err: err, Detail: "nothing was changed"}
	}
	return &NotWrittenError{Path: p, Err: err, New: created}
}

// reword keeps a *PathError but names the user's path.
func reword(err error, p string) error {
	var pe *PathError
	if errors.As(err, &pe) {
		return &PathError{Path: p, Err: pe.Err, Detail: pe.Detail}
	}
	return err
}
