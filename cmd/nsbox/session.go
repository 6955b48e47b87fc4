package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/nsbox/nsbox/pkg/hostapi"
	"github.com/nsbox/nsbox/pkg/sandbox"
	"github.com/nsbox/nsbox/pkg/sessiond"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
)

// Named tool sessions for the CLI loop: `nsbox session start NAME` (or the
// first `nsbox tools call --session NAME`) starts a daemon that holds one
// sandbox and serves tool calls on a unix socket in the user's private
// runtime directory (pkg/sessiond), so /tmp, background processes and
// installed packages persist between calls. The daemon ends on
// `nsbox session stop`, after its idle timeout, when its owner process
// ends, or when its sandbox dies; a record from an earlier boot is
// ignored and removed.

// defaultIdle ends a session nobody called for this long.
const defaultIdle = 30 * time.Minute

// startReadyTimeout bounds the wait for a new daemon's sandbox.
const startReadyTimeout = 3 * time.Minute

// readyFDEnv names the fd on which session serve reports its start ("ok",
// or why it failed) to session start.
const readyFDEnv = "NSBOX_SESSION_READY_FD"

type sessionFlags struct {
	toolsCallFlags
	idle  time.Duration
	owner int
}

func (f *sessionFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.workspace, "workspace", "", "workspace `DIR` the tools are confined to (default: the current directory)")
	fl.StringVar(&f.profile, "profile", "", "policy profile: a `NAME` (nsbox profiles list) or a FILE (default: the config's, else workspace)")
	fl.IntVar(&f.maxOutput, "max-output", 0, "output budget of each call in `CHARACTERS` (default: the config's tools.max_output, else 30000)")
	fl.StringArrayVar(&f.shallow, "shallow", nil, "search the writable `DIR` at its top level only: nested repositories, .env files and agent configs below it are neither protected nor audited (for a tree too big to walk; repeatable)")
	fl.DurationVar(&f.idle, "idle", defaultIdle, "end the session after `DURATION` without a call")
	fl.IntVar(&f.owner, "owner", -1, "end the session when process `PID` ends (default: the process that ran this nsbox; 0: none)")
}

// args are the flags handed to the daemon (session serve).
func (f *sessionFlags) args(owner int) []string {
	a := []string{"--idle", f.idle.String(), "--owner", strconv.Itoa(owner)}
	if f.workspace != "" {
		a = append(a, "--workspace", f.workspace)
	}
	if f.profile != "" {
		a = append(a, "--profile", f.profile)
	}
	if f.maxOutput != 0 {
		a = append(a, "--max-output", strconv.Itoa(f.maxOutput))
	}
	for _, d := range f.shallow {
		a = append(a, "--shallow", d)
	}
	return a
}

func newSessionCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "session",
		Short: "Keep a tool sandbox alive between nsbox tools call invocations",
		Long: `A session is one sandbox kept alive between calls, as an MCP client gets:
/tmp, background processes and installed packages persist. Use it with
nsbox tools call --session NAME (which starts the session when it is not
running). A session ends on nsbox session stop, after --idle without a call
(default 30m), when its owner process ends (default: the process that
started it), or when its sandbox dies; it never outlives a reboot.

Sessions are per user: their sockets live in a private 0700 directory
($XDG_RUNTIME_DIR/nsbox-sessions when it is /run/user/UID, else
/tmp/nsbox-sessions-UID; never $TMPDIR), hidden in every sandbox, and
accept connections of the same uid, outside the sandboxes, only.`,
	}
	cmd.AddCommand(newSessionStartCmd(), newSessionStopCmd(), newSessionListCmd(), newSessionServeCmd())
	return cmd
}

func newSessionStartCmd() *cobra.Command {
	f := &sessionFlags{}
	cmd := &cobra.Command{
		Use:   "start NAME",
		Short: "Start a named tool session in the background",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := sessionDir()
			if err != nil {
				return err
			}
			owner := f.owner
			if owner < 0 {
				owner = os.Getppid()
			}
			if err := startSession(d, args[0], f, owner); err != nil {
				return err
			}
			fmt.Println(args[0])
			return nil
		},
	}
	f.register(cmd)
	return cmd
}

func newSessionStopCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "stop NAME",
		Short: "Stop a named tool session: its sandbox and every process in it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := sessionDir()
			if err != nil {
				return err
			}
			resp, err := d.Call(args[0], sessiond.Request{Op: "stop"})
			if err != nil {
				return &exitError{code: 1, msg: "session stop: " + err.Error()}
			}
			for _, l := range resp.Report {
				fmt.Fprintln(msgs, l)
			}
			if resp.Error != "" {
				return &exitError{code: exitNsboxFailed, msg: "session stop: " + resp.Error}
			}
			return nil
		},
	}
}

func newSessionListCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the running tool sessions",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			sayEndedSessions() // sessions that ended unattended, and what their audits said
			d, err := sessionDir()
			if err != nil {
				return err
			}
			list, err := d.List()
			if err != nil {
				return &exitError{code: exitNsboxFailed, msg: "session list: " + err.Error()}
			}
			if asJSON {
				if list == nil {
					list = []sessiond.Info{}
				}
				b, _ := json.Marshal(list)
				return printJSON(b)
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tPID\tOWNER\tIDLE TIMEOUT\tSTARTED\tWORKSPACE")
			for _, in := range list {
				fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\n", in.Name, in.PID, in.Owner, in.Idle, in.Started.Local().Format(time.DateTime), in.Workspace)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the sessions as JSON")
	return cmd
}

func sessionDir() (*sessiond.Dir, error) {
	d, err := sessiond.RuntimeDir(os.Getenv)
	if err != nil {
		return nil, &exitError{code: exitNsboxFailed, msg: "session: " + err.Error()}
	}
	return d, nil
}

// startSession starts the daemon of session name and waits until its
// sandbox is up (or failed). ErrExists: another start won the race.
func startSession(d *sessiond.Dir, name string, f *sessionFlags, owner int) error {
	if !sessiond.ValidName(name) {
		return &exitError{code: 2, msg: fmt.Sprintf("session: invalid name %q (1 to 64 of a-z A-Z 0-9 _ . -, not starting with a dot)", name)}
	}
	if _, err := d.Lookup(name); err == nil {
		return &exitError{code: 1, msg: fmt.Sprintf("session start: %v", fmt.Errorf("%w: %q", sessiond.ErrExists, name))}
	}
	self, err := os.Executable()
	if err != nil {
		return &exitError{code: exitNsboxFailed, msg: "session start: " + err.Error()}
	}
	r, w, err := os.Pipe()
	if err != nil {
		return &exitError{code: exitNsboxFailed, msg: "session start: " + err.Error()}
	}
	defer r.Close()
	logf, err := os.OpenFile(d.Log(name), os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		w.Close()
		return &exitError{code: exitNsboxFailed, msg: "session start: log: " + err.Error()}
	}
	defer logf.Close()
	cmd := exec.Command(self, append([]string{"session", "serve", name}, f.args(owner)...)...)
	cmd.ExtraFiles = []*os.File{w} // fd 3: the ready pipe
	cmd.Env = append(os.Environ(), readyFDEnv+"=3")
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own session: no terminal's SIGHUP or ^C reaches the daemon.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return &exitError{code: exitNsboxFailed, msg: "session start: " + err.Error()}
	}
	w.Close()
	done := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(r, 64<<10))
		done <- strings.TrimSpace(string(b))
	}()
	var msg string
	select {
	case msg = <-done:
	case <-time.After(startReadyTimeout):
		cmd.Process.Kill()
		msg = "the session's sandbox did not start within " + startReadyTimeout.String()
	}
	if msg == "ok" {
		cmd.Process.Release()
		return nil
	}
	cmd.Wait()
	if msg == "" {
		msg = "the session's daemon exited during start; see " + d.Log(name)
	} else {
		// The reason came through the pipe: the log has nothing more.
		os.Remove(d.Log(name))
	}
	if strings.HasPrefix(msg, "exists") {
		return fmt.Errorf("%w: %q", sessiond.ErrExists, name)
	}
	return &exitError{code: exitNsboxFailed, msg: "session start: " + msg}
}

func newSessionServeCmd() *cobra.Command {
	f := &sessionFlags{}
	cmd := &cobra.Command{
		Use:    "serve NAME",
		Short:  "Run a session's daemon (started by nsbox session start)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// The ready pipe only when session start made one: fd 3
			// of a hand-run serve may be anything.
			var ready *os.File
			if os.Getenv(readyFDEnv) == "3" {
				ready = os.NewFile(3, "ready")
				os.Unsetenv(readyFDEnv)
			}
			err := serveSession(args[0], f, ready)
			if err != nil && ready != nil {
				ready.WriteString(err.Error())
				ready.Close()
			}
			return err
		},
	}
	f.register(cmd)
	return cmd
}

// daemon is one session's server.
type daemon struct {
	d        *sessiond.Dir
	name     string
	s        *heldSession
	l        *sessiond.Listener
	idle     time.Duration
	mu       sync.Mutex
	inflight int
	last     time.Time
	stopOnce sync.Once
	stopped  chan struct{}
}

func serveSession(name string, f *sessionFlags, ready *os.File) error {
	d, err := sessiond.RuntimeDir(os.Getenv)
	if err != nil {
		return err
	}
	if !sessiond.ValidName(name) {
		return fmt.Errorf("invalid session name %q", name)
	}
	lock, err := d.Lock(name)
	if errors.Is(err, sessiond.ErrExists) {
		return errors.New("exists: " + err.Error())
	}
	if err != nil {
		return err
	}
	defer d.Unlock(name, lock)
	// Signals end the session cleanly (its sandbox killed, its files
	// removed); SIGHUP is moot in a session of our own.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	signal.Ignore(syscall.SIGHUP)

	pv, err := toolsPreview(&f.toolsCallFlags)
	if err != nil {
		return err
	}
	opts, closeStores, err := hostAPIOptions(&sandbox.Policy{HostAPIs: hostapi.Methods()})
	if err != nil {
		return fmt.Errorf("host APIs: %w", err)
	}
	defer closeStores()
	s, err := startToolSession(context.Background(), pv, opts)
	if err != nil {
		return err
	}
	printWarnings(msgs, s.res, false)
	l, err := d.Listen(name)
	if err != nil {
		s.Close()
		return err
	}
	dm := &daemon{d: d, name: name, s: s, l: l, idle: f.idle, last: time.Now(), stopped: make(chan struct{})}
	info := sessiond.Info{Name: name, PID: os.Getpid(), Owner: f.owner, Workspace: s.res.Workspace, Profile: s.res.Profile,
		Started: time.Now().UTC(), Idle: f.idle.String(), BootID: sessiond.BootID()}
	if err := d.WriteInfo(info); err != nil {
		dm.stop("cannot record the session")
		return err
	}
	if ready != nil {
		ready.WriteString("ok")
		ready.Close()
	}
	fmt.Fprintf(msgs, "nsbox: session %s serving (pid %d)\n", name, os.Getpid())
	go func() {
		select {
		case sig := <-sigs:
			dm.stop("signal " + sig.String())
		case <-dm.stopped:
		}
	}()
	if f.owner > 0 {
		go dm.watchOwner(f.owner)
	}
	if f.idle > 0 {
		go dm.watchIdle()
	}
	dm.acceptLoop(info)
	<-dm.stopped
	return nil
}

// stop ends the session once: no new connection, the sandbox killed
// (every process in it), the socket and record removed.
func (dm *daemon) stop(why string) { dm.stopThen(why, nil) }

// endReport is what a session's end said: the audit's lines, and its
// error when it could not search the whole workspace.
type endReport struct {
	lines      []string
	incomplete error
}

// stopThen is stop, calling then (if not nil) once the session has ended
// and before the daemon may exit: the answer to `nsbox session stop` is
// written there, since the daemon's main goroutine returns as soon as the
// session is stopped (answering after that raced with the exit: the client
// read EOF, "the session's daemon may have died").
//
// The audit of git repositories and agent files runs in s.Close; what it
// says goes to the daemon's log and to then, for `nsbox session stop` to
// print: the log is removed with the session, and a warning said there
// only was never seen (review 44).
func (dm *daemon) stopThen(why string, then func(endReport)) {
	dm.stopOnce.Do(func() {
		fmt.Fprintf(msgs, "nsbox: session %s ends: %s\n", dm.name, why)
		dm.l.Close()
		var said bytes.Buffer
		_, incomplete := dm.s.closeTo(io.MultiWriter(msgs, &said))
		rep := endReport{incomplete: incomplete}
		for _, l := range strings.Split(strings.TrimSpace(said.String()), "\n") {
			if l != "" {
				rep.lines = append(rep.lines, l)
			}
		}
		if then == nil && len(rep.lines) > 0 {
			// No caller to tell (idle, owner gone, a signal): the
			// next nsbox the user runs says it (sessionNotices).
			noteSessionEnd(dm.name, why, rep.lines)
		}
		dm.d.Remove(dm.name)
		if then != nil {
			then(rep)
		}
		close(dm.stopped)
	})
}

// watchOwner ends the session when the owner process ends: a pidfd
// (pidfd_open(2)) becomes readable when its process exits, and is not
// fooled by a reused pid. Without pidfds (before Linux 5.3) the pid is
// polled.
func (dm *daemon) watchOwner(pid int) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err == nil {
		defer unix.Close(fd)
		for {
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			n, err := unix.Poll(fds, -1)
			if err == unix.EINTR {
				continue
			}
			if n > 0 || err != nil {
				break
			}
		}
		dm.stop(fmt.Sprintf("its owner, process %d, ended", pid))
		return
	}
	if errors.Is(err, unix.ESRCH) {
		dm.stop(fmt.Sprintf("its owner, process %d, is gone", pid))
		return
	}
	for {
		select {
		case <-dm.stopped:
			return
		case <-time.After(2 * time.Second):
		}
		if unix.Kill(pid, 0) == unix.ESRCH {
			dm.stop(fmt.Sprintf("its owner, process %d, ended", pid))
			return
		}
	}
}

// watchIdle ends the session after idle without a call; a call in flight
// is not idleness.
func (dm *daemon) watchIdle() {
	t := time.NewTicker(min(dm.idle/4+time.Millisecond, 10*time.Second))
	defer t.Stop()
	for {
		select {
		case <-dm.stopped:
			return
		case <-t.C:
		}
		dm.mu.Lock()
		idle := dm.inflight == 0 && time.Since(dm.last) >= dm.idle
		dm.mu.Unlock()
		if idle {
			dm.stop("idle for " + dm.idle.String())
			return
		}
	}
}

func (dm *daemon) acceptLoop(info sessiond.Info) {
	for {
		c, err := dm.l.Accept()
		if err != nil {
			select {
			case <-dm.stopped:
			default:
				dm.stop("accept: " + err.Error())
			}
			return
		}
		go dm.serveConn(c, info)
	}
}

func (dm *daemon) serveConn(c net.Conn, info sessiond.Info) {
	defer c.Close()
	req, err := sessiond.ReadRequest(c)
	if err != nil {
		// A liveness probe connects and closes: not an error.
		return
	}
	switch req.Op {
	case "ping":
		sessiond.WriteMessage(c, sessiond.Response{Info: &info})
	case "stop":
		dm.stopThen("stopped by nsbox session stop", func(rep endReport) {
			resp := sessiond.Response{Report: rep.lines}
			if rep.incomplete != nil {
				resp.Error = "the audit at the session's end could not search the whole workspace (see above)"
			}
			sessiond.WriteMessage(c, resp)
		})
	case "call":
		dm.mu.Lock()
		dm.inflight++
		dm.mu.Unlock()
		defer func() {
			dm.mu.Lock()
			dm.inflight--
			dm.last = time.Now()
			dm.mu.Unlock()
		}()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		// The client going away (^C on nsbox tools call) cancels the
		// call, not the session.
		go func() {
			var b [1]byte
			c.Read(b[:])
			cancel()
		}()
		res, err := dm.s.CallTool(ctx, req.Tool, req.Args, time.Duration(req.TimeoutMs)*time.Millisecond)
		var rl *sandbox.ResourceLimitError
		if errors.As(err, &rl) && len(res) > 0 {
			err = nil
		}
		if err != nil {
			sessiond.WriteMessage(c, sessiond.Response{Error: err.Error()})
			if errors.Is(err, sandbox.ErrClosed) {
				dm.stop("its sandbox ended")
			}
			return
		}
		sessiond.WriteMessage(c, sessiond.Response{Result: res})
	default:
		sessiond.WriteMessage(c, sessiond.Response{Error: fmt.Sprintf("unknown op %q", req.Op)})
	}
}

// toolsCallSession is nsbox tools call --session NAME: the call goes to the
// session's daemon, started first when it is not running (owned by the
// process that ran nsbox).
func toolsCallSession(f *toolsCallFlags, session, name, raw string) error {
	d, err := sessionDir()
	if err != nil {
		return err
	}
	if _, err := d.Lookup(session); errors.Is(err, sessiond.ErrNoSession) {
		sf := &sessionFlags{toolsCallFlags: *f, idle: defaultIdle}
		err := startSession(d, session, sf, os.Getppid())
		switch {
		case err == nil:
			fmt.Fprintf(msgs, "nsbox: started session %s (it ends on nsbox session stop %s, after %s without a call, or when process %d ends)\n", session, session, defaultIdle, os.Getppid())
		case errors.Is(err, sessiond.ErrExists):
			// Another call is starting it: wait for that one.
			for deadline := time.Now().Add(startReadyTimeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
				if _, err := d.Lookup(session); err == nil {
					break
				}
			}
		default:
			return err
		}
	} else if err != nil {
		return &exitError{code: 2, msg: "tools call: --session: " + err.Error()}
	} else if f.workspace != "" || f.profile != "" || f.maxOutput != 0 || len(f.shallow) > 0 {
		fmt.Fprintf(msgs, "nsbox: session %s is running: its --workspace, --profile, --max-output and --shallow were fixed when it started; these are ignored\n", session)
	}
	resp, err := d.Call(session, sessiond.Request{Op: "call", Tool: name, Args: json.RawMessage(raw), TimeoutMs: f.timeout.Milliseconds()})
	if err != nil {
		return &exitError{code: exitNsboxFailed, msg: "tools call: " + err.Error()}
	}
	if resp.Error != "" {
		return &exitError{code: exitNsboxFailed, msg: "tools call: session " + session + ": " + resp.Error}
	}
	return printToolResult(resp.Result)
}
