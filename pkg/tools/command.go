package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nsbox/nsbox/pkg/sandbox"
	"github.com/nsbox/nsbox/pkg/script"
	"golang.org/x/sys/unix"
)

// ---- run_command

type runCommandTool struct{}

func (runCommandTool) Definition() Definition {
	return Definition{
		Name:        "run_command",
		Description: "Run a command in the sandbox, in the workspace: either a shell command line (run by /bin/sh -c) or an argv. Returns exit code, stdout and stderr (bounded). Commands on the policy's blocked list (sudo, su, rm -rf /, ...) are refused.",
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "command": {"type": "string", "minLength": 1, "maxLength": 65536, "description": "Shell command line, run with /bin/sh -c"},
    "argv": {"type": "array", "minItems": 1, "maxItems": 4096, "items": {"type": "string"}, "description": "Program and arguments, run without a shell"},
    "cwd": {"type": "string", "maxLength": 4096, "description": "Working directory, relative to the workspace root (default: the root)"},
    "timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": 86400, "description": "Seconds before the command is killed (default: the call's timeout, 30 s)"},
    ` + outputSchema + `
  },
  "additionalProperties": false
}`),
	}
}

type runCommandArgs struct {
	outputArgs
	Command string   `json:"command"`
	Argv    []string `json:"argv"`
	Cwd     string   `json:"cwd"`
	Timeout float64  `json:"timeout"`
}

type processOutput struct {
	ExitCode  int    `json:"exit_code"`
	Signal    int    `json:"signal,omitempty"`
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
	TimedOut  bool   `json:"timed_out"`
	Truncated bool   `json:"truncated"`
	// Binary: stdout or stderr is not UTF-8 text (output.go).
	Binary bool `json:"binary,omitempty"`
	// Encoding is "base64" when stdout and stderr are.
	Encoding string `json:"encoding,omitempty"`
	// StdoutFile and StderrFile hold the complete streams (keep_output),
	// relative to the workspace root.
	StdoutFile string `json:"stdout_file,omitempty"`
	StderrFile string `json:"stderr_file,omitempty"`
}

func (runCommandTool) Run(ctx context.Context, env sandbox.ToolEnv, args json.RawMessage) Result {
	var a runCommandArgs
	if err := decode(args, &a); err != nil {
		return failErr(err)
	}
	if (a.Command == "") == (len(a.Argv) == 0) {
		return Fail(`arguments: give exactly one of "command" (a shell command line) or "argv"`)
	}
	rules := settings(env).BlockedCommands
	if len(rules) == 0 {
		rules = DefaultBlockedCommands
	}
	bl, err := NewBlockList(rules)
	if err != nil {
		return failErr(err)
	}
	argv := a.Argv
	if a.Command != "" {
		if strings.ContainsRune(a.Command, 0) {
			return Fail(`argument "command": contains a NUL byte`)
		}
		err = bl.CheckShell(a.Command)
		argv = []string{"/bin/sh", "-c", a.Command}
	} else {
		err = bl.CheckArgv(a.Argv)
	}
	if err != nil {
		return failErr(err)
	}
	root, err := openWorkspace(env)
	if err != nil {
		return failErr(err)
	}
	defer root.Close()
	dir, err := workDir(root, a.Cwd)
	if err != nil {
		return failErr(err)
	}
	timeout := defaultTimeout(env)
	if a.Timeout > 0 {
		timeout = seconds(a.Timeout)
	}
	timeout = callTimeout(ctx, timeout)
	spec := sandbox.RunSpec{Argv: argv, Dir: dir, Timeout: timeout}
	kept, err := captureSpec(&spec, env, a.outputArgs)
	if err != nil {
		return failErr(err)
	}
	rr, err := env.Run(ctx, spec)
	kept.close()
	res := processResult("command", argv[0], rr, err, timeout)
	shapeProcess(res.Output.(*processOutput), rr, env, a.outputArgs, kept)
	return res
}

// workDir resolves a cwd argument below the root and returns the directory
// as the kernel resolved it. The command can still cd anywhere the sandbox
// lets it: the cwd is a convenience, the sandbox is the boundary.
func workDir(root *Root, cwd string) (string, error) {
	fd, _, err := root.open(cwd, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	rel, err := root.RelOf(fd)
	if err != nil {
		return "", &PathError{Path: cwd, Err: ErrOutsideWorkspace}
	}
	if rel == "." {
		return root.real, nil
	}
	return root.real + "/" + rel, nil
}

// processResult turns how a process ended into a tool result: success only
// for exit code 0; the output is returned either way.
func processResult(what, name string, rr sandbox.RunResult, err error, timeout time.Duration) Result {
	out := &processOutput{ExitCode: rr.ExitCode, Signal: rr.Signal, Stdout: string(rr.Stdout), Stderr: string(rr.Stderr),
		TimedOut: rr.TimedOut || errors.Is(err, context.DeadlineExceeded), Truncated: rr.Truncated}
	switch {
	case out.TimedOut:
		return withReason(failWith(out, fmt.Sprintf("%s timed out after %s and was killed", what, roundDuration(timeout))), ReasonTimeout)
	case errors.Is(err, context.Canceled):
		return withReason(failWith(out, what+" canceled"), ReasonCanceled)
	case err != nil:
		return failWith(out, err.Error())
	case rr.StartErr == "not_found":
		return failWith(out, fmt.Sprintf("command not found: %s", name))
	case rr.StartErr != "":
		return failWith(out, fmt.Sprintf("cannot execute %s", name))
	case rr.Signal == int(unix.SIGSYS):
		// The seccomp filter kills a process that makes a forbidden
		// syscall (a foreign ABI): a violation, not a crash.
		return withReason(failWith(out, fmt.Sprintf("%s killed by the sandbox's seccomp filter (SIGSYS): a forbidden system call", what)), ReasonViolation)
	case rr.Signal != 0:
		return failWith(out, fmt.Sprintf("%s killed by signal %d", what, rr.Signal))
	case rr.ExitCode != 0:
		return failWith(out, fmt.Sprintf("%s exited with code %d", what, rr.ExitCode))
	}
	return OK(out)
}

// failWith is a failed result that still carries output.
func failWith(output any, msg string) Result {
	return Result{Success: false, Output: output, Error: &msg}
}

// ---- run_script

type runScriptTool struct{}

func (runScriptTool) Definition() Definition {
	return Definition{
		Name:        "run_script",
		Description: "Run an inline script (python, node, bash or ruby) in the sandbox, in the workspace. The script file lives in a fresh temporary directory (also its HOME), removed afterwards. Returns exit code, stdout and stderr.",
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "language": {"type": "string", "enum": ["python", "node", "bash", "ruby"]},
    "script": {"type": "string", "minLength": 1, "maxLength": 1048576, "description": "The program text"},
    "timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": 86400, "description": "Seconds before the script is killed (default: the call's timeout, 30 s)"},
    "env": {"type": "object", "additionalProperties": {"type": "string"}, "maxProperties": 256, "description": "Extra environment variables"},
    ` + outputSchema + `
  },
  "required": ["language", "script"],
  "additionalProperties": false
}`),
	}
}

type runScriptArgs struct {
	outputArgs
	Language string            `json:"language"`
	Script   string            `json:"script"`
	Timeout  float64           `json:"timeout"`
	Env      map[string]string `json:"env"`
}

func (runScriptTool) Run(ctx context.Context, env sandbox.ToolEnv, args json.RawMessage) Result {
	var a runScriptArgs
	if err := decode(args, &a); err != nil {
		return failErr(err)
	}
	lang, err := script.LookupLanguage(a.Language)
	if err != nil {
		return failErr(err)
	}
	var extra []string
	for k, v := range a.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return Fail(fmt.Sprintf("argument \"env.%s\": invalid variable", k))
		}
		extra = append(extra, k+"="+v)
	}
	timeout := defaultTimeout(env)
	if a.Timeout > 0 {
		timeout = seconds(a.Timeout)
	}
	timeout = callTimeout(ctx, timeout)
	dir := ""
	if env.Workspace() != "" {
		root, err := openWorkspace(env)
		if err != nil {
			return failErr(err)
		}
		dir = root.real
		root.Close()
	}
	spec := sandbox.RunSpec{Dir: dir, Timeout: timeout, Env: extra}
	kept, err := captureSpec(&spec, env, a.outputArgs)
	if err != nil {
		return failErr(err)
	}
	rr, err := runInterpreter(ctx, env, lang, a.Script, spec)
	kept.close()
	if errors.Is(err, sandbox.ErrInterpreterNotFound) {
		return failErr(err)
	}
	res := processResult("script", lang.Name, rr, err, timeout)
	shapeProcess(res.Output.(*processOutput), rr, env, a.outputArgs, kept)
	if !res.Success && err == nil && !rr.TimedOut {
		// A refused write or a failed allocation has a clearer name than
		// "exited with code 1".
		if cerr := script.Classify(string(rr.Stderr), ""); cerr != nil {
			msg := cerr.Error()
			res.Error = &msg
		}
	}
	return res
}

// runInterpreter writes code to a fresh directory under the sandbox's /tmp
// and runs it with the language's first interpreter found on PATH. The
// directory (the script's HOME too) is removed afterwards.
//
// spec gives the directory (default: the script's), stdin, timeout, extra
// environment and the capture; Argv is set here.
func runInterpreter(ctx context.Context, env sandbox.ToolEnv, lang script.Language, code string, spec sandbox.RunSpec) (sandbox.RunResult, error) {
	tmp, err := os.MkdirTemp("", "nsbox-script-")
	if err != nil {
		return sandbox.RunResult{}, fmt.Errorf("script directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	file := filepath.Join(tmp, lang.File)
	if err := os.WriteFile(file, []byte(code), 0o600); err != nil {
		return sandbox.RunResult{}, fmt.Errorf("script file: %w", err)
	}
	if spec.Dir == "" {
		spec.Dir = tmp
	}
	if spec.MaxOutput == 0 {
		spec.MaxOutput = maxOutput(env)
	}
	spec.Env = append([]string{"HOME=" + tmp}, spec.Env...)
	for _, interp := range lang.Interpreters {
		spec.Argv = []string{interp, file}
		rr, err := env.Run(ctx, spec)
		if rr.StartErr == "not_found" && err == nil {
			continue
		}
		return rr, err
	}
	return sandbox.RunResult{ExitCode: 127}, script.InterpreterNotFound(lang.Name)
}
