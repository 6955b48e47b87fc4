package tools

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
	"unicode/utf8"

	"github.com/nsbox/nsbox/pkg/sandbox"
	"golang.org/x/sys/unix"
)

// Output sized for a model. A tool's output goes into a model's context, so
// it is held to a budget of characters (Policy.Tools.MaxOutput, default
// DefaultMaxOutput) per call. A process's output over the budget keeps its
// head and its tail, since a failing build prints its error last, with a
// marker in between naming how much was cut; the complete output can be
// kept in files under the workspace's scratch directory (keep_output).
// Output that is not UTF-8 text is flagged binary:true instead of reaching
// the model as U+FFFD replacement characters, and is returned as base64
// when the call asks for encoding "base64".

// ScratchDir is the workspace's scratch directory, relative to its root:
// where kept outputs go. It holds a .gitignore that ignores it all.
const ScratchDir = ".nsbox/scratch"

// maxKeptOutput bounds a kept output file (each stream): the files are
// written by the worker, outside the sandbox's limits.
const maxKeptOutput = 256 << 20

// captureFactor: a stream is captured up to this many bytes per character
// of the budget (UTF-8 has up to 4 bytes a character; head and tail).
const captureFactor = 8

// outputArgs are the output arguments of run_command and run_script.
type outputArgs struct {
	KeepOutput bool   `json:"keep_output"`
	Encoding   string `json:"encoding"`
}

// outputSchema is their part of the tools' schemas.
const outputSchema = `"keep_output": {"type": "boolean", "description": "Also keep the complete stdout and stderr in files under .nsbox/scratch/ in the workspace and return their paths (stdout_file, stderr_file)"},
    "encoding": {"type": "string", "enum": ["text", "base64"], "description": "text (default): output that is not UTF-8 is flagged binary:true and left out; base64: stdout and stderr are base64"}`

// budget is the call's output budget in characters.
func budget(env sandbox.ToolEnv) int {
	return int(min(maxOutput(env), 1<<30/captureFactor))
}

// captureSpec sets the capture of a process run for a budget of n
// characters, and opens the files of keep_output.
func captureSpec(spec *sandbox.RunSpec, env sandbox.ToolEnv, a outputArgs) (*keptOutput, error) {
	spec.MaxOutput = int64(budget(env)) * captureFactor
	spec.KeepTail = true
	if !a.KeepOutput {
		return nil, nil
	}
	k, err := openKeptOutput(env)
	if err != nil {
		return nil, err
	}
	spec.FullStdout, spec.FullStderr = k.out, k.err
	return k, nil
}

// keptOutput is the pair of files a process's complete output goes to.
type keptOutput struct {
	out, err *limitedFile
}

type limitedFile struct {
	f    *os.File
	rel  string
	left int64
}

func (l *limitedFile) Write(p []byte) (int, error) {
	if int64(len(p)) > l.left {
		n, _ := l.f.Write(p[:l.left])
		l.left -= int64(n)
		return n, errors.New("kept output bound reached")
	}
	n, err := l.f.Write(p)
	l.left -= int64(n)
	return n, err
}

func (k *keptOutput) close() {
	if k != nil {
		k.out.f.Close()
		k.err.f.Close()
	}
}

// openKeptOutput creates two new files in the scratch directory, confined
// like write_file: the directory is made component by component below the
// root, and each file is created O_EXCL with no symlink followed, so a link
// the sandbox planted at .nsbox cannot send the output elsewhere.
func openKeptOutput(env sandbox.ToolEnv) (*keptOutput, error) {
	root, err := openWorkspace(env)
	if err != nil {
		return nil, fmt.Errorf("keep_output: %w", err)
	}
	defer root.Close()
	if err := root.MkdirAll(ScratchDir); err != nil {
		return nil, fmt.Errorf("keep_output: %w", err)
	}
	dfd, err := root.openNoFollow(ScratchDir, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return nil, fmt.Errorf("keep_output: %w", pathErr(ScratchDir, err))
	}
	defer unix.Close(dfd)
	if readOnlyMount(dfd) {
		return nil, fmt.Errorf("keep_output: %w", &PathError{Path: ScratchDir, Err: ErrProtectedPath})
	}
	// The scratch directory is not the user's work: git leaves it alone.
	if pfd, err := root.openNoFollow(".nsbox", unix.O_PATH|unix.O_DIRECTORY); err == nil {
		if fd, err := openat2(pfd, ".gitignore", unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW, 0o644, resolveFlags|unix.RESOLVE_NO_SYMLINKS); err == nil {
			unix.Write(fd, []byte("# nsbox's scratch area (kept tool outputs)\n*\n"))
			unix.Close(fd)
		}
		unix.Close(pfd)
	}
	var rnd [4]byte
	rand.Read(rnd[:])
	base := time.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(rnd[:])
	open := func(ext string) (*limitedFile, error) {
		name := base + ext
		fd, err := openat2(dfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW, 0o600, resolveFlags|unix.RESOLVE_NO_SYMLINKS)
		if err != nil {
			return nil, fmt.Errorf("keep_output: %w", pathErr(ScratchDir+"/"+name, err))
		}
		return &limitedFile{f: os.NewFile(uintptr(fd), name), rel: ScratchDir + "/" + name, left: maxKeptOutput}, nil
	}
	out, err := open(".stdout")
	if err != nil {
		return nil, err
	}
	errf, err := open(".stderr")
	if err != nil {
		out.f.Close()
		return nil, err
	}
	return &keptOutput{out: out, err: errf}, nil
}

// stream is one captured stream, as the worker kept it.
type stream struct {
	name  string
	data  []byte
	total int64 // bytes the process wrote
	// split is where the head ends in data when bytes were cut between
	// head and tail (-1: nothing cut).
	split int
}

func newStream(name string, data []byte, total, capMax int64) stream {
	s := stream{name: name, data: data, total: max(total, int64(len(data))), split: -1}
	if s.total > int64(len(data)) && int64(len(data)) > capMax/2 {
		s.split = int(capMax / 2)
	} else if s.total > int64(len(data)) {
		s.split = len(data)
	}
	return s
}

func (s stream) binary() bool {
	if bytes.IndexByte(s.data, 0) >= 0 {
		return true
	}
	if s.split < 0 {
		return !utf8.Valid(s.data)
	}
	// Each side of the cut may end (or start) inside a character.
	return !utf8.Valid(trimRunes(s.data[:s.split], false)) || !utf8.Valid(trimRunes(s.data[s.split:], true))
}

// trimRunes drops an incomplete UTF-8 sequence at the end (or, with
// start, the continuation bytes at the start) of b.
func trimRunes(b []byte, start bool) []byte {
	if start {
		i := 0
		for i < len(b) && i < utf8.UTFMax && !utf8.RuneStart(b[i]) {
			i++
		}
		return b[i:]
	}
	for i := 1; i <= utf8.UTFMax && i <= len(b); i++ {
		if utf8.RuneStart(b[len(b)-i]) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			break
		}
	}
	return b
}

// shaped is a stream as the model gets it.
type shaped struct {
	text   string
	cut    bool
	binary bool
}

// shapeText fits a text stream in n characters: its head and tail around a
// marker naming what was cut.
func shapeText(s stream, n int, keptAs string) shaped {
	var head, tail []byte
	if s.split >= 0 {
		head, tail = trimRunes(s.data[:s.split], false), trimRunes(s.data[s.split:], true)
	} else {
		head = s.data
	}
	chars := utf8.RuneCount(head) + utf8.RuneCount(tail)
	if s.split < 0 && chars <= n {
		return shaped{text: string(s.data)}
	}
	where := `call again with "keep_output": true to keep all of it in a file`
	if keptAs != "" {
		where = "all of it is in " + keptAs
	}
	marker := func(cut int64, kept int) string {
		return fmt.Sprintf("\n[... nsbox cut %d bytes of %s here to fit the output budget (%d characters kept, head and tail); %s ...]\n", cut, s.name, kept, where)
	}
	// The marker's room first (its numbers at their widest), then half of
	// the rest each side: what the head does not need, the tail gets.
	room := max(n-utf8.RuneCountInString(marker(s.total, n)), 2)
	hn := min(room/2, utf8.RuneCount(head))
	if s.split < 0 {
		tail = head
	}
	h := prefixRunes(head, hn)
	t := suffixRunes(tail, room-hn)
	// Whole lines where a line break is near the cut: a model reads
	// "99991" cut to "991" as a different number.
	if i := bytes.LastIndexByte(h, '\n'); i >= 0 && len(h)-i < len(h)/4+1 {
		h = h[:i+1]
	}
	if i := bytes.IndexByte(t, '\n'); i >= 0 && i < len(t)/4 {
		t = t[i+1:]
	}
	cut := s.total - int64(len(h)) - int64(len(t))
	return shaped{text: string(h) + marker(cut, room) + string(t), cut: true}
}

func prefixRunes(b []byte, n int) []byte {
	i := 0
	for ; n > 0 && i < len(b); n-- {
		_, size := utf8.DecodeRune(b[i:])
		i += size
	}
	return b[:i]
}

func suffixRunes(b []byte, n int) []byte {
	i := len(b)
	for ; n > 0 && i > 0; n-- {
		_, size := utf8.DecodeLastRune(b[:i])
		i -= size
	}
	return b[i:]
}

// shapeStream fits one stream in n characters, as text or base64.
func shapeStream(s stream, n int, encoding, keptAs string) shaped {
	if encoding == "base64" {
		// Base64 is not cut in the middle (it would not decode): the
		// first bytes that fit, flagged as cut.
		raw := s.data
		if s.split >= 0 {
			raw = s.data[:s.split]
		}
		limit := n / 4 * 3
		cut := s.split >= 0
		if len(raw) > limit {
			raw, cut = raw[:limit], true
		}
		return shaped{text: base64.StdEncoding.EncodeToString(raw), cut: cut, binary: s.binary()}
	}
	if s.binary() {
		return shaped{binary: true, text: fmt.Sprintf(`[nsbox: %d bytes of binary output (not UTF-8 text) left out; call again with "encoding": "base64" to get them]`, s.total)}
	}
	return shapeText(s, n, keptAs)
}

// shapeProcess fits a process's stdout and stderr in the budget: each gets
// half, and what one does not need the other may use.
func shapeProcess(out *processOutput, rr sandbox.RunResult, env sandbox.ToolEnv, a outputArgs, k *keptOutput) {
	n := budget(env)
	capMax := int64(n) * captureFactor
	so := newStream("stdout", rr.Stdout, rr.StdoutBytes, capMax)
	se := newStream("stderr", rr.Stderr, rr.StderrBytes, capMax)
	var keptOut, keptErr string
	if k != nil {
		keptOut, keptErr = k.out.rel, k.err.rel
		out.StdoutFile, out.StderrFile = keptOut, keptErr
	}
	need := func(s stream) int {
		if s.split >= 0 {
			return n
		}
		if a.Encoding == "base64" {
			return (len(s.data) + 2) / 3 * 4
		}
		return utf8.RuneCount(s.data)
	}
	nOut, nErr := n/2, n-n/2
	if d := need(se); d < nErr {
		nOut += nErr - d
		nErr = d
	} else if d := need(so); d < nOut {
		nErr += nOut - d
		nOut = d
	}
	a1 := shapeStream(so, nOut, a.Encoding, keptOut)
	a2 := shapeStream(se, nErr, a.Encoding, keptErr)
	out.Stdout, out.Stderr = a1.text, a2.text
	out.Truncated = out.Truncated || a1.cut || a2.cut
	out.Binary = a1.binary || a2.binary
	if a.Encoding == "base64" {
		out.Encoding = "base64"
	}
}

var _ io.Writer = (*limitedFile)(nil)
