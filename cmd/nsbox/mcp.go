package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nsbox/nsbox/pkg/hostapi"
	"github.com/nsbox/nsbox/pkg/mcpserver"
	"github.com/nsbox/nsbox/pkg/policy"
	"github.com/nsbox/nsbox/pkg/policy/backend"
	"github.com/nsbox/nsbox/pkg/sandbox"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
)

// maxMCPSessions bounds --max-sessions: each session is a sandbox, a
// worker process and its stores.
const maxMCPSessions = 1024

type mcpFlags struct {
	policyFlags
	audit       string
	auditMax    int64
	auditMaxStr string
	dataDir     string
	eager       bool
	verbose     bool
	http        string
	tokenFile   string
	idleTimeout time.Duration
	maxSessions int
	tools       []string
	isolation   string
	poolSize    int
	poolSizeSet bool // --pool-size was given
}

func newMCPCmd() *cobra.Command {
	f := &mcpFlags{}
	cmd := &cobra.Command{
		Use:   "mcp [--profile P] [--workspace DIR] [flags]",
		Short: "Serve the sandboxed tools to an MCP client over stdio",
		Long: `Serve the sandboxed tools (read_file, write_file, list_directory, run_command,
search_files, run_script, and the memory and notepad tools) over the Model
Context Protocol on stdin/stdout, for Claude Desktop, Claude Code, Cursor,
VS Code and any other MCP client. See docs/agents.md.

By default one sandbox session serves the whole connection: it starts with the first
tool call (--eager: at once) and ends, with everything in it, when the client
closes stdin (every request read is answered first) or on SIGTERM/SIGINT
(calls in flight are answered with an error). The policy comes from the profile
(default: workspace, which makes --workspace, default the current directory,
writable), the config file and the flags, as for nsbox run. --timeout bounds
each tool call. With --allow-tool-registration the client also gets
register_tool and unregister_tool, which define tools inside the session.
--tools NAME,... serves only the named tools.

--isolation per-call runs every tool call in a fresh sandbox, taken from a
pool of --pool-size started, idle ones and ended after the call: no file in
/tmp, background process or environment change reaches the next call, and a
call costs a few milliseconds more than in a session, not a start. The
workspace is the host's and is shared by every call, as always. Tools cannot be defined at run time with per-call
(--allow-tool-registration is refused). The default, --isolation session,
keeps one sandbox for the connection (with --http, one per MCP session).

With --http ADDR it serves MCP's streamable HTTP transport at
http://ADDR/ instead, for agents on other machines: one sandbox per MCP
session (at most --max-sessions at once), ended by the client's DELETE or
after --idle-timeout without a request. Every request must carry a bearer token (others get 401):
--token-file names a file holding it; without one nsbox makes a token for
the run in a new 0600 file in $XDG_DATA_HOME/nsbox/mcp-http, prints that
file's path on stderr and removes it at exit. An address other than
loopback is refused without --token-file. The token file is hidden inside
the sandboxes (in a Kubernetes Secret's volume, the whole volume), and so
is the --audit file. Each HTTP session has memory and notepad stores of its own,
removed with it.

Logs go to stderr; stdout carries only MCP messages.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := policy.ParseSize(f.auditMaxStr)
			if err != nil || n < 4096 {
				return &exitError{code: exitNsboxFailed, msg: fmt.Sprintf("mcp: --audit-max %q: want a size of at least 4K (e.g. 64M)", f.auditMaxStr)}
			}
			f.auditMax = n
			f.poolSizeSet = cmd.Flags().Changed("pool-size")
			return mcpMain(f)
		},
	}
	fl := cmd.Flags()
	f.register(fl)
	// Shared policy flags whose meaning differs for a server.
	if t := fl.Lookup("timeout"); t != nil {
		t.Usage = "bound each tool call to `DURATION` (e.g. 30s, 2m; default: the policy's tools timeout, else 30s)"
	}
	if r := fl.Lookup("allow-tool-registration"); r != nil {
		r.Usage = "serve register_tool and unregister_tool, and let programs inside define tools"
	}
	fl.StringVar(&f.audit, "audit", "", "append every tool call and hostCall to `FILE` as JSON lines (secrets redacted; a regular file, never a symlink; read-only inside the sandbox; rotated at --audit-max)")
	fl.StringVar(&f.auditMaxStr, "audit-max", "64M", "rotate the audit file at `SIZE` (FILE.1 keeps the previous part)")
	fl.StringVar(&f.dataDir, "data-dir", "", "keep the memory and notepad stores in `DIR` (default: $XDG_DATA_HOME/nsbox)")
	fl.BoolVar(&f.eager, "eager", false, "start the sandbox at once instead of on the first tool call")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "log the session's life (start, worker pid, end) to stderr")
	fl.StringSliceVar(&f.tools, "tools", nil, "serve only the tools `NAME,...` (e.g. read_file,write_file,run_command; see nsbox tools list)")
	fl.StringVar(&f.isolation, "isolation", isolationSession, "`MODE`: session (one sandbox for the connection) or per-call (a fresh sandbox for every tool call, from a pool)")
	fl.IntVar(&f.poolSize, "pool-size", 2, "with --isolation per-call: keep `N` sandboxes started and idle")
	fl.StringVar(&f.http, "http", "", "serve the streamable HTTP transport on `ADDR` (HOST:PORT) instead of stdio")
	fl.StringVar(&f.tokenFile, "token-file", "", "with --http: require the bearer token in `FILE` (mode 0600) on every request (default: a token made for the run; its file's path is printed)")
	fl.IntVar(&f.maxSessions, "max-sessions", mcpserver.DefaultMaxSessions, "with --http: serve at most `N` MCP sessions (each a sandbox) at once; more are refused")
	fl.DurationVar(&f.idleTimeout, "idle-timeout", mcpserver.DefaultIdleTimeout, "with --http: end a session and its sandbox after `DURATION` without a request")
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &exitError{code: exitNsboxFailed, msg: "mcp: " + err.Error()}
	})
	return cmd
}

// registrationSchema is register_tool's input: a run-time tool definition
// (tools.RuntimeDefinition), which the worker validates.
var registrationSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "name": {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,64}$", "description": "The new tool's name."},
    "description": {"type": "string", "description": "What the tool does, for the model."},
    "parameters": {"type": "object", "description": "JSON schema (type object) of the tool's arguments."},
    "implementation": {
      "type": "object",
      "description": "An inline script ({language, script}) or a command ({argv}). It gets the arguments as JSON on stdin; what it prints on stdout is the output (JSON when it is JSON); a non-zero exit is a failure whose error is its stderr.",
      "properties": {
        "language": {"type": "string", "enum": ["python", "node", "bash", "ruby"]},
        "script": {"type": "string"},
        "argv": {"type": "array", "items": {"type": "string"}, "minItems": 1}
      },
      "additionalProperties": false
    },
    "timeout": {"type": "number", "minimum": 0, "description": "Seconds a call may take (default: the session's)."}
  },
  "required": ["name", "description", "implementation"],
  "additionalProperties": false
}`)

func mcpMain(f *mcpFlags) error {
	fail := func(err error) error { return &exitError{code: exitNsboxFailed, msg: "mcp: " + err.Error()} }
	perCall, err := f.perCall()
	if err != nil {
		return fail(err)
	}
	host, err := hostForCLI()
	if err != nil {
		return fail(err)
	}
	// Files nsbox itself writes are no sandbox's to change (they are
	// trusted later): the audit file stays read-only inside even when it
	// lies in the workspace (a sandbox must not swap it for a symlink to
	// ~/.bashrc that the next session appends to), and a --data-dir is
	// hidden and read-only as the default data directory is (the
	// resolver's defaults: $NSBOX_DATA).
	// Each path is expanded once, here, and the entries name exactly
	// the path opened (policy.ExpandPath, LiteralPath).
	var auditPath string
	if f.audit != "" {
		if auditPath, err = host.ExpandPath(f.audit); err != nil {
			return fail(fmt.Errorf("--audit %q: %w", f.audit, err))
		}
		// Hidden as well as protected: it holds every session's tool
		// and hostCall arguments (memories, notes, files written,
		// commands), and over HTTP the sessions are different agents,
		// whose stores are kept apart (review 41).
		for _, p := range []string{auditPath, auditPath + ".1"} {
			f.hideAndProtect(policy.LiteralPath(p))
		}
	}
	dataDir := f.dataDir
	if dataDir == "" {
		if dataDir, err = hostapi.DataDir(os.Getenv); err != nil {
			return fail(err)
		}
	} else {
		if dataDir, err = host.ExpandPath(dataDir); err != nil {
			return fail(fmt.Errorf("--data-dir %q: %w", f.dataDir, err))
		}
		f.hideAndProtect(policy.LiteralPath(dataDir) + "/")
	}
	// Over HTTP every request carries a bearer token: the --token-file's,
	// else one made for this run (loopback is no boundary: every local
	// user and every sandbox with the host's network reaches it). Either
	// file is hidden and read-only inside every sandbox the server starts:
	// a command must not read the credential that drives the server.
	var token *mcpToken
	if f.http != "" {
		if err := mcpserver.CheckListenAddr(f.http, f.tokenFile != ""); err != nil {
			return fail(fmt.Errorf("--http: %w", err))
		}
		if token, err = f.httpToken(); err != nil {
			return fail(err)
		}
		defer token.remove()
		if token.path != "" {
			f.hideAndProtect(policy.LiteralPath(token.path))
		}
		if token.volume != "" {
			f.hideAndProtect(policy.LiteralPath(token.volume) + "/")
		}
		if f.maxSessions < 1 || f.maxSessions > maxMCPSessions {
			return fail(fmt.Errorf("--max-sessions %d: want 1 to %d", f.maxSessions, maxMCPSessions))
		}
	} else if f.tokenFile != "" {
		return fail(errors.New("--token-file applies to --http only"))
	} else if f.maxSessions != mcpserver.DefaultMaxSessions {
		return fail(errors.New("--max-sessions applies to --http only"))
	}
	res, err := f.resolve(host)
	if err != nil {
		return fail(err)
	}
	if f.dryRun {
		printWarnings(msgs, res, true)
		if err := printDryRun(os.Stdout, res); err != nil {
			return fail(err)
		}
		return nil
	}
	// Tools run in the sandbox's worker: without a sandbox there is nothing
	// to serve them.
	choice, err := backend.Choose(res.Backend, false, false)
	if err != nil {
		return fail(err)
	}
	if !choice.Backend.Isolates() {
		return fail(errors.New("the tools run inside the sandbox, so backend " + choice.Backend.Name() + " cannot serve them; use --backend native or auto"))
	}
	if perCall && res.Policy.AllowToolRegistration {
		return fail(errors.New("--isolation per-call cannot serve register_tool: a tool defined in one call's sandbox would be gone by the next call; drop --allow-tool-registration (or the profile's allow_tool_registration) or use --isolation session"))
	}
	printWarnings(msgs, res, false)

	level := slog.LevelWarn
	if f.verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("component", "nsbox mcp")

	var audit io.Writer
	if auditPath != "" {
		// Its directory is looked up refusing a symlink a sandbox of
		// this policy could have planted on the way (policy.OpenHostDir).
		dir, name := filepath.Split(auditPath)
		dfd, real, err := policy.OpenHostDir(filepath.Clean(dir), func() ([]string, error) { return res.Roots(), nil })
		if err != nil {
			return fail(fmt.Errorf("--audit %s: %v", auditPath, err))
		}
		af, err := mcpserver.OpenAuditAt(dfd, filepath.Join(real, name), name, f.auditMax)
		unix.Close(dfd)
		if err != nil {
			return fail(fmt.Errorf("--audit: %v", err))
		}
		defer af.Close()
		audit = af
	}
	handlers, closeStores, err := hostapi.DefaultHandlers(dataDir)
	if err != nil {
		return fail(err)
	}
	defer closeStores()

	reg := toolRegistry()
	if err := reg.Err(); err != nil {
		return fail(err)
	}
	if _, err := chooseTools(reg.List(), f.tools); err != nil {
		return fail(fmt.Errorf("--tools: %v", err))
	}
	var only []string
	for _, n := range f.tools {
		only = append(only, strings.TrimSpace(n))
	}
	// Over HTTP the sessions' stores live in a run directory of this
	// server's (httpstores.go), which a later server removes if this one
	// is killed.
	var httpRun string
	var httpRunErr error
	if f.http != "" {
		var releaseRun func()
		if httpRun, releaseRun, httpRunErr = openHTTPStores(dataDir); httpRunErr == nil {
			defer releaseRun()
		} else {
			logger.Error("no memory and notepad stores for HTTP sessions", "dir", filepath.Join(dataDir, httpStoresDir), "error", httpRunErr)
		}
	}
	// The configuration of one MCP session's server: over stdio the only
	// one, over HTTP one per MCP session id, each with its own sandbox.
	sessionConfig := func() mcpserver.Config {
		id := sessionID()
		sessHandlers, closed := handlers, func() {}
		if f.http != "" {
			// Over HTTP each MCP session has memory and notepad stores of
			// its own, removed with it: the sessions are different agents,
			// and a command of one (every command may call memory.* and
			// notepad.*) must not plant memories in another's nor read
			// them.
			sessHandlers, closed = sandbox.NewHandlers(), func() {}
			if httpRunErr == nil {
				dir := filepath.Join(httpRun, id)
				h, closeSess, err := hostapi.DefaultHandlers(dir)
				if err != nil {
					// Without stores of its own the session gets none: its
					// memory and notepad calls fail, and say why.
					logger.Error("no memory and notepad stores for an HTTP session", "session", id, "error", err)
				} else {
					sessHandlers = h
					closed = func() {
						closeSess()
						if err := os.RemoveAll(dir); err != nil {
							logger.Warn("cannot remove an HTTP session's stores", "dir", dir, "error", err)
						}
					}
				}
			}
		}
		opts := []sandbox.Option{sandbox.WithHandlers(sessHandlers), sandbox.WithID(id)}
		if audit != nil {
			opts = append(opts, sandbox.WithAudit(audit))
		}
		return mcpserver.Config{
			Start: func(ctx context.Context) (mcpserver.Session, error) {
				if perCall {
					return startMCPPool(ctx, f, host, opts, reg.Definitions(), logger.With("session", id))
				}
				return startMCPSession(ctx, f, host, opts, logger.With("session", id))
			},
			Definitions:        reg.Definitions(),
			Tools:              only,
			Eager:              f.eager,
			AllowRegistration:  res.Policy.AllowToolRegistration,
			RegistrationSchema: registrationSchema,
			Timeout:            res.Policy.Limits.Time,
			Name:               "nsbox",
			Version:            "dev",
			Instructions:       mcpInstructions(res, perCall),
			Audit:              audit,
			AuditID:            id,
			Logger:             logger,
			Closed:             closed,
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	// A client that goes away while we write: EPIPE for the writer instead
	// of death by SIGPIPE, so that the session is still closed. (Notify, not
	// Ignore: an ignored SIGPIPE would be inherited by the sandbox.)
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)

	if f.http != "" {
		return mcpHTTP(ctx, f, token, sessionConfig, logger)
	}
	srv, err := mcpserver.New(sessionConfig())
	if err != nil {
		return fail(err)
	}
	logger.Info("serving MCP on stdio", "profile", res.Profile, "workspace", res.Workspace)
	if err := srv.Serve(ctx, os.Stdin, os.Stdout); err != nil {
		return fail(err)
	}
	logger.Info("connection closed; sandbox gone")
	return nil
}

// mcpHTTP serves the streamable HTTP transport until a signal.
func mcpHTTP(ctx context.Context, f *mcpFlags, token *mcpToken, sessionConfig func() mcpserver.Config, logger *slog.Logger) error {
	fail := func(err error) error { return &exitError{code: exitNsboxFailed, msg: "mcp: " + err.Error()} }
	hs, err := mcpserver.NewHTTP(mcpserver.HTTPConfig{Session: sessionConfig, Token: token.token, IdleTimeout: f.idleTimeout, MaxSessions: f.maxSessions, Logger: logger})
	if err != nil {
		return fail(err)
	}
	ln, err := net.Listen("tcp", f.http)
	if err != nil {
		return fail(fmt.Errorf("--http: %v", err))
	}
	if token.made {
		// The path, never the token: stderr may end up in a log.
		fmt.Fprintf(msgs, "nsbox mcp: bearer token for this run in %s (clients send Authorization: Bearer TOKEN; the file is removed at exit)\n", token.path)
	}
	// The address actually bound (a port 0 is chosen by the kernel), for
	// scripts and tests to read.
	fmt.Fprintf(msgs, "nsbox mcp: serving MCP over HTTP at http://%s/\n", ln.Addr())
	if err := hs.Serve(ctx, ln); err != nil {
		return fail(err)
	}
	return nil
}

// mcpToken is the bearer token of nsbox mcp --http.
type mcpToken struct {
	token string
	path  string // the file's real path ("" on a dry run that made none)
	// volume is the directory of a --token-file in a volume the kubelet
	// writes atomically (atomicVolume), hidden whole.
	volume string
	made   bool // nsbox made it for this run
	file   *mcpserver.TokenFile
}

func (t *mcpToken) remove() {
	if err := t.file.Remove(); err != nil {
		fmt.Fprintf(msgs, "nsbox mcp: warning: %v\n", err)
	}
}

// httpToken reads --token-file, or makes a token for this run in
// $XDG_DATA_HOME/nsbox/mcp-http (0700; the data directory is hidden in
// every sandbox). A dry run makes none.
func (f *mcpFlags) httpToken() (*mcpToken, error) {
	if f.tokenFile != "" {
		tok, real, err := readTokenFile(f.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		return &mcpToken{token: tok, path: real, volume: atomicVolume(f.tokenFile)}, nil
	}
	if f.dryRun {
		return &mcpToken{}, nil
	}
	data, err := hostapi.DataDir(os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("--http without --token-file makes a token in nsbox's data directory: %w (or give --token-file)", err)
	}
	tf, err := mcpserver.NewTokenFile(filepath.Join(data, "mcp-http"))
	if err != nil {
		return nil, fmt.Errorf("--http: %w (or give --token-file)", err)
	}
	return &mcpToken{token: tf.Token, path: tf.Path, made: true, file: tf}, nil
}

// readTokenFile reads a bearer token: the file's content without the
// surrounding white space, and the real path of the file read (to hide
// that very file inside the sandboxes, whatever links led to it). The file
// is a credential, so one that others can read is refused (as ssh refuses
// such a key).
func readTokenFile(path string) (token, real string, err error) {
	// O_NONBLOCK: a FIFO a sandbox put in the file's place (it lay in a
	// writable directory of an earlier run) is opened at once and then
	// refused as no regular file, instead of holding the start for good
	// (review 71). Regular files ignore the flag.
	fd, err := os.OpenFile(path, os.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NOCTTY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", "", err
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return "", "", err
	}
	if !st.Mode().IsRegular() {
		return "", "", fmt.Errorf("%s is not a regular file", path)
	}
	// Others may not read it; its group only when that is the server's
	// own group: a Kubernetes Secret reaches a non-root container only
	// as group-readable by the pod's fsGroup (defaultMode 0440).
	if perm := st.Mode().Perm(); perm&0o007 != 0 || perm&0o070 != 0 && st.Sys().(*syscall.Stat_t).Gid != uint32(os.Getegid()) {
		return "", "", fmt.Errorf("%s can be read by other users (mode %04o): chmod 600 it", path, perm)
	}
	if real, err = os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd.Fd())); err != nil || !filepath.IsAbs(real) {
		return "", "", fmt.Errorf("%s: cannot tell its real path to hide it inside the sandboxes: %v", path, err)
	}
	b, err := io.ReadAll(io.LimitReader(fd, 4096))
	if err != nil {
		return "", "", err
	}
	token = strings.TrimSpace(string(b))
	if len(token) < 16 {
		return "", "", fmt.Errorf("%s holds a token of %d characters; use at least 16 (e.g. openssl rand -hex 32)", path, len(token))
	}
	if strings.ContainsAny(token, " \t\r\n") {
		return "", "", fmt.Errorf("%s holds more than one word; a token is one", path)
	}
	if strings.Contains(strings.ToUpper(token), "REPLACE") {
		// contrib/kubernetes/secret.yaml's placeholder, or one like it:
		// a value published with the manifests (review 41).
		return "", "", fmt.Errorf("%s holds a placeholder, not a token; make one with openssl rand -hex 32", path)
	}
	return token, real, nil
}

// atomicVolume returns the root of the volume path lies in when the
// kubelet writes it atomically (a Secret, ConfigMap or projected volume: a
// ..data link at its root that it swaps to a new directory on every
// update), else "". The token file's real path names the old directory
// only: after a rotation the new token was readable inside every sandbox
// (review 41), so the whole volume is hidden. The link is looked for in
// each directory above the file as well: an item at a nested path
// (items: [{key: token, path: auth/token}]) is reached through auth, a
// link to ..data/auth (review 43).
func atomicVolume(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return ""
	}
	for dir := filepath.Dir(abs); ; dir = filepath.Dir(dir) {
		if st, err := os.Lstat(filepath.Join(dir, "..data")); err == nil && st.Mode()&os.ModeSymlink != 0 {
			return dir
		}
		if dir == "/" || dir == "." {
			return ""
		}
	}
}

const (
	isolationSession = "session"
	isolationPerCall = "per-call"
)

// perCall checks --isolation and --pool-size.
func (f *mcpFlags) perCall() (bool, error) {
	switch f.isolation {
	case isolationSession:
		if f.poolSizeSet {
			return false, errors.New("--pool-size applies to --isolation per-call only (a session has one sandbox)")
		}
		return false, nil
	case isolationPerCall:
		if f.poolSize < 1 || f.poolSize > sandbox.MaxPoolSize {
			return false, fmt.Errorf("--pool-size %d: want 1 to %d", f.poolSize, sandbox.MaxPoolSize)
		}
		return true, nil
	}
	return false, fmt.Errorf("--isolation %q: want %s or %s", f.isolation, isolationSession, isolationPerCall)
}

// startMCPSession starts the sandbox of the connection. As for nsbox run, the
// writable roots are held while the sandbox lives and the policy is resolved
// again under that hold (policy.Hold); the hold is released when the
// session closes.
func startMCPSession(ctx context.Context, f *mcpFlags, host policy.Host, opts []sandbox.Option, logger *slog.Logger) (mcpserver.Session, error) {
	pv, err := f.peek(host)
	if err != nil {
		return nil, err
	}
	s, err := startToolSession(ctx, pv, opts)
	if err != nil {
		return nil, err
	}
	logger.Info("sandbox session started", "worker_pid", s.Pid())
	return s, nil
}

// startToolSession starts a sandbox for the built-in tools (nsbox mcp,
// nsbox tools call) from a policy preview: the writable roots are held and
// the policy resolved in full under the hold, then the memory and notepad
// host APIs are added. The hold is released when the session closes.
func startToolSession(ctx context.Context, pv *policy.Preview, opts []sandbox.Option) (*heldSession, error) {
	// Without the lock another run could remove a placeholder this
	// sandbox relies on: no hold, no sandbox. A retry resolves the same
	// preview again: its layers and writable roots as Peek read them, the
	// host's tree (hides, protections, pins) walked anew.
	removeLeftPlaceholders()
	finishPendingAudits()
	peek := func(policy.Host) (*policy.Preview, error) { return pv, nil }
	var (
		res  *policy.Result
		hold *policy.Hold
		s    *sandbox.Session
		err  error
	)
	for try := 0; try < maxBuildTries; try++ {
		if try > 0 {
			// The host's files changed under the policy while the
			// sandbox was built: resolve again, build anew.
			releaseUnrecorded(hold, res)
		}
		if res, hold, err = resolveHeld(peek, policy.Host{}); err != nil {
			return nil, err
		}
		p := res.Policy
		// The memory and notepad tools reach their stores through hostCall.
		p.HostAPIs = mergeStrings(p.HostAPIs, hostapi.Methods())
		s, err = startForTools(ctx, pv.Backend, p, opts)
		if !planChanged(err) || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		releaseUnrecorded(hold, res)
		if reason := backend.Unavailable(backend.Native{}, err); reason != nil {
			return nil, unavailableError(reason)
		}
		return nil, err
	}
	if err := s.WorkspaceErr(); err != nil {
		// Every tool call would fail on it: say so once, at the start.
		s.Close()
		releaseUnrecorded(hold, res)
		return nil, fmt.Errorf("%v; profile %s does not bind it, and /tmp and /run inside are the sandbox's own: work in a directory outside them, or with a profile that binds the workspace", err, res.Profile)
	}
	// Records wait for the next nsbox in case this one is killed: the
	// placeholders until the hold has released them (leftovers.go), the
	// git audit until it has run (audit.go).
	placeholdersDone := recordPlaceholders(res, hold)
	return &heldSession{Session: s, res: res, hold: hold, placeholdersDone: placeholdersDone, release: func() { hold.Release(res.Placeholders); placeholdersDone() }, auditRecorded: recordAudit(res.GitAudit)}, nil
}

// heldSession releases the policy hold once the sandbox is gone, then runs
// the git audit.
type heldSession struct {
	*sandbox.Session
	res     *policy.Result // the policy it was started with
	once    sync.Once
	release func()
	// hold and placeholdersDone are what release uses, for a pool
	// that takes the hold over (startMCPPool).
	hold             *policy.Hold
	placeholdersDone func()
	// auditRecorded removes the record of the git audit (audit.go).
	auditRecorded func()
}

func (h *heldSession) Close() error {
	err, _ := h.closeTo(msgs)
	return err
}

// closeTo is Close saying what the git audit did on w, and returning the
// audit's error when it could not search the whole workspace
// (policy.ErrGitAuditIncomplete; nil after the first Close).
func (h *heldSession) closeTo(w io.Writer) (err, incomplete error) {
	err = h.Session.Close()
	h.once.Do(func() {
		h.release()
		if _, aerr := auditGitTo(w, h.res); errors.Is(aerr, policy.ErrGitAuditIncomplete) {
			fmt.Fprintf(w, "nsbox: error: %v\n", aerr)
			incomplete = aerr
		}
		if h.auditRecorded != nil {
			h.auditRecorded()
		}
	})
	return err, incomplete
}

func mergeStrings(a, b []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range append(append([]string(nil), a...), b...) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func sessionID() string {
	b := make([]byte, 6)
	rand.Read(b)
	return "mcp-" + hex.EncodeToString(b)
}

// mcpInstructions tell the model where it is.
func mcpInstructions(res *policy.Result, perCall bool) string {
	var b strings.Builder
	b.WriteString("These tools run inside an nsbox sandbox on the user's machine. ")
	if res.Workspace != "" {
		fmt.Fprintf(&b, "The workspace is %s: file tool paths are relative to it, and paths outside it are refused. ", res.Workspace)
	}
	b.WriteString("The rest of the host is read-only, credentials read as empty, ")
	switch {
	case res.Policy.Network == sandbox.NetworkHost:
		b.WriteString("the network is available, ")
	case res.Policy.Network == sandbox.NetworkFiltered && res.Policy.NetFilter != nil && len(res.Policy.NetFilter.Allow) > 0:
		// The model learns what it may reach, so a refusal is no surprise.
		fmt.Fprintf(&b, "the network reaches only these hosts (names, no IP addresses; others fail to resolve or connect): %s, ", strings.Join(res.Policy.NetFilter.Allow, ", "))
	default:
		b.WriteString("there is no network, ")
	}
	if perCall {
		// The model must not build on state that per-call isolation
		// throws away.
		b.WriteString("and every tool call runs in a fresh sandbox: files in /tmp, background processes and environment changes do not survive from one call to the next (the workspace does). ")
	} else {
		b.WriteString("and /tmp is private to this session. ")
	}
	b.WriteString("A failed call says why (isError with a message); a refused operation is not a reason to retry the same call.")
	return b.String()
}
