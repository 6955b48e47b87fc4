package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nsbox/nsbox/pkg/hostapi"
	"github.com/nsbox/nsbox/pkg/policy"
	"github.com/nsbox/nsbox/pkg/policy/backend"
	"github.com/nsbox/nsbox/pkg/sandbox"
	"github.com/nsbox/nsbox/pkg/tools"
	"github.com/spf13/cobra"
)

// toolRegistry is this binary's tool set: the sandbox worker serves it
// (sandbox.Init in main) and `nsbox tools list` lists it without a sandbox.
// toolRegistry is every tool the worker serves: the workspace tools,
// run_script, and the memory and notepad tools (which reach their stores on
// the host through hostCall only).
func toolRegistry() *tools.Registry { return tools.NewBuiltinRegistry(hostapi.Tools()...) }

// hostAPIOptions serves the memory and notepad host APIs to a session whose
// policy allows them.
func hostAPIOptions(p *sandbox.Policy) ([]sandbox.Option, func() error, error) {
	if len(p.HostAPIs) == 0 {
		return nil, func() error { return nil }, nil
	}
	dir, err := hostapi.DataDir(os.Getenv)
	if err != nil {
		return nil, nil, err
	}
	h, closeStores, err := hostapi.DefaultHandlers(dir)
	if err != nil {
		return nil, nil, err
	}
	return []sandbox.Option{sandbox.WithHandlers(h)}, closeStores, nil
}

func newToolsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tools",
		Short: "List or call the sandboxed tools (read_file, run_command, ...)",
		Long: `The tools an agent gets: read_file, write_file, list_directory, run_command,
search_files, run_script and edit_file, confined to a workspace directory and run
inside a sandbox. See docs/tools.md.`,
	}
	cmd.AddCommand(newToolsListCmd(), newToolsCallCmd())
	return cmd
}

func newToolsListCmd() *cobra.Command {
	var (
		format string
		only   []string
	)
	cmd := &cobra.Command{
		Use:   "list [--format FORMAT] [--tools NAME,...]",
		Short: "Print the tool definitions (no sandbox is started)",
		Long: `Print the tool definitions as JSON, in the shape an API takes:
  openai            Chat Completions: [{"type":"function","function":{name, description, parameters}}]
  openai-strict     the same with "strict": true and schemas strict mode accepts
                    (every object closed and fully required, optional arguments
                    nullable: nsbox tools call drops the nulls again)
  openai-responses  Responses API, flat and strict: [{"type":"function", name, description, parameters, "strict": true}]
  openai-realtime   Realtime API, flat: [{"type":"function", name, description, parameters}]
  ollama            Ollama's tools: parameters of type, properties, required
                    (properties: type, description, enum, items)
  anthropic         Messages API: [{name, description, input_schema}]
  mcp               MCP tools/list: [{name, title, description, inputSchema, annotations}]
  session           what a session lists: {"tools":[{name, description, parameters}]}
--tools keeps only the named tools (small models do better with few).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			r := toolRegistry()
			if err := r.Err(); err != nil {
				return &exitError{code: exitNsboxFailed, msg: "tools: " + err.Error()}
			}
			defs, err := chooseTools(r.List(), only)
			if err != nil {
				return &exitError{code: 2, msg: "tools list: --tools: " + err.Error()}
			}
			out, err := tools.FormatDefinitions(defs, format)
			if err != nil {
				return &exitError{code: 2, msg: "tools list: --format: " + err.Error()}
			}
			return printJSON(out)
		},
	}
	cmd.Flags().StringVar(&format, "format", tools.FormatOpenAI, "output `FORMAT`: "+strings.Join(tools.Formats, ", "))
	cmd.Flags().StringSliceVar(&only, "tools", nil, "list only the tools `NAME,...`")
	return cmd
}

// chooseTools keeps the definitions named in only, in the registry's order
// (nil only: all); a name no tool has is an error that lists the names.
func chooseTools(defs []tools.Definition, only []string) ([]tools.Definition, error) {
	if only == nil {
		return defs, nil
	}
	known := map[string]bool{}
	var names []string
	for _, d := range defs {
		known[d.Name] = true
		names = append(names, d.Name)
	}
	want := map[string]bool{}
	for _, n := range only {
		n = strings.TrimSpace(n)
		if !known[n] {
			return nil, fmt.Errorf("unknown tool %q (the tools are: %s)", n, strings.Join(names, ", "))
		}
		want[n] = true
	}
	var out []tools.Definition
	for _, d := range defs {
		if want[d.Name] {
			out = append(out, d)
		}
	}
	return out, nil
}

type toolsCallFlags struct {
	workspace string
	profile   string
	timeout   time.Duration
	maxOutput int
	session   string
	shallow   []string
}

func newToolsCallCmd() *cobra.Command {
	f := &toolsCallFlags{}
	cmd := &cobra.Command{
		Use:   "call NAME [JSON-ARGS]",
		Short: "Call one tool in a new sandbox and print its result",
		Long: `Start a sandbox for the tools as nsbox mcp does (the profile: --profile, else
your config's, else workspace: the workspace read-write, the rest of the host
read-only, credentials and .env files hidden, .git read-only, no network),
call the tool NAME with JSON-ARGS, and print its result
{"success", "output", "error", "reason"} (reason, on a failure nsbox can
type: timeout, oom, pids, violation or canceled). JSON-ARGS is taken as a
model sends it: '' (or omitted, or null) for none, the JSON object, or the
object as a JSON string; the nulls a model in strict mode sends for
arguments it does not give are dropped. A syntax error says at which byte.
Output over the budget (--max-output) keeps its head and tail around a
marker. With --session NAME the call runs in that session's sandbox, kept
alive between calls (nsbox session --help).

Exit status: 0 when the tool succeeded, 1 when it failed, 125 when nsbox
could not run it.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw := "{}"
			if len(args) == 2 {
				raw = args[1]
			}
			args0, err := modelArgs(args[0], raw)
			if err != nil {
				// Same shape as every other failure, for scripts that
				// parse it.
				msg := err.Error()
				printJSON(mustJSON(tools.Result{Success: false, Output: "", Error: &msg}))
				return &exitError{code: 1}
			}
			if f.session != "" {
				return toolsCallSession(f, f.session, args[0], string(args0))
			}
			return toolsCall(f, args[0], args0)
		},
	}
	cmd.Flags().StringVar(&f.workspace, "workspace", "", "workspace `DIR` the tools are confined to (default: the current directory)")
	cmd.Flags().StringVar(&f.profile, "profile", "", "policy profile: a `NAME` (nsbox profiles list) or a FILE (default: the config's, else workspace)")
	cmd.Flags().StringArrayVar(&f.shallow, "shallow", nil, "search the writable `DIR` at its top level only: nested repositories, .env files and agent configs below it are neither protected nor audited (for a tree too big to walk; repeatable)")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 0, "per-call timeout (default: 30s)")
	cmd.Flags().StringVar(&f.session, "session", "", "call in the named session `NAME` (nsbox session), started when not running: /tmp, background processes and installed packages persist between calls")
	cmd.Flags().IntVar(&f.maxOutput, "max-output", 0, fmt.Sprintf("output budget in `CHARACTERS`: longer output keeps its head and tail around a marker (default: the config's tools.max_output, else %d)", tools.DefaultMaxOutput))
	return cmd
}

// toolsPreview is the policy of `nsbox tools call`: the profile of the
// config file, else workspace, as for nsbox mcp, with --workspace: the
// workspace writable, credentials and .env files hidden, .git and shell
// startup files protected, no network.
func toolsPreview(f *toolsCallFlags) (*policy.Preview, error) {
	host, err := hostForCLI()
	if err != nil {
		return nil, err
	}
	l := &policy.Layer{Kind: policy.KindFlags, Name: "command line", KeyNames: flagKeys}
	if f.workspace != "" {
		l.Config.Workspace = &f.workspace
	}
	l.Config.Filesystem.Shallow = f.shallow
	if f.maxOutput != 0 {
		if f.maxOutput < 0 {
			return nil, fmt.Errorf("--max-output %d: must be a positive number of characters", f.maxOutput)
		}
		n := strconv.Itoa(f.maxOutput)
		l.Config.Tools.MaxOutput = &n
	}
	pv, err := policy.Peek(host, policy.Request{Profile: f.profile, Flags: l})
	if err != nil {
		return nil, err
	}
	choice, err := backend.Choose(pv.Backend, false, false)
	if err != nil {
		return nil, err
	}
	if !choice.Backend.Isolates() {
		return nil, errors.New("the tools run inside the sandbox, so backend " + choice.Backend.Name() + " cannot serve them; set backend = \"auto\" (or \"native\") in your config, or choose a profile with --profile")
	}
	return pv, nil
}

func toolsCall(f *toolsCallFlags, name string, raw json.RawMessage) error {
	// The interrupt handlers, set up beside the policy's preview and in
	// place before the sandbox starts (startInterrupt).
	interruptReady := startInterrupt()
	pv, err := toolsPreview(f)
	if err != nil {
		return &exitError{code: exitNsboxFailed, msg: "tools call: " + err.Error()}
	}
	ctx := interruptReady()
	defer ctx.Stop()
	opts, closeStores, err := hostAPIOptions(&sandbox.Policy{HostAPIs: hostapi.Methods()})
	if err != nil {
		return &exitError{code: exitNsboxFailed, msg: "host APIs: " + err.Error()}
	}
	defer closeStores()
	s, err := startToolSession(ctx, pv, opts)
	if err != nil {
		if sig := ctx.Signal(); sig != 0 && errors.Is(err, context.Canceled) {
			return interrupted(sig, "interrupted by "+signalName(sig)+": the tool's sandbox was killed")
		}
		if reason := backend.Unavailable(backend.Native{}, err); reason != nil {
			err = unavailableError(reason)
		}
		return &exitError{code: exitNsboxFailed, msg: "tools call: " + err.Error()}
	}
	defer s.Close()
	printWarnings(msgs, s.res, false)
	res, err := s.CallTool(ctx, name, raw, f.timeout)
	if cerr := s.Close(); errors.Is(cerr, sandbox.ErrTeardownIncomplete) {
		// Fail closed, as nsbox run does: without a PID namespace,
		// processes of the tool's sandbox may still run.
		return &exitError{code: exitNsboxFailed, msg: "tools call: cleanup: " + cerr.Error()}
	}
	var rl *sandbox.ResourceLimitError
	if errors.As(err, &rl) && len(res) > 0 {
		// The result carries the limit as its reason: printed like any
		// other failed call, the same object the Go API and MCP give.
		err = nil
	}
	if err != nil {
		if sig := ctx.Signal(); sig != 0 && errors.Is(err, context.Canceled) {
			return interrupted(sig, "interrupted by "+signalName(sig)+": the tool's sandbox was killed")
		}
		return &exitError{code: exitNsboxFailed, msg: "tools call: " + err.Error()}
	}
	return printToolResult(res)
}

// printToolResult prints a tool's result object; the exit status is 1 when
// the tool failed.
func printToolResult(res json.RawMessage) error {
	var r struct {
		Success bool `json:"success"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return &exitError{code: exitNsboxFailed, msg: "tools call: bad result from the sandbox: " + err.Error()}
	}
	if err := printJSON(res); err != nil {
		return err
	}
	if !r.Success {
		return &exitError{code: 1}
	}
	return nil
}

// modelArgs reads the arguments as a model sends them (tools.ParseModelArgs:
// "" for none, an object, or the object as a JSON string) and drops the
// nulls a strict-mode model sends for optional arguments it does not give.
func modelArgs(name, given string) (json.RawMessage, error) {
	raw, err := tools.ParseModelArgs(given)
	if err != nil {
		return nil, err
	}
	for _, d := range toolRegistry().List() {
		if d.Name == name {
			return tools.StripNulls(d.Parameters, raw)
		}
	}
	return raw, nil
}

func printJSON(raw []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		buf.Reset()
		buf.Write(raw)
	}
	buf.WriteByte('\n')
	_, err := os.Stdout.Write(buf.Bytes())
	return err
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
