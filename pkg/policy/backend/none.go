package backend

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

// None runs commands directly on the host with os/exec: no namespaces, no
// mounts, no seccomp, no limits but the wall-clock timeout. Only the
// environment of the policy applies. It exists for hosts where no sandbox
// can be built and the user said that is acceptable.
type None struct{}

func (None) Name() string     { return "none" }
func (None) Priority() int    { return 1000 }
func (None) Isolates() bool   { return false }
func (None) Available() error { return nil }

func (None) Start(ctx context.Context, p sandbox.Policy, opts ...sandbox.Option) (Session, error) {
	if p.Cwd != "" {
		if st, err := os.Stat(p.Cwd); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("backend none: the working directory %s does not exist on the host", p.Cwd)
		}
	}
	return &noneSession{p: p}, nil
}

type noneSession struct{ p sandbox.Policy }

func (s *noneSession) Pid() int     { return os.Getpid() }
func (s *noneSession) Close() error { return nil }

func envValue(env []string, k string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], k+"="); ok {
			return v
		}
	}
	return ""
}

// lookPath finds argv0 on the PATH of the command's own environment, not
// nsbox's.
func lookPath(argv0, path string) (string, error) {
	if strings.Contains(argv0, "/") {
		return argv0, nil
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, argv0)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: %s", sandbox.ErrCommandNotFound, argv0)
}

func (s *noneSession) Exec(ctx context.Context, c sandbox.Command) (sandbox.Result, error) {
	if len(c.Argv) == 0 || c.Argv[0] == "" {
		return sandbox.Result{}, errors.New("exec: empty command")
	}
	env := s.p.Env
	if env == nil {
		env = sandbox.BaseEnv(os.Getenv)
	}
	env = append(append([]string(nil), env...), c.Env...)
	bin, err := lookPath(c.Argv[0], envValue(env, "PATH"))
	if err != nil {
		return sandbox.Result{}, err
	}
	timeout := c.Timeout
	if timeout == 0 {
		timeout = s.p.Limits.Time
	}
	runCtx := ctx
	cancel := func() {}
	if timeout > 0 {
		runCtx, cancel = context.WithTimeout(ctx, timeout)
	}
	defer cancel()
	cmd := exec.CommandContext(runCtx, bin, c.Argv[1:]...)
	cmd.Args[0] = c.Argv[0]
	cmd.Env = env
	cmd.Dir = c.Dir
	if cmd.Dir == "" {
		cmd.Dir = s.p.Cwd
	}
	// Its own process group, so that a timeout kills what it started too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	max := c.MaxOutput
	if max <= 0 {
		max = sandbox.DefaultMaxOutput
	}
	var outBuf, errBuf *sandbox.CapBuffer
	cmd.Stdin = c.Stdin
	if c.Stdin == nil {
		cmd.Stdin = nil // /dev/null
	}
	cmd.Stdout, cmd.Stderr = c.Stdout, c.Stderr
	if c.Stdout == nil {
		outBuf = &sandbox.CapBuffer{Max: max}
		cmd.Stdout = outBuf
	}
	if c.Stderr == nil {
		errBuf = &sandbox.CapBuffer{Max: max}
		cmd.Stderr = errBuf
	}
	start := time.Now()
	err = cmd.Start()
	if err != nil {
		return sandbox.Result{}, startError(c.Argv[0], err)
	}
	werr := cmd.Wait()
	res := sandbox.Result{Duration: time.Since(start), Reason: sandbox.ReasonExited}
	if outBuf != nil {
		res.Stdout, res.Truncated = outBuf.Bytes(), outBuf.Truncated()
	}
	if errBuf != nil {
		res.Stderr, res.Truncated = errBuf.Bytes(), res.Truncated || errBuf.Truncated()
	}
	if st, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
		if st.Signaled() {
			res.Signal, res.Reason = st.Signal(), sandbox.ReasonSignaled
		} else {
			res.ExitCode = st.ExitStatus()
		}
	}
	if timeout > 0 && errors.Is(runCtx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
		res.Reason = sandbox.ReasonTimeout
		return res, &sandbox.ResourceLimitError{Resource: "time", Limit: timeout.String(), Enforcer: "timer"}
	}
	if ctx.Err() != nil {
		res.Reason = sandbox.ReasonCanceled
		return res, ctx.Err()
	}
	var ee *exec.ExitError
	if werr != nil && !errors.As(werr, &ee) && !errors.Is(werr, exec.ErrWaitDelay) {
		return res, werr
	}
	return res, nil
}

func startError(argv0 string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %s", sandbox.ErrCommandNotFound, argv0)
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.ENOEXEC), errors.Is(err, syscall.EISDIR):
		return fmt.Errorf("%w: %s: %v", sandbox.ErrNotExecutable, argv0, unwrapPath(err))
	}
	return err
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
