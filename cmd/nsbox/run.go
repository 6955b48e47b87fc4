package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/nsbox/nsbox/pkg/policy"
	"github.com/nsbox/nsbox/pkg/policy/backend"
	"github.com/nsbox/nsbox/pkg/sandbox"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
)

type runFlags struct {
	policyFlags
	jsonStatus string
}

func newRunCmd() *cobra.Command {
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:   "run [flags] -- CMD [ARGS...]",
		Short: "Run a command in a new sandbox",
		Long: `Run CMD in a new sandbox and exit with its exit code.

The policy comes from a profile (--profile; default: workspace), the config
file ($XDG_CONFIG_HOME/nsbox/config.toml) and the flags below, flags first.
Under the default workspace profile the current directory is writable and the
rest of the host read-only; credentials (~/.ssh, ~/.aws, .env files...) read
as empty; .git and shell startup files stay read-only.
/tmp, /run and /dev are private, the network holds only lo (unless --net host,
or --allow-host NAME for a filtered network that reaches only allowed names),
and the environment is cleared to PATH, HOME, TERM and LANG. --dry-run prints
the resolved policy and mount plan. See docs/profiles.md.

Exit status: the command's own code; 128+N when it died of signal N; 124 on
--timeout; 125 when nsbox itself failed (a bad flag or profile, sandboxing
unavailable); 126 when the command cannot be executed; 127 when it was not
found; 137 when the memory limit was reached. SIGINT, SIGTERM or SIGHUP to
nsbox kill the whole sandbox, and nsbox then dies of that signal (130 for
Ctrl-C).`,
		Args: func(cmd *cobra.Command, args []string) error {
			if f.dryRun && len(args) == 0 {
				return nil
			}
			if cmd.ArgsLenAtDash() != 0 || len(args) == 0 {
				return &exitError{code: exitNsboxFailed, msg: "run: missing command: use nsbox run [flags] -- CMD [ARGS...]"}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return runMain(f, args) },
	}
	fl := cmd.Flags()
	f.register(fl)
	fl.StringVar(&f.jsonStatus, "json-status", "", "write JSON status lines to `FILE` or fd:N")
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &exitError{code: exitNsboxFailed, msg: "run: " + err.Error()}
	})
	return cmd
}

// expandStatusPath expands the variables of a --json-status FILE once
// (policy.Host.ExpandPath), so that the file opened is the file protected
// inside; "fd:N" is left as it is.
func expandStatusPath(spec string) (string, error) {
	if spec == "" || strings.HasPrefix(spec, "fd:") {
		return spec, nil
	}
	h, err := hostForCLI()
	if err != nil {
		return "", fmt.Errorf("--json-status: %v", err)
	}
	p, err := h.ExpandPath(spec)
	if err != nil {
		return "", fmt.Errorf("--json-status %q: %w", spec, err)
	}
	return p, nil
}

// statusWriter writes JSON status lines (--json-status).
type statusWriter struct {
	w    io.WriteCloser
	path string // the file, when one was named
	// mu: violation lines come from the session's goroutines.
	mu sync.Mutex
}

// openStatus opens the --json-status destination spec; writable lists the
// directories the run's sandbox can write (policy.OpenHostDir).
func openStatus(spec string, writable func() ([]string, error)) (*statusWriter, error) {
	if spec == "" {
		return &statusWriter{}, nil
	}
	// The shell's names of the caller's descriptors are fds, not files:
	// /dev/stderr is a symlink to /proc/self/fd/2, which O_NOFOLLOW refuses.
	switch {
	case spec == "/dev/stdout":
		spec = "fd:1"
	case spec == "/dev/stderr":
		spec = "fd:2"
	case strings.HasPrefix(spec, "/dev/fd/"):
		spec = "fd:" + strings.TrimPrefix(spec, "/dev/fd/")
	}
	if n, ok := strings.CutPrefix(spec, "fd:"); ok {
		fd, err := strconv.Atoi(n)
		if err != nil || fd < 0 {
			return nil, fmt.Errorf("--json-status %q: bad fd", spec)
		}
		// A duplicate, close-on-exec: the number must be open now (not a
		// descriptor nsbox opens later for itself), and closing ours at
		// the end leaves the caller's alone.
		dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 3)
		if err != nil || !fdOpenAtStart(fd) {
			if err == nil {
				unix.Close(dup)
			}
			return nil, fmt.Errorf("--json-status %q: fd %d is not open", spec, fd)
		}
		return &statusWriter{w: os.NewFile(uintptr(dup), "status")}, nil
	}
	// The file is opened on the host, with the caller's rights, and may lie
	// in a directory an earlier sandbox could write: a symlink it planted
	// must not redirect the write, neither at the file (O_NOFOLLOW) nor on
	// the way to its directory (OpenHostDir), nor a FIFO stall the run
	// (O_NONBLOCK, then only a regular file is taken).
	dir, name := filepath.Split(spec)
	dfd, real, err := policy.OpenHostDir(filepath.Clean(dir), writable)
	if err != nil {
		return nil, fmt.Errorf("--json-status %s: %v", spec, err)
	}
	fd, err := unix.Openat(dfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_APPEND|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY, 0o644)
	unix.Close(dfd)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("--json-status %s: it is a symlink; name the file itself", spec)
		}
		if errors.Is(err, syscall.ENXIO) {
			return nil, fmt.Errorf("--json-status %s: not a regular file", spec)
		}
		return nil, fmt.Errorf("--json-status %s: %v", spec, err)
	}
	f := os.NewFile(uintptr(fd), spec)
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("--json-status %s: not a regular file", spec)
	}
	// One name only: the read-only bind over this name inside does not
	// cover a second one an earlier sandbox made (`ln status.jsonl
	// notes.txt`), through which the command would append a forged
	// "exited" line or empty the file (review 18).
	if n := st.Sys().(*syscall.Stat_t).Nlink; n > 1 {
		f.Close()
		return nil, fmt.Errorf("--json-status %s: the file has %d names (hard links), through which its lines could be changed: remove the others, or name a new file", spec, n)
	}
	// Files of the kernel's pseudo filesystems call themselves regular
	// but are not files: a write to /proc/self/status or a sysfs knob
	// fails or changes a setting, and the status lines would be lost.
	if fsName, pseudo := pseudoFS(f); pseudo {
		f.Close()
		return nil, fmt.Errorf("--json-status %s: not a regular file (a %s file); name a file on a disk, or fd:N", spec, fsName)
	}
	// The path protected inside is the file's real one.
	return &statusWriter{w: f, path: filepath.Join(real, name)}, nil
}

// pseudoFS reports whether f lies on a kernel pseudo filesystem, and which.
func pseudoFS(f *os.File) (string, bool) {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return "", false
	}
	switch st.Type {
	case unix.PROC_SUPER_MAGIC:
		return "procfs", true
	case unix.SYSFS_MAGIC:
		return "sysfs", true
	case unix.CGROUP_SUPER_MAGIC, unix.CGROUP2_SUPER_MAGIC:
		return "cgroupfs", true
	case unix.DEBUGFS_MAGIC, unix.TRACEFS_MAGIC, unix.SECURITYFS_MAGIC, 0x62656570, // configfs
		unix.BPF_FS_MAGIC, unix.EFIVARFS_MAGIC, unix.PSTOREFS_MAGIC:
		return "kernel pseudo filesystem", true
	}
	return "", false
}

func (s *statusWriter) emit(v map[string]any) {
	if s == nil || s.w == nil {
		return
	}
	b, _ := json.Marshal(v)
	s.mu.Lock()
	s.w.Write(append(b, '\n'))
	s.mu.Unlock()
}

func (s *statusWriter) close() {
	if s != nil && s.w != nil {
		s.w.Close()
	}
}

// setupFailed reports a failure before the command ran: one status line
// and exit 125.
func (s *statusWriter) setupFailed(step string, err error) error {
	s.emit(map[string]any{"event": "exited", "reason": "setup_error", "step": step, "error": err.Error(), "exit_code": exitNsboxFailed})
	return &exitError{code: exitNsboxFailed, msg: err.Error()}
}

// unavailableError is the one line a run prints when no sandbox can be
// built: "sandboxing unavailable: <exact reason>".
func unavailableError(reason error) error {
	msg := reason.Error()
	if i := strings.Index(msg, sandbox.ErrUnavailable.Error()); i > 0 {
		msg = msg[i:] // drop a "start worker: " step prefix
	}
	if !strings.HasPrefix(msg, sandbox.ErrUnavailable.Error()) {
		msg = sandbox.ErrUnavailable.Error() + ": " + msg
	}
	return errors.New(msg)
}

func runMain(f *runFlags, argv []string) error {
	removeLeftPlaceholders()
	finishPendingAudits()
	spec, err := expandStatusPath(f.jsonStatus)
	if err != nil {
		return &exitError{code: exitNsboxFailed, msg: err.Error()}
	}
	status, err := openStatus(spec, func() ([]string, error) {
		// Only when a symlink on the file's way leads out of its
		// directory: the directories this run's sandbox will write.
		host, err := hostForCLI()
		if err != nil {
			return nil, err
		}
		pv, err := f.peek(host)
		if err != nil {
			return nil, err
		}
		return pv.Roots, nil
	})
	if err != nil {
		return &exitError{code: exitNsboxFailed, msg: err.Error()}
	}
	defer status.close()
	if status.path != "" {
		// The status file stays read-only inside when it lies in a
		// writable bind (the workspace): the command must not append a
		// forged "exited" line to what the caller will read. The entry
		// names the very file opened (expandStatusPath).
		f.protect = append(f.protect, policy.LiteralPath(status.path))
	}

	// The worker process starts while the policy is resolved below. The
	// flags are the best guess of the namespaces it needs; a profile or
	// config file that decides otherwise gets a fresh worker from Start.
	// Usually the worker is already starting: prespawn.c spawned it before
	// the Go runtime started.
	pre := takePrespawned()
	// The interrupt handlers, in place before Start (interruptReady); a
	// dry run builds nothing and needs none.
	interruptReady := notifyInterrupt
	if !f.dryRun {
		interruptReady = startInterrupt()
	}
	switch {
	case f.dryRun:
		pre.Discard() // prespawn.c does not spawn for --dry-run; in case
		pre = nil
	case pre == nil && (f.backend == "landlock" || f.backend == "none"):
		// No namespace worker to start ahead (as prespawn.c decides).
	case pre == nil:
		pre = sandbox.Prestart(sandbox.PrestartHint{HostNetwork: f.network == "host", AllowPrivileged: f.allowPrivileged})
	}
	defer pre.Discard()

	host, err := hostForCLI()
	if err != nil {
		return status.setupFailed("policy", err)
	}
	if f.dryRun {
		res, err := f.resolve(host)
		if err != nil {
			return status.setupFailed("policy", err)
		}
		printWarnings(msgs, res, true)
		if err := printDryRun(os.Stdout, res); err != nil {
			return &exitError{code: exitNsboxFailed, msg: err.Error()}
		}
		return nil
	}
	// While the sandbox runs, its writable roots are held (a shared flock)
	// and the policy is resolved under that hold, so that no other run
	// removes a placeholder this sandbox relies on (policy.Hold). Peek
	// finds the roots without the full resolution (and its .env walk).
	res, hold, err := resolveHeld(f.peek, host)
	if err != nil {
		return status.setupFailed("policy", err)
	}
	res.Policy.AllowSingleID = f.allowSingleID
	choice, err := backend.Choose(res.Backend, res.BackendFallback, false)
	if err != nil {
		hold.Release(nil)
		return status.setupFailed("backend", err)
	}
	b := choice.Backend
	if !b.Isolates() {
		// No sandbox, no placeholders to guard or remove.
		hold.Release(nil)
		hold = nil
	}
	released, recorded := false, false
	release := func() {
		if !released {
			released = true
			if recorded {
				hold.Release(res.Placeholders)
			} else {
				releaseUnrecorded(hold, res)
			}
		}
	}
	defer release()
	printWarnings(msgs, res, false)

	ctx := interruptReady()
	defer ctx.Stop()
	if !b.Isolates() {
		fmt.Fprintln(msgs, "nsbox: warning: "+backend.NoneWarning)
	}
	opts, closeStores, err := hostAPIOptions(&res.Policy)
	if err != nil {
		return status.setupFailed("host APIs", err)
	}
	opts = append(opts, violationLines(status))
	defer closeStores()
	s, err := b.Start(ctx, res.Policy, append(opts, sandbox.WithPrestarted(pre))...)
	for try := 1; try < maxBuildTries && planChanged(err) && ctx.Err() == nil; try++ {
		// A file of the policy changed on the host while the sandbox was
		// built (a hidden .env a concurrent run created and removed):
		// the build failed closed; resolve again and build anew.
		fmt.Fprintf(msgs, "nsbox: note: %v; resolving the policy again\n", err)
		release()
		if res, hold, err = resolveHeld(f.peek, host); err != nil {
			return status.setupFailed("policy", err)
		}
		res.Policy.AllowSingleID = f.allowSingleID
		released = false
		s, err = b.Start(ctx, res.Policy, opts...)
	}
	// auto moves on to the next backend (landlock, then none only with
	// backend_fallback) when the one tried cannot work here; required and
	// a backend named on the command line have no fallbacks.
	fallbacks := choice.Fallbacks
	for err != nil && b.Isolates() {
		reason := backend.Unavailable(b, err)
		if reason == nil {
			break
		}
		if len(fallbacks) == 0 {
			return status.setupFailed("backend", unavailableError(reason))
		}
		next := fallbacks[0]
		fallbacks = fallbacks[1:]
		if next.Isolates() {
			fmt.Fprintf(msgs, "nsbox: note: backend %s: %s; running under backend %s, which isolates less (see `nsbox status`)\n", b.Name(), unavailableError(reason), next.Name())
		} else {
			// Only with backend_fallback = true in the user's config.
			fmt.Fprintf(msgs, "nsbox: warning: %s; backend_fallback = true: falling back to backend none\n", unavailableError(reason))
			fmt.Fprintln(msgs, "nsbox: warning: "+backend.NoneWarning)
			release()
		}
		b = next
		s, err = b.Start(ctx, res.Policy, opts...)
	}
	if err != nil {
		if sig := ctx.Signal(); sig != 0 && errors.Is(err, context.Canceled) {
			status.emit(map[string]any{"event": "exited", "reason": string(sandbox.ReasonCanceled), "interrupted_by": signalName(sig), "exit_code": 128 + int(sig)})
			return interruptedRun(sig)
		}
		step := ""
		var se *sandbox.SetupError
		if errors.As(err, &se) {
			step = se.Step
		}
		return status.setupFailed(step, err)
	}
	defer s.Close()
	if ws, ok := s.(interface{ Warnings() []string }); ok {
		for _, w := range ws.Warnings() {
			fmt.Fprintln(msgs, "nsbox: warning: "+w)
		}
	}
	// Until the hold has released them, a record of the placeholders the
	// sandbox made waits for the next nsbox in case this one is killed
	// (leftovers.go).
	placeholdersDone := recordPlaceholders(res, hold)
	recorded = true
	// The record ends after the release: it is kept when the release
	// left placeholders to a later nsbox (both are idempotent).
	defer func() { release(); placeholdersDone() }()
	// Until the audit has run, a record of it waits for the next nsbox
	// in case this one is killed (audit.go).
	defer recordAudit(res.GitAudit)()
	started := map[string]any{"event": "started", "pid": s.Pid(), "backend": b.Name(), "profile": res.Profile}
	addSocketStatus(started, s, &res.Policy)
	started["network"] = startedNetwork(&res.Policy)
	if l := loosened(res); len(l) > 0 {
		started["loosened"] = l
	}
	if li, ok := s.(interface{ Limits() sandbox.LimitInfo }); ok {
		info := li.Limits()
		started["limits"] = info
		l := res.Policy.Limits
		if info.Mode == "rlimit" && (l.Memory > 0 || l.Pids > 0 || l.CPU > 0) {
			// Say it: rlimits are per process, not per sandbox.
			fmt.Fprintf(msgs, "nsbox: warning: limits are enforced by rlimits, not cgroups (%s)\n", info.Reason)
		}
	}
	if ll, ok := s.(interface{ Landlock() *sandbox.LandlockInfo }); ok && ll.Landlock() != nil {
		info := ll.Landlock()
		started["landlock"] = map[string]any{"abi": info.ABI, "handled_fs": info.Report.HandledFS.String(),
			"handled_net": info.Report.HandledNet.String(), "scoped": info.Report.Scoped.String(), "rules": info.Report.Rules, "dropped": info.Report.Dropped}
	}
	if ni, ok := s.(interface{ NotIsolated() []string }); ok {
		// What a weaker sandbox does not isolate, said with every run.
		if gaps := ni.NotIsolated(); len(gaps) > 0 {
			started["not_isolated"] = gaps
		}
	}
	status.emit(started)

	res2, err := s.Exec(ctx, sandbox.Command{Argv: argv, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
	// The command is done: everything it left behind dies with the sandbox.
	closeErr := s.Close()
	release()
	placeholdersDone()
	// Every process of the sandbox is gone: make the git repositories it
	// made inert before the caller can run git in them.
	quarantined, auditErr := auditGit(res)
	for _, q := range quarantined {
		ev := map[string]any{"event": "quarantined", "repo": q.Repo, "from": q.From, "to": q.To}
		if q.Pattern != "" {
			ev["pattern"] = q.Pattern
		}
		status.emit(ev)
	}
	code, msg := exitStatus(res2, err)
	commandCode := code
	if errors.Is(auditErr, policy.ErrGitAuditIncomplete) {
		// Fail closed: the caller must not take this run for a clean
		// one and run git in what the sandbox left.
		code, msg = exitNsboxFailed, auditErr.Error()
		for _, line := range strings.Split(auditErr.Error(), "\n") {
			if strings.Contains(line, policy.ErrGitAuditIncomplete.Error()) {
				msg = line
			}
		}
	}
	if errors.Is(closeErr, sandbox.ErrTeardownIncomplete) {
		// Fail closed as well: without a PID namespace, processes of
		// the sandbox may still run and write in the workspace.
		code, msg = exitNsboxFailed, "cleanup: "+closeErr.Error()
	}
	var intr *exitError
	sig := ctx.Signal()
	if sig != 0 && errors.Is(err, context.Canceled) {
		// nsbox was told to stop: the command did not end by itself, and
		// its SIGKILL is not news; the signal nsbox got is.
		intr = interruptedRun(sig)
		code, msg = intr.code, intr.msg
	}
	ev := map[string]any{"event": "exited", "exit_code": code, "signal": int(res2.Signal), "reason": string(res2.Reason)}
	if sig != 0 {
		ev["interrupted_by"] = signalName(sig)
	}
	var rl *sandbox.ResourceLimitError
	if errors.As(err, &rl) {
		ev["resource"], ev["limit"], ev["enforcer"] = rl.Resource, rl.Limit, rl.Enforcer
		// What the command itself returned: a failure blamed on the limit
		// (a child OOM-killed, make exiting 2) keeps its own code here.
		ev["command_exit_code"] = res2.ExitCode
	}
	if res2.Reason == "" {
		ev["reason"] = "setup_error"
	}
	if errors.Is(auditErr, policy.ErrGitAuditIncomplete) {
		// What the command itself returned; exit_code is nsbox's 125.
		ev["git_audit"], ev["command_exit_code"] = "incomplete", commandCode
	}
	if errors.Is(closeErr, sandbox.ErrTeardownIncomplete) {
		ev["teardown"], ev["command_exit_code"] = "incomplete", commandCode
	}
	status.emit(ev)
	if closeErr != nil && msg == "" {
		msg = "cleanup: " + closeErr.Error()
	}
	if intr != nil {
		return intr
	}
	if code == 0 && msg == "" {
		return nil
	}
	return &exitError{code: code, msg: msg}
}

// maxBuildTries bounds the builds of one run whose policy a concurrent
// change of the host's files made stale (sandbox.ErrPlanChanged).
const maxBuildTries = 3

// planChanged reports whether a start failed because the host's files
// changed between the policy's resolution and the build: a hidden file or
// a bind source moved (sandbox.ErrPlanChanged), or a bind source the
// policy saw was gone by Start's own check.
func planChanged(err error) bool {
	if errors.Is(err, sandbox.ErrPlanChanged) {
		return true
	}
	var se *sandbox.SetupError
	return errors.As(err, &se) && se.Step == "mount" && errors.Is(err, fs.ErrNotExist)
}

// resolveHeld resolves the policy under a hold of its writable roots
// (policy.Hold): Peek finds the roots, they are held, and the policy is
// resolved in full under the hold, so that no other run removes a
// placeholder this sandbox relies on. The caller releases the hold.
func resolveHeld(peek func(policy.Host) (*policy.Preview, error), host policy.Host) (*policy.Result, *policy.Hold, error) {
	pv, err := peek(host)
	if err != nil {
		return nil, nil, err
	}
	hold := policy.HoldRoots(pv.Roots)
	if hold.Err() != nil {
		hold.Release(nil)
		return nil, nil, hold.Err()
	}
	res, err := pv.Load()
	if err == nil {
		// Roots that appeared since Peek (an optional bind created in
		// between, pins) are held too.
		err = hold.Add(res.Roots())
	}
	if err != nil {
		hold.Release(nil)
		return nil, nil, err
	}
	return res, hold, nil
}

// interruptedRun is how a run that nsbox was told to stop ends.
func interruptedRun(sig syscall.Signal) *exitError {
	return interrupted(sig, "interrupted by "+signalName(sig)+": the sandbox was killed")
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
	case isSocketViolation(err):
		// The command ran and failed after a refused connect: its own
		// exit code, and the refusal said.
		return res.ExitCode, err.Error()
	}
	return exitNsboxFailed, err.Error()
}

// auditGit runs res's git audit (policy.GitAudit) once the sandbox has
// ended and says on stderr what it did and what it could not do.
func auditGit(res *policy.Result) ([]policy.Quarantined, error) { return auditGitTo(msgs, res) }

// auditGitTo is auditGit saying what it did on w.
func auditGitTo(w io.Writer, res *policy.Result) ([]policy.Quarantined, error) {
	if res == nil {
		return nil, nil
	}
	qs, err := res.GitAudit.Run()
	printQuarantinedTo(w, qs, len(qs))
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			if !strings.Contains(line, policy.ErrGitAuditIncomplete.Error()) {
				fmt.Fprintf(w, "nsbox: warning: %s\n", line)
			}
		}
	}
	return qs, err
}

// printQuarantined says on stderr what the audit made inert (at most max
// lines, then how many more).
func printQuarantined(qs []policy.Quarantined, max int) { printQuarantinedTo(msgs, qs, max) }

// printQuarantinedTo is printQuarantined on w.
func printQuarantinedTo(w io.Writer, qs []policy.Quarantined, max int) {
	for i, q := range qs {
		if i == max {
			fmt.Fprintf(w, "nsbox: warning: and %d more made inert (renamed *%s)\n", len(qs)-max, ".nsbox-quarantine")
			return
		}
		switch {
		case q.Pattern != "" && q.To == "":
			fmt.Fprintf(w, "nsbox: warning: a run that was killed may have made or changed %s, which matches the protected pattern %s: look at it before an editor, agent or tool on the host opens %s\n", q.From, q.Pattern, q.Repo)
			continue
		case q.Pattern != "":
			fmt.Fprintf(w, "nsbox: warning: the sandbox made or changed %s, which matches the protected pattern %s: it is renamed to %s, so that editors, agents and tools on the host do not read it; look at it before you rename it back (or lift the pattern with --protect '!%s')\n", q.From, q.Pattern, q.To, q.Pattern)
			continue
		case q.To == "":
			// A killed run's audit, finished later: reported only.
			fmt.Fprintf(w, "nsbox: warning: a run that was killed may have made the git repository at %s (%s): look at it before you run git there\n", q.Repo, q.From)
			continue
		}
		fmt.Fprintf(w, "nsbox: warning: the sandbox made a git repository at %s: %s is renamed to %s, so that git on the host does not run its config or hooks; look at it before you rename it back\n", q.Repo, q.From, q.To)
	}
}

// startedNetwork is the "network" member of the started status line: the
// network the sandbox got, and for a filtered one what it lets through, so
// that an orchestrator reading --json-status can tell a filtered run from
// one with no network (review 74).
func startedNetwork(p *sandbox.Policy) map[string]any {
	mode := p.Network
	if mode == "" {
		mode = sandbox.NetworkNone
	}
	out := map[string]any{"mode": string(mode)}
	if f := p.NetFilter; mode == sandbox.NetworkFiltered && f != nil {
		out["allow"] = f.Allow
		if len(f.Deny) > 0 {
			out["deny"] = f.Deny
		}
		if len(f.Hosts) > 0 {
			out["hosts"] = f.Hosts
		}
		if len(f.Upstream) > 0 {
			out["upstream"] = f.Upstream
		}
		out["check_sni"] = f.CheckSNI
	}
	return out
}

// loosened is the "loosened" member of the started status line: what the
// run gives up against nsbox's defaults, whichever layer chose it (a flag,
// the config file, a profile), and each warning that said so, so that an
// orchestrator reading --json-status can tell such a run from a default
// one (review 19). Empty for a default run.
func loosened(res *policy.Result) map[string]any {
	p := &res.Policy
	out := map[string]any{}
	if p.Seccomp != "" && p.Seccomp != "default" {
		out["seccomp"] = p.Seccomp
	}
	if p.AllowPrivileged {
		out["allow_privileged"] = true
	}
	if p.AllowUserns {
		out["allow_userns"] = true
	}
	if p.AllowToolRegistration {
		out["allow_tool_registration"] = true
	}
	if p.Network == sandbox.NetworkHost {
		out["network"] = string(p.Network)
	}
	if len(p.HostAPIs) > 0 {
		out["host_apis"] = p.HostAPIs
	}
	var warnings []string
	for _, w := range res.Warnings {
		if !w.Note {
			warnings = append(warnings, w.String())
		}
	}
	if len(warnings) > 0 {
		out["warnings"] = warnings
	}
	return out
}
