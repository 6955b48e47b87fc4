package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nsbox/nsbox/pkg/policy"
	"github.com/nsbox/nsbox/pkg/sandbox"
	"github.com/nsbox/nsbox/pkg/script"
	"github.com/spf13/cobra"
)

type scriptFlags struct {
	lang      string
	code      string
	codeSet   bool
	memory    string
	timeout   time.Duration
	net       bool
	allowHost []string
	env       []string
	workdir   string
	shallow   []string
	readHost  bool
	noSandbox bool
}

func newScriptCmd() *cobra.Command {
	f := &scriptFlags{}
	cmd := &cobra.Command{
		Use:   "script --lang python|node|bash|ruby (-c CODE | FILE | -)",
		Short: "Run an inline script in a new sandbox",
		Long: `Run a python, node, bash or ruby script in a fresh sandbox: the interpreter is
found on PATH inside, the script runs in a fresh work directory (removed
afterwards) that is the only writable place, the environment is PATH and
HOME plus --env, and there is no network unless --net (the host's) or
--allow-host (a filtered network: only those names).

The script reads only the system directories (/usr, /bin, /sbin, /lib*, /etc,
/opt) and its work directory: your home directory and the rest of the host are
not there. --read-host shows the whole host read-only instead (credentials,
and the .env files of the directory it starts in and above it, still
hidden). With --workdir DIR, DIR gets a workspace's
protections: .env files hidden, .git and the files editors and agents run
read-only, and the git audit after the run.

Exit status: the script's own code; 124 when --timeout ended it; 137 when
the memory limit did; 127 when the language has no interpreter; 125 when
nsbox itself failed. A write outside the work directory is reported as a
sandbox violation naming the path.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f.codeSet = cmd.Flags().Changed("code")
			return scriptMain(f, args)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.lang, "lang", "", "language: "+strings.Join(script.Languages(), ", ")+" (required)")
	fl.StringVarP(&f.code, "code", "c", "", "the script's `CODE`")
	fl.StringVar(&f.memory, "memory", "", "memory limit, e.g. 256M or 1G (a plain number is MiB)")
	fl.DurationVar(&f.timeout, "timeout", script.DefaultTimeout, "wall-clock limit (0: none)")
	fl.BoolVar(&f.net, "net", false, "give the script the host's network")
	fl.StringArrayVar(&f.allowHost, "allow-host", nil, "give the script a filtered network reaching `PATTERN` only (NAME, *.SUFFIX, NAME:PORT; repeatable)")
	fl.StringArrayVar(&f.env, "env", nil, "set `K=V` for the script (repeatable)")
	fl.StringVar(&f.workdir, "workdir", "", "run in this existing `DIR` (writable) instead of the fresh work directory")
	fl.StringArrayVar(&f.shallow, "shallow", nil, "search `DIR` (the --workdir) at its top level only: nested repositories, .env files and agent configs below it are neither protected nor audited (for a tree too big to walk; repeatable)")
	fl.BoolVar(&f.readHost, "read-host", false, "let the script read the whole host file system (read-only; credentials, and the .env files of the directory it starts in and above it, still hidden), not only the system directories and its work directory")
	fl.BoolVar(&f.noSandbox, "no-sandbox", false, "run WITHOUT any isolation, directly on the host (for debugging)")
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &exitError{code: exitNsboxFailed, msg: "script: " + err.Error()}
	})
	return cmd
}

// scriptConfig turns the flags into the script's ExecConfig.
func scriptConfig(f *scriptFlags, args []string) (script.ExecConfig, error) {
	cfg := script.ExecConfig{Language: f.lang, AllowNet: f.net, AllowHosts: f.allowHost, WorkDir: f.workdir}
	if f.net && len(f.allowHost) > 0 {
		return cfg, errors.New("--net gives the host's whole network; --allow-host a filtered one: choose one")
	}
	if f.lang == "" {
		return cfg, errors.New("--lang is required (" + strings.Join(script.Languages(), ", ") + ")")
	}
	if _, err := script.LookupLanguage(f.lang); err != nil {
		return cfg, fmt.Errorf("--lang: %v", err)
	}
	switch {
	case f.codeSet && len(args) > 0:
		return cfg, errors.New("give the script either with -c or as FILE, not both")
	case f.codeSet:
		cfg.Script = f.code
	case len(args) == 0:
		return cfg, errors.New("missing script: use -c CODE, a FILE, or - for standard input")
	case args[0] == "-":
		b, err := io.ReadAll(io.LimitReader(os.Stdin, script.MaxScriptSize+1))
		if err != nil {
			return cfg, fmt.Errorf("read standard input: %v", err)
		}
		cfg.Script = string(b)
	default:
		b, err := readScriptFile(args[0])
		if err != nil {
			return cfg, fmt.Errorf("read script: %v", err)
		}
		cfg.Script = string(b)
	}
	if f.memory != "" {
		mb, err := parseMiB(f.memory)
		if err != nil {
			return cfg, fmt.Errorf("--memory %q: %v", f.memory, err)
		}
		cfg.MemoryMB = mb
	}
	switch {
	case f.timeout < 0:
		return cfg, errors.New("--timeout must not be negative")
	case f.timeout == 0:
		cfg.TimeoutSec = -1 // no limit
	default:
		cfg.TimeoutSec = int(math.Ceil(f.timeout.Seconds()))
	}
	for _, kv := range f.env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return cfg, fmt.Errorf("--env %q: want K=V", kv)
		}
		if cfg.Env == nil {
			cfg.Env = map[string]string{}
		}
		cfg.Env[k] = v
	}
	return cfg, nil
}

// scriptSystemDirs are what a script reads of the host by default: the
// system directories its interpreter needs (missing ones are skipped).
// Invariant: the inline-script contract is file access limited to the
// sandbox's own directories; $HOME and the rest of the host are not there
// unless --read-host widens it.
var scriptSystemDirs = []string{"/bin", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/sbin", "/usr"}

// scriptRun is the resolved policy of one `nsbox script` and what the run
// holds: the hold of the work directory (its placeholders) and the git
// audit to run once the sandbox is gone.
type scriptRun struct {
	res  *policy.Result
	hold *policy.Hold
	// placeholdersDone removes the record of the placeholders the
	// sandbox made (leftovers.go), once the hold has released them.
	placeholdersDone func()
}

// finish releases the work directory's placeholders and runs its git
// audit; call it once the script's sandbox has ended.
func (sr *scriptRun) finish() error {
	if sr == nil || sr.res == nil {
		return nil
	}
	if sr.placeholdersDone != nil {
		sr.hold.Release(sr.res.Placeholders)
		sr.placeholdersDone()
	} else {
		releaseUnrecorded(sr.hold, sr.res)
	}
	sr.hold = nil
	_, err := auditGit(sr.res)
	return err
}

// scriptSandbox is where scripts run: the native sandbox, or none at all
// with --no-sandbox. Its policy comes from the strict profile (with the
// user's config) resolved like `nsbox run`'s: the host is read-only inside,
// only the system directories are there (unless --read-host), what the
// profile hides reads as empty, and a --workdir is a workspace: its .env
// files hidden, its .git and agent files protected, its placeholders held
// and removed, and its repositories audited after the run.
func scriptSandbox(f *scriptFlags) (script.Sandbox, *scriptRun, error) {
	if f.noSandbox {
		return script.NoopSandbox{}, nil, nil
	}
	host, err := hostForCLI()
	if err != nil {
		return nil, nil, err
	}
	flags := policy.Config{}
	if !f.readHost {
		flags.Filesystem.HostDirs = scriptSystemDirs
	} else {
		// The whole host is there, read-only: the .env files of the
		// directory the script starts in, and of each directory above
		// it, read as empty (the strict profile hides them only in
		// writable directories; review 19). Not a walk: --read-host
		// started in $HOME would walk all of it.
		for d := host.Cwd; ; d = filepath.Dir(d) {
			flags.Filesystem.Hide = append(flags.Filesystem.Hide, policy.PathEntry{Path: filepath.Join(policy.EscapeGlob(d), ".env*")})
			// A .env that is a link (to config/prod.env) hides its
			// target only in a writable directory: its target is
			// hidden by name too (review 20).
			for _, t := range envLinkTargets(d) {
				flags.Filesystem.Hide = append(flags.Filesystem.Hide, policy.PathEntry{Path: policy.EscapeGlob(t)})
			}
			if d == "/" || d == "." {
				break
			}
		}
	}
	if f.workdir != "" {
		// The checks a workspace gets: a writable home directory would
		// hand the script your shell startup files and credentials, a
		// system directory (as root) the host.
		if err := policy.CheckWorkspace(host, f.workdir); err != nil {
			return nil, nil, fmt.Errorf("--workdir: %w", err)
		}
		flags.Workspace = &f.workdir
		flags.Filesystem.RW = []policy.PathEntry{{Path: "$NSBOX_WORKSPACE"}}
	}
	flags.Filesystem.Shallow = f.shallow
	l := &policy.Layer{Kind: policy.KindFlags, Name: "command line", Config: flags, KeyNames: map[string]string{"workspace": "--workdir", "filesystem.rw": "--workdir", "filesystem.shallow": "--shallow", "filesystem.host_dirs": "the script's system directories"}}
	req := policy.Request{Profile: "strict", Flags: l}
	res, hold, err := resolveHeld(func(h policy.Host) (*policy.Preview, error) { return policy.Peek(h, req) }, host)
	if err != nil {
		return nil, nil, err
	}
	ws := res.Workspace
	base := sandbox.Policy{Hostname: "nsbox", HostDirs: res.Policy.HostDirs}
	// Only the workspace of the profile's writable binds, and its pins: a
	// bind or tmpfs of the user's config (config.toml's rw, say) is not
	// part of a script's sandbox, nor is what lies below one.
	var dropped []sandbox.Mount
	for _, m := range res.Policy.Mounts {
		if (m.Kind == sandbox.MountBind || m.Kind == sandbox.MountTmpfs) && !(ws != "" && m.Kind == sandbox.MountBind && under(m.Source, ws) && m.Dest == m.Source) {
			dropped = append(dropped, m)
		}
	}
	for _, m := range res.Policy.Mounts {
		switch {
		case m.Kind == sandbox.MountBind || m.Kind == sandbox.MountTmpfs:
			if !slices.Contains(dropped, m) {
				base.Mounts = append(base.Mounts, m)
			}
		case m.Kind == sandbox.MountProtect && ws != "" && under(m.Dest, ws):
			base.Mounts = append(base.Mounts, m)
		case m.Kind == sandbox.MountHide && (ws != "" && under(m.Dest, ws) || !shownElsewhere(m.Dest, dropped)):
			base.Mounts = append(base.Mounts, m)
		}
	}
	sr := &scriptRun{res: res, hold: hold}
	// Until the hold has released them, a record of the placeholders the
	// sandbox made waits for the next nsbox in case this one is killed.
	started := func() { sr.placeholdersDone = recordPlaceholders(res, hold) }
	return &script.Native{Base: base, Started: started}, sr, nil
}

// under reports whether p is d or below it.
func under(p, d string) bool { return p == d || strings.HasPrefix(p, strings.TrimSuffix(d, "/")+"/") }

// shownElsewhere reports whether p lies where a script's sandbox does not
// show the host root: below a bind or tmpfs of mounts, or in one of the
// sandbox's private trees.
func shownElsewhere(p string, mounts []sandbox.Mount) bool {
	for _, d := range []string{"/tmp", "/run", "/dev", "/proc"} {
		if under(p, d) {
			return true
		}
	}
	for _, m := range mounts {
		if (m.Kind == sandbox.MountBind || m.Kind == sandbox.MountTmpfs) && under(p, m.Dest) {
			return true
		}
	}
	return false
}

// parseMiB reads a size: 256, 256M, 256MiB, 1G, 1GiB (a plain number is
// MiB).
func parseMiB(s string) (int, error) {
	t := strings.TrimSpace(strings.ToUpper(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "IB"), "B")
	mult := 1
	switch {
	case strings.HasSuffix(t, "G"):
		mult, t = 1024, strings.TrimSuffix(t, "G")
	case strings.HasSuffix(t, "M"):
		t = strings.TrimSuffix(t, "M")
	}
	n, err := strconv.Atoi(t)
	if err != nil || n <= 0 {
		return 0, errors.New("want a positive size such as 256M or 1G")
	}
	return n * mult, nil
}

func scriptMain(f *scriptFlags, args []string) error {
	cfg, err := scriptConfig(f, args)
	if err != nil {
		return &exitError{code: exitNsboxFailed, msg: "script: " + err.Error()}
	}
	removeLeftPlaceholders()
	finishPendingAudits()
	// The interrupt handlers, set up beside the sandbox's preparation and
	// in place before it starts (startInterrupt).
	interruptReady := startInterrupt()
	sb, run, err := scriptSandbox(f)
	if err != nil {
		return &exitError{code: exitNsboxFailed, msg: "script: " + err.Error()}
	}
	finished := false
	defer func() {
		if !finished {
			run.finish()
		}
	}()
	if run != nil {
		// Until the audit has run, a record of it waits for the next
		// nsbox in case this one is killed (audit.go).
		defer recordAudit(run.res.GitAudit)()
	}
	if w := sb.Warning(); w != "" {
		fmt.Fprintln(msgs, "nsbox: WARNING: "+w)
	}
	ctx := interruptReady()
	defer ctx.Stop()
	stdout, stderr, err := sb.Execute(ctx, cfg)
	os.Stdout.WriteString(stdout)
	os.Stderr.WriteString(stderr)
	// The sandbox is gone: the work directory's placeholders go, and the
	// repositories the script made are made inert before the caller runs
	// git there.
	finished = true
	if aerr := run.finish(); errors.Is(aerr, policy.ErrGitAuditIncomplete) {
		return &exitError{code: exitNsboxFailed, msg: "script: " + aerr.Error()}
	}
	if sig := ctx.Signal(); sig != 0 && errors.Is(err, context.Canceled) {
		return interrupted(sig, "interrupted by "+signalName(sig)+": the script's sandbox was killed")
	}
	code, msg := scriptExit(err)
	if code == 0 {
		return nil
	}
	return &exitError{code: code, msg: msg}
}

// scriptExit maps how the script ended to nsbox's exit code and message.
func scriptExit(err error) (int, string) {
	var (
		rl   *sandbox.ResourceLimitError
		viol *sandbox.ViolationError
		ee   *script.ExitError
	)
	code := 1
	if errors.As(err, &ee) {
		code = ee.Code
		if ee.Signal != 0 {
			code = 128 + ee.Signal
		}
	}
	switch {
	case err == nil:
		return 0, ""
	case errors.As(err, &rl):
		switch rl.Resource {
		case "time":
			return exitTimeout, err.Error()
		case "memory":
			return exitOOMKilled, err.Error()
		}
		return code, err.Error()
	case errors.As(err, &viol):
		return code, viol.Error()
	case errors.Is(err, sandbox.ErrInterpreterNotFound):
		return exitNotFound, err.Error()
	case ee != nil:
		return code, "" // the script's own failure: its stderr says why
	case errors.Is(err, context.Canceled):
		return exitNsboxFailed, "interrupted"
	}
	return exitNsboxFailed, err.Error()
}

// envLinkTargets are the files the .env* symlinks of dir lead to.
func envLinkTargets(dir string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".env") || e.Type()&os.ModeSymlink == 0 {
			continue
		}
		if t, err := filepath.EvalSymlinks(filepath.Join(dir, e.Name())); err == nil {
			out = append(out, t)
		}
	}
	return out
}

// readScriptFile reads a script FILE, which may lie in a directory an
// earlier sandbox wrote (a --workdir's): not through a symlink (one to
// /etc/shadow would hand the host file's text to the sandbox as its
// script), never waiting on a FIFO, only a regular file, and at most
// MaxScriptSize+1 bytes (a sparse file of gigabytes was read whole;
// review 71). The size check itself is the script package's.
func readScriptFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NOCTTY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("%s is a symbolic link: give the file it leads to (a sandbox may have made the link)", path)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	return io.ReadAll(io.LimitReader(f, script.MaxScriptSize+1))
}
