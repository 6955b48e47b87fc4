package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nsbox/nsbox/pkg/sandbox"
	"github.com/spf13/cobra"
)

type runFlags struct {
	rw, ro, tmpfs []string
	cwd           string
	network       string
	hostname      string
	env, passEnv  []string
	jsonStatus    string
	timeout       time.Duration
}

func newRunCmd() *cobra.Command {
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:   "run [flags] -- CMD [ARGS...]",
		Short: "Run a command in a new sandbox",
		Long: `Run CMD in a new sandbox and exit with its exit code.

The host's root is read-only inside; only --rw paths are writable. /tmp, /run
and /dev are private, the network holds only lo (unless --net host), and the
environment is cleared to PATH, HOME, TERM and LANG.

Exit status: the command's own code; 128+N when it died of signal N; 124 on
--timeout; 125 when nsbox itself failed; 126 when the command cannot be
executed; 127 when it was not found.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 0 || len(args) == 0 {
				return &exitError{code: exitNsboxFailed, msg: "run: missing command: use nsbox run [flags] -- CMD [ARGS...]"}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return runMain(f, args) },
	}
	fl := cmd.Flags()
	fl.StringArrayVar(&f.rw, "rw", nil, "bind `PATH[:DST]` read-write (repeatable)")
	fl.StringArrayVar(&f.ro, "ro", nil, "bind `PATH[:DST]` read-only (repeatable)")
	fl.StringArrayVar(&f.tmpfs, "tmpfs", nil, "mount an empty tmpfs at `DST` (repeatable)")
	fl.StringVar(&f.cwd, "cwd", "", "working `DIR` inside (default: the current directory when visible, else /)")
	fl.StringVar(&f.network, "net", "none", "network: none (only lo) or host")
	fl.StringVar(&f.hostname, "hostname", "nsbox", "hostname inside")
	fl.StringArrayVar(&f.env, "env", nil, "set `K=V` inside (repeatable)")
	fl.StringArrayVar(&f.passEnv, "pass-env", nil, "pass the variable `K` from this environment (repeatable)")
	fl.StringVar(&f.jsonStatus, "json-status", "", "write JSON status lines to `FILE` or fd:N")
	fl.DurationVar(&f.timeout, "timeout", 0, "kill the whole sandbox after `DURATION` (exit 124)")
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &exitError{code: exitNsboxFailed, msg: "run: " + err.Error()}
	})
	return cmd
}

// parseBind splits PATH[:DST]; a relative PATH is taken from the current
// directory, and DST defaults to PATH.
func parseBind(flag, spec string) (src, dst string, err error) {
	if spec == "" {
		return "", "", fmt.Errorf("--%s: empty path", flag)
	}
	if strings.ContainsRune(spec, 0) {
		return "", "", fmt.Errorf("--%s: path contains a NUL byte", flag)
	}
	src, dst, _ = strings.Cut(spec, ":")
	if src == "" {
		return "", "", fmt.Errorf("--%s %q: empty source path", flag, spec)
	}
	src, err = filepath.Abs(src)
	if err != nil {
		return "", "", fmt.Errorf("--%s %q: %v", flag, spec, err)
	}
	if dst == "" {
		dst = src
	}
	if !filepath.IsAbs(dst) {
		return "", "", fmt.Errorf("--%s %q: destination %q must be an absolute path", flag, spec, dst)
	}
	return src, filepath.Clean(dst), nil
}

func buildPolicy(f *runFlags) (sandbox.Policy, error) {
	p := sandbox.Policy{Hostname: f.hostname, Limits: sandbox.Limits{Time: f.timeout}}
	switch f.network {
	case "none", "":
		p.Network = sandbox.NetworkNone
	case "host":
		p.Network = sandbox.NetworkHost
	default:
		return p, fmt.Errorf("--net %q: want none or host", f.network)
	}
	for _, spec := range f.ro {
		src, dst, err := parseBind("ro", spec)
		if err != nil {
			return p, err
		}
		p.Mounts = append(p.Mounts, sandbox.Mount{Kind: sandbox.MountBind, Source: src, Dest: dst, ReadOnly: true})
	}
	for _, spec := range f.rw {
		src, dst, err := parseBind("rw", spec)
		if err != nil {
			return p, err
		}
		p.Mounts = append(p.Mounts, sandbox.Mount{Kind: sandbox.MountBind, Source: src, Dest: dst})
	}
	for _, d := range f.tmpfs {
		if !filepath.IsAbs(d) {
			return p, fmt.Errorf("--tmpfs %q: must be an absolute path", d)
		}
		p.Mounts = append(p.Mounts, sandbox.Mount{Kind: sandbox.MountTmpfs, Dest: filepath.Clean(d)})
	}
	env := sandbox.BaseEnv(os.Getenv)
	for _, k := range f.passEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for _, kv := range f.env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return p, fmt.Errorf("--env %q: want K=V", kv)
		}
		env = append(env, kv)
	}
	p.Env = dedupEnv(env)
	if f.cwd != "" {
		if !filepath.IsAbs(f.cwd) {
			return p, fmt.Errorf("--cwd %q: must be an absolute path", f.cwd)
		}
		p.Cwd = filepath.Clean(f.cwd)
	} else if wd, err := os.Getwd(); err == nil {
		// Kept when visible inside; the worker falls back to / if not.
		p.Cwd = wd
	}
	return p, nil
}

// dedupEnv keeps the last value of each key.
func dedupEnv(env []string) []string {
	idx := map[string]int{}
	out := []string{}
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := idx[k]; ok {
			out[i] = kv
			continue
		}
		idx[k] = len(out)
		out = append(out, kv)
	}
	return out
}

// statusWriter writes JSON status lines (--json-status).
type statusWriter struct{ w io.WriteCloser }

func openStatus(spec string) (*statusWriter, error) {
	if spec == "" {
		return &statusWriter{}, nil
	}
	if n, ok := strings.CutPrefix(spec, "fd:"); ok {
		fd, err := strconv.Atoi(n)
		if err != nil || fd < 0 {
			return nil, fmt.Errorf("--json-status %q: bad fd", spec)
		}
		f := os.NewFile(uintptr(fd), "status")
		if f == nil {
			return nil, fmt.Errorf("--json-status %q: bad fd", spec)
		}
		return &statusWriter{w: f}, nil
	}
	f, err := os.OpenFile(spec, os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("--json-status: %v", err)
	}
	return &statusWriter{w: f}, nil
}

func (s *statusWriter) emit(v map[string]any) {
	if s == nil || s.w == nil {
		return
	}
	b, _ := json.Marshal(v)
	s.w.Write(append(b, '\n'))
}

func (s *statusWriter) close() {
	if s != nil && s.w != nil {
		s.w.Close()
	}
}

func runMain(f *runFlags, argv []string) error {
	p, err := buildPolicy(f)
	if err != nil {
		return &exitError{code: exitNsboxFailed, msg: err.Error()}
	}
	status, err := openStatus(f.jsonStatus)
	if err != nil {
		return &exitError{code: exitNsboxFailed, msg: err.Error()}
	}
	defer status.close()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	s, err := sandbox.Start(ctx, p)
	if err != nil {
		step := ""
		var se *sandbox.SetupError
		if errors.As(err, &se) {
			step = se.Step
		}
		status.emit(map[string]any{"event": "exited", "reason": "setup_error", "step": step, "error": err.Error(), "exit_code": exitNsboxFailed})
		return &exitError{code: exitNsboxFailed, msg: err.Error()}
	}
	defer s.Close()
	status.emit(map[string]any{"event": "started", "pid": s.Pid()})

	res, err := s.Exec(ctx, sandbox.Command{Argv: argv, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
	// The command is done: everything it left behind dies with the sandbox.
	closeErr := s.Close()
	code, msg := exitStatus(res, err)
	ev := map[string]any{"event": "exited", "exit_code": code, "signal": int(res.Signal), "reason": string(res.Reason)}
	var rl *sandbox.ResourceLimitError
	if errors.As(err, &rl) {
		ev["resource"], ev["limit"], ev["enforcer"] = rl.Resource, rl.Limit, rl.Enforcer
	}
	if res.Reason == "" {
		ev["reason"] = "setup_error"
	}
	status.emit(ev)
	if closeErr != nil && msg == "" {
		msg = "cleanup: " + closeErr.Error()
	}
	if code == 0 && msg == "" {
		return nil
	}
	return &exitError{code: code, msg: msg}
}

// exitStatus maps how the command ended to nsbox's exit code and message.
func exitStatus(res sandbox.Result, err error) (int, string) {
	var rl *sandbox.ResourceLimitError
	switch {
	case err == nil:
		return res.ExitCode, ""
	case errors.As(err, &rl):
		switch rl.Resource {
		case "time":
			return exitTimeout, err.Error()
		case "memory":
			return exitOOMKilled, err.Error()
		}
		code := res.ExitCode
		if code == 0 {
			code = 1
		}
		return code, err.Error()
	case errors.Is(err, sandbox.ErrCommandNotFound):
		return exitNotFound, err.Error()
	case errors.Is(err, sandbox.ErrNotExecutable):
		return exitCannotExec, err.Error()
	case errors.Is(err, context.Canceled):
		return res.ExitCode, "interrupted"
	}
	return exitNsboxFailed, err.Error()
}
