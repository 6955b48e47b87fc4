// Package script runs inline scripts (python, node, bash, ruby) in a fresh
// sandbox each: the interpreter is found on PATH inside the sandbox, the
// script is written to a fresh work directory that is the only writable
// place, the environment is minimal, the network is off unless asked for,
// and memory and time are limited. Every end is typed: an *ExitError for a
// non-zero exit, a *sandbox.ResourceLimitError for a limit, a
// *sandbox.ViolationError for a write the sandbox refused, and
// sandbox.ErrInterpreterNotFound when the language has no interpreter.
//
// A program that uses Native must call sandbox.Init first thing in main
// (the sandbox worker is the program itself, re-executed).
package script

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

// ExecConfig is one script to run.
type ExecConfig struct {
	// Language is "python", "node", "bash" or "ruby".
	Language string `json:"language"`
	// Script is the program text, written to a file in the work directory.
	Script string `json:"script"`
	// Env is added to the minimal environment (PATH, HOME); a key set here
	// wins, PATH included.
	Env map[string]string `json:"env,omitempty"`
	// MemoryMB limits memory (0: no limit).
	MemoryMB int `json:"memoryMB,omitempty"`
	// TimeoutSec limits wall-clock time: 0 means DefaultTimeout, a
	// negative value means no limit.
	TimeoutSec int `json:"timeoutSec,omitempty"`
	// AllowNet gives the script the host's network; without it the
	// sandbox has only a loopback interface.
	AllowNet bool `json:"allowNet,omitempty"`
	// AllowHosts, when not empty (and AllowNet is false), gives the script
	// a filtered network that reaches only these host patterns
	// ("registry.npmjs.org", "*.pythonhosted.org", "NAME:PORT"); a
	// refused connection or lookup makes a failed script's error a
	// *sandbox.ViolationError naming "host:port".
	AllowHosts []string `json:"allowHosts,omitempty"`
	// WorkDir, when set, is an existing host directory the script runs in,
	// writable. When empty the script runs in its fresh work directory
	// (created for this execution and removed after it).
	WorkDir string `json:"workDir,omitempty"`
}

// DefaultTimeout applies when ExecConfig.TimeoutSec is 0.
const DefaultTimeout = 30 * time.Second

// Sandbox runs scripts. Native is the real one; NoopSandbox runs the same
// contract without isolation.
type Sandbox interface {
	// Execute runs one script and returns what it printed. err is nil when
	// it exited 0; otherwise an *ExitError, a *sandbox.ResourceLimitError,
	// a *sandbox.ViolationError, or an error wrapping
	// sandbox.ErrInterpreterNotFound / sandbox.ErrUnavailable.
	Execute(ctx context.Context, cfg ExecConfig) (stdout, stderr string, err error)
	// Available reports whether Execute can work on this host.
	Available() bool
	// Warning is non-empty when this Sandbox does not isolate: callers
	// must show it to the user (this package never prints).
	Warning() string
}

// ExitError is a script that ended with a non-zero status.
type ExitError struct {
	Code   int
	Signal int
}

func (e *ExitError) Error() string {
	if e.Signal != 0 {
		return fmt.Sprintf("script killed by signal %d", e.Signal)
	}
	return fmt.Sprintf("script exited with code %d", e.Code)
}

// ErrUnsupportedLanguage is matched by the error for an unknown language.
var ErrUnsupportedLanguage = errors.New("unsupported language")

// Language describes how to run one script language.
type Language struct {
	Name string
	// Interpreters are looked up on PATH in this order.
	Interpreters []string
	// File is the script's file name in the work directory.
	File string
}

var languages = map[string]Language{
	"python": {Name: "python", Interpreters: []string{"python3", "python"}, File: "main.py"},
	"node":   {Name: "node", Interpreters: []string{"node", "nodejs"}, File: "main.js"},
	// bash, not sh: scripts written for bash fail in subtle ways under
	// dash.
	"bash": {Name: "bash", Interpreters: []string{"bash"}, File: "main.sh"},
	"ruby": {Name: "ruby", Interpreters: []string{"ruby"}, File: "main.rb"},
}

// aliases are accepted spellings of the language names.
var aliases = map[string]string{
	"python3": "python", "py": "python",
	"javascript": "node", "js": "node", "nodejs": "node",
	"sh": "bash", "shell": "bash",
	"rb": "ruby",
}

// Languages lists the supported language names.
func Languages() []string {
	out := make([]string, 0, len(languages))
	for n := range languages {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// LookupLanguage returns how to run name (or one of its aliases).
func LookupLanguage(name string) (Language, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	if a, ok := aliases[n]; ok {
		n = a
	}
	l, ok := languages[n]
	if !ok {
		return Language{}, fmt.Errorf("%w %q (want one of %s)", ErrUnsupportedLanguage, name, strings.Join(Languages(), ", "))
	}
	return l, nil
}

// InterpreterNotFound is the error for a language with no interpreter on
// PATH: "interpreter not found: ruby".
func InterpreterNotFound(lang string) error {
	return fmt.Errorf("%w: %s", sandbox.ErrInterpreterNotFound, lang)
}

// MaxScriptSize bounds a script's text.
const MaxScriptSize = 4 << 20

func (c *ExecConfig) validate() (Language, error) {
	l, err := LookupLanguage(c.Language)
	if err != nil {
		return l, err
	}
	if len(c.Script) > MaxScriptSize {
		return l, fmt.Errorf("script is %d bytes, more than the %d allowed", len(c.Script), MaxScriptSize)
	}
	if c.MemoryMB < 0 {
		return l, fmt.Errorf("memory limit must not be negative")
	}
	for k, v := range c.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return l, fmt.Errorf("environment variable %q: invalid name or value", k)
		}
	}
	return l, nil
}

func (c *ExecConfig) timeout() time.Duration {
	switch {
	case c.TimeoutSec == 0:
		return DefaultTimeout
	case c.TimeoutSec < 0:
		return 0
	}
	return time.Duration(c.TimeoutSec) * time.Second
}

// environ builds the script's environment: PATH and HOME, then Env (sorted,
// so that the result does not depend on map order).
func environ(path, home string, extra map[string]string) []string {
	env := map[string]string{"PATH": path, "HOME": home}
	for k, v := range extra {
		env[k] = v
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, k+"="+env[k])
	}
	return out
}

const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
