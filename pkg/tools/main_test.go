package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

// TestMain makes the test binary a sandbox worker too: the benchmarks start
// real sessions, whose worker is /proc/self/exe re-executed.
func TestMain(m *testing.M) {
	sandbox.Init(sandbox.WithWorkerTools(NewBuiltinRegistry()))
	os.Exit(m.Run())
}

// hostEnv is a ToolEnv for unit tests: the tools run directly in the test
// process on a temp dir (no sandbox), so that confinement is tested on its
// own. Run uses os/exec.
type hostEnv struct {
	ws string
	s  sandbox.ToolSettings
}

func (e *hostEnv) Workspace() string              { return e.ws }
func (e *hostEnv) Settings() sandbox.ToolSettings { return e.s }
func (e *hostEnv) HostCall(ctx context.Context, api, method string, args any) (json.RawMessage, error) {
	return nil, errors.New("no host APIs in tests")
}

func (e *hostEnv) Run(ctx context.Context, spec sandbox.RunSpec) (sandbox.RunResult, error) {
	env := append(os.Environ(), spec.Env...)
	path := spec.Argv[0]
	if !strings.Contains(path, "/") {
		path = ""
		for _, dir := range filepath.SplitList(lastEnv(env, "PATH")) {
			if st, err := os.Stat(filepath.Join(dir, spec.Argv[0])); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
				path = filepath.Join(dir, spec.Argv[0])
				break
			}
		}
	}
	if path == "" {
		return sandbox.RunResult{ExitCode: 127, StartErr: "not_found"}, nil
	}
	if spec.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, spec.Timeout)
		defer cancel()
	}
	cmd := exec.Command(path, spec.Argv[1:]...)
	cmd.Dir = spec.Dir
	cmd.Env = env
	cmd.Stdin = bytes.NewReader(spec.Stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if spec.FullStdout != nil {
		cmd.Stdout, cmd.Stderr = io.MultiWriter(&out, spec.FullStdout), io.MultiWriter(&errb, spec.FullStderr)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return sandbox.RunResult{ExitCode: 126, StartErr: "not_executable"}, nil
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	res := sandbox.RunResult{}
	select {
	case <-done:
	case <-ctx.Done():
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		res.TimedOut = errors.Is(ctx.Err(), context.DeadlineExceeded)
	}
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	res.ExitCode = ws.ExitStatus()
	if ws.Signaled() {
		res.Signal = int(ws.Signal())
		res.ExitCode = 128 + res.Signal
	}
	res.Stdout, res.Stderr = out.Bytes(), errb.Bytes()
	return res, nil
}

func lastEnv(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

// call runs a tool through a registry (validation, timeouts, recovery
// included) and decodes its result.
func call(t *testing.T, r *Registry, env sandbox.ToolEnv, name string, args string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	raw, err := r.Call(ctx, env, name, json.RawMessage(args))
	if err != nil {
		t.Fatalf("%s: Call returned an error: %v", name, err)
	}
	var res struct {
		Success bool            `json:"success"`
		Output  json.RawMessage `json:"output"`
		Error   *string         `json:"error"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatalf("%s: result is not JSON: %v: %s", name, err, raw)
	}
	var out any
	json.Unmarshal(res.Output, &out)
	return Result{Success: res.Success, Output: out, Error: res.Error}
}

func errText(r Result) string {
	if r.Error == nil {
		return ""
	}
	return *r.Error
}

// field digs into a decoded output object.
func field(t *testing.T, r Result, keys ...string) any {
	t.Helper()
	v := r.Output
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("output %v: no object at %q", r.Output, k)
		}
		v = m[k]
	}
	return v
}

func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
