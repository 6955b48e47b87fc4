package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// drainGrace is how long output is still read after a command exited while
// a process it left behind keeps the pipe open. What the command itself
// wrote is already in the pipe and is read at once.
const drainGrace = 100 * time.Millisecond

type stdio struct {
	child    [3]*os.File // the ends the command gets
	ownChild [3]bool     // whether we created (and must close) child[i]
	starts   []func()
	wg       sync.WaitGroup
	readers  []*os.File
	closers  []*os.File
	capOut   *CapBuffer
	capErr   *CapBuffer
}

// CapBuffer keeps the first Max bytes written to it and drops the rest,
// saying so (Truncated): a command's output kept in the supervisor's
// memory, whatever the command writes.
//
// The buffer is a field, not embedded: an embedded bytes.Buffer brings
// its ReadFrom along, which io.Copy (os/exec) uses instead of Write, and
// nothing is cut or bounded (review 47).
type CapBuffer struct {
	Max       int64
	buf       bytes.Buffer
	truncated bool
}

func (c *CapBuffer) Write(p []byte) (int, error) {
	room := c.Max - int64(c.buf.Len())
	if room <= 0 {
		c.truncated = c.truncated || len(p) > 0
		return len(p), nil
	}
	if int64(len(p)) > room {
		c.buf.Write(p[:room])
		c.truncated = true
		return len(p), nil
	}
	return c.buf.Write(p)
}

// Bytes is what was kept.
func (c *CapBuffer) Bytes() []byte { return c.buf.Bytes() }

// String is what was kept.
func (c *CapBuffer) String() string { return c.buf.String() }

// Truncated says some of what was written was dropped.
func (c *CapBuffer) Truncated() bool { return c.truncated }

func newStdio(c Command) (*stdio, error) {
	s := &stdio{}
	max := c.MaxOutput
	if max <= 0 {
		max = DefaultMaxOutput
	}
	ok := false
	defer func() {
		if !ok {
			s.close()
		}
	}()
	// stdin
	switch r := c.Stdin.(type) {
	case nil:
		f, err := os.Open(os.DevNull)
		if err != nil {
			return nil, err
		}
		s.child[0], s.ownChild[0] = f, true
	case *os.File:
		if err := notDir(r); err != nil {
			return nil, err
		}
		s.child[0] = r
	default:
		pr, pw, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		s.child[0], s.ownChild[0] = pr, true
		s.closers = append(s.closers, pw)
		s.starts = append(s.starts, func() {
			go func() {
				io.Copy(pw, r)
				pw.Close()
			}()
		})
	}
	for i, w := range []io.Writer{c.Stdout, c.Stderr} {
		fd := i + 1
		if f, isFile := w.(*os.File); isFile {
			if err := notDir(f); err != nil {
				return nil, err
			}
			s.child[fd] = f
			continue
		}
		if w == nil {
			cb := &CapBuffer{Max: max}
			if fd == 1 {
				s.capOut = cb
			} else {
				s.capErr = cb
			}
			w = cb
		}
		pr, pw, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		s.child[fd], s.ownChild[fd] = pw, true
		s.readers = append(s.readers, pr)
		dst := w
		s.wg.Add(1)
		s.starts = append(s.starts, func() {
			go func() {
				defer s.wg.Done()
				io.Copy(dst, pr)
			}()
		})
	}
	ok = true
	return s, nil
}

// notDir refuses a directory as stdio: a directory fd inside the sandbox is
// a way out of its root through /proc/self/fd (CVE-2024-21626 class).
func notDir(f *os.File) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("stdio %s: %w", f.Name(), err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return errors.New("stdio must not be a directory")
	}
	return nil
}

func (s *stdio) childFDs() []int {
	return []int{int(s.child[0].Fd()), int(s.child[1].Fd()), int(s.child[2].Fd())}
}

func (s *stdio) start() {
	for _, f := range s.starts {
		f()
	}
}

// closeChildEnds drops our copies of the command's ends, so that the pipes
// reach EOF once the command (and anything it left behind) is gone.
func (s *stdio) closeChildEnds() {
	for i := range s.child {
		if s.ownChild[i] && s.child[i] != nil {
			s.child[i].Close()
			s.child[i] = nil
		}
	}
}

// finish waits for the output copiers and fills the captured output.
func (s *stdio) finish(r *Result) {
	s.closeChildEnds()
	for _, pr := range s.readers {
		pr.SetReadDeadline(time.Now().Add(drainGrace))
	}
	s.wg.Wait()
	if s.capOut != nil {
		r.Stdout = s.capOut.Bytes()
		r.Truncated = r.Truncated || s.capOut.Truncated()
	}
	if s.capErr != nil {
		r.Stderr = s.capErr.Bytes()
		r.Truncated = r.Truncated || s.capErr.Truncated()
	}
}

func (s *stdio) close() {
	s.closeChildEnds()
	for _, f := range s.readers {
		f.Close()
	}
	for _, f := range s.closers {
		f.Close()
	}
}
