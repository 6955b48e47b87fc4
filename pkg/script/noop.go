package script

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

// NoopSandbox runs scripts with the same contract as Native but WITHOUT
// isolation: directly on the host, as the caller, with the caller's access
// to every file, the network and every process. It exists for tests and for
// when sandboxing is explicitly disabled; Warning says so, and callers must
// show it. It still uses a fresh work directory, the minimal environment
// and the time limit; the memory limit and AllowNet=false are not enforced.
type NoopSandbox struct{}

var _ Sandbox = NoopSandbox{}

// Available is always true.
func (NoopSandbox) Available() bool { return true }

// Warning tells the user that nothing is isolated.
func (NoopSandbox) Warning() string {
	return "sandboxing is disabled: the script runs directly on the host with your full access to files, network and processes; memory and network limits are not enforced"
}

// Execute runs cfg on the host.
func (NoopSandbox) Execute(ctx context.Context, cfg ExecConfig) (string, string, error) {
	lang, err := cfg.validate()
	if err != nil {
		return "", "", err
	}
	wd, err := newWorkDir()
	if err != nil {
		return "", "", err
	}
	defer wd.remove()
	dir := wd.path
	file := filepath.Join(dir, lang.File)
	if err := os.WriteFile(file, []byte(cfg.Script), 0o600); err != nil {
		return "", "", fmt.Errorf("script: write script: %w", err)
	}
	path := os.Getenv("PATH")
	if path == "" {
		path = defaultPath
	}
	env := environ(path, dir, cfg.Env)
	interp := ""
	for _, name := range lang.Interpreters {
		if p, err := lookPath(name, envGet(env, "PATH")); err == nil {
			interp = p
			break
		}
	}
	if interp == "" {
		return "", "", InterpreterNotFound(lang.Name)
	}
	cwd := dir
	if cfg.WorkDir != "" {
		cwd = cfg.WorkDir
	}
	if d := cfg.timeout(); d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	cmd := exec.Command(interp, file)
	cmd.Dir, cmd.Env = cwd, env
	// Its own process group, so that a timeout kills everything it
	// started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, stderr := sandbox.CapBuffer{Max: sandbox.DefaultMaxOutput}, sandbox.CapBuffer{Max: sandbox.DefaultMaxOutput}
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		return "", "", fmt.Errorf("script: start %s: %w", interp, err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var werr error
	timedOut := false
	select {
	case werr = <-waited:
	case <-ctx.Done():
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		werr = <-waited
		timedOut = errors.Is(ctx.Err(), context.DeadlineExceeded)
	}
	out, errOut := stdout.String(), stderr.String()
	if timedOut {
		return out, errOut, &sandbox.ResourceLimitError{Resource: "time", Limit: cfg.timeout().String(), Enforcer: "timer"}
	}
	if ctx.Err() != nil {
		return out, errOut, ctx.Err()
	}
	code, sig := 0, 0
	var ee *exec.ExitError
	if errors.As(werr, &ee) {
		ws := ee.Sys().(syscall.WaitStatus)
		code = ws.ExitStatus()
		if ws.Signaled() {
			sig = int(ws.Signal())
			code = 128 + sig
		}
	} else if werr != nil {
		return out, errOut, werr
	}
	return out, errOut, cutError(resultError(code, sig, errOut, nil, cfg.MemoryMB), stdout.Truncated() || stderr.Truncated())
}

func lookPath(name, path string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

func envGet(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}
