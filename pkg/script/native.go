package script

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

// Native runs each script in a sandbox of its own (sandbox.Start, Exec,
// Close): namespaces, a read-only root, seccomp and limits. The program
// must call sandbox.Init first thing in main.
type Native struct {
	// Base is the policy every script starts from (host dirs, hidden
	// paths, seccomp, extra mounts...). Execute adds the work directory,
	// the limits, the network choice and the environment of its
	// ExecConfig; Base.Env, when set, replaces the minimal PATH.
	Base sandbox.Policy
	// Options are passed to sandbox.Start.
	Options []sandbox.Option
	// Started, when set, is called once each script's sandbox is built,
	// before the script runs (the CLI records the placeholders the build
	// made, for the next nsbox if this one is killed).
	Started func()

	once  sync.Once
	avail bool
}

// NewNative returns a Native sandbox with the default base policy.
func NewNative() *Native { return &Native{} }

var _ Sandbox = (*Native)(nil)

// Warning is empty: Native isolates.
func (n *Native) Warning() string { return "" }

// Available starts (and closes) one empty sandbox, once, and reports
// whether that worked.
func (n *Native) Available() bool {
	n.once.Do(func() {
		s, err := sandbox.Start(context.Background(), sandbox.Policy{Env: []string{"PATH=" + defaultPath}}, n.Options...)
		if err == nil {
			s.Close()
			n.avail = true
		}
	})
	return n.avail
}

// Execute runs cfg in a fresh sandbox.
func (n *Native) Execute(ctx context.Context, cfg ExecConfig) (stdout, stderr string, err error) {
	lang, err := cfg.validate()
	if err != nil {
		return "", "", err
	}
	// The fresh work directory: created 0700 by mkdtemp (unpredictable
	// name, O_EXCL), bound read-write into the sandbox at the same path,
	// and removed after the sandbox is gone, whatever happened: also what
	// the script made unreadable (rmtree.All), and by a later nsbox when
	// this one is killed (newWorkDir).
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
	p, err := n.policy(cfg, dir)
	if err != nil {
		return "", "", err
	}
	s, err := sandbox.Start(ctx, p, n.Options...)
	if err != nil {
		return "", "", err
	}
	defer func() {
		// Without a PID namespace (the Landlock backend) a teardown that
		// could not confirm the script's processes gone is an error:
		// they may still write in the work directory.
		if cerr := s.Close(); errors.Is(cerr, sandbox.ErrTeardownIncomplete) && err == nil {
			err = cerr
		}
	}()
	if n.Started != nil {
		n.Started()
	}

	var (
		res  sandbox.Result
		xerr error
	)
	found := false
	for _, interp := range lang.Interpreters {
		// The interpreter is looked up on PATH inside the sandbox (the
		// worker resolves argv[0]), which is what the script will see.
		res, xerr = s.Exec(ctx, sandbox.Command{Argv: []string{interp, file}, Timeout: cfg.timeout()})
		if errors.Is(xerr, sandbox.ErrCommandNotFound) {
			continue
		}
		found = true
		break
	}
	if !found {
		return "", "", InterpreterNotFound(lang.Name)
	}
	return string(res.Stdout), string(res.Stderr), cutError(resultError(res.ExitCode, int(res.Signal), string(res.Stderr), xerr, cfg.MemoryMB), res.Truncated)
}

// policy is the sandbox of one execution: Base, plus the work directory
// (and WorkDir) writable, cwd there, the network only with AllowNet, and the
// limits.
func (n *Native) policy(cfg ExecConfig, dir string) (sandbox.Policy, error) {
	p := n.Base
	// The work directories first, Base's mounts (hides) after them: a hide
	// applies to what is visible where it is mounted, so a --workdir that
	// holds a hidden path (a home directory) cannot uncover it.
	p.Mounts = []sandbox.Mount{{Kind: sandbox.MountBind, Source: dir, Dest: dir}}
	p.Cwd = dir
	home := dir
	if cfg.WorkDir != "" {
		wd, err := filepath.Abs(cfg.WorkDir)
		if err != nil {
			return p, fmt.Errorf("script: work directory %q: %w", cfg.WorkDir, err)
		}
		if st, err := os.Stat(wd); err != nil || !st.IsDir() {
			return p, fmt.Errorf("script: work directory %q is not a directory", cfg.WorkDir)
		}
		if !bindsDir(n.Base.Mounts, wd) {
			p.Mounts = append(p.Mounts, sandbox.Mount{Kind: sandbox.MountBind, Source: wd, Dest: wd})
		}
		p.Cwd = wd
	}
	p.Mounts = append(p.Mounts, n.Base.Mounts...)
	// The network is the host's only when asked for: the default is a
	// namespace with nothing but loopback.
	p.Network = sandbox.NetworkNone
	p.NetFilter = nil
	switch {
	case cfg.AllowNet:
		p.Network = sandbox.NetworkHost
	case len(cfg.AllowHosts) > 0:
		p.Network = sandbox.NetworkFiltered
		p.NetFilter = &sandbox.NetFilter{Allow: cfg.AllowHosts}
		if n.Base.NetFilter != nil {
			// The embedder's pins and upstream still apply.
			p.NetFilter.Hosts = n.Base.NetFilter.Hosts
			p.NetFilter.Upstream = n.Base.NetFilter.Upstream
		}
	}
	if cfg.MemoryMB > 0 {
		p.Limits.Memory = int64(cfg.MemoryMB) << 20
		if p.Limits.Memory < sandbox.MinMemory {
			return p, fmt.Errorf("script: memory limit %d MiB is below the %d MiB a sandbox needs", cfg.MemoryMB, sandbox.MinMemory>>20)
		}
	}
	p.Limits.Time = cfg.timeout()
	path := os.Getenv("PATH")
	if path == "" {
		path = defaultPath
	}
	if n.Base.Env != nil {
		p.Env = append(append([]string(nil), n.Base.Env...), environ(path, home, cfg.Env)...)
		p.Env = dedupEnv(p.Env)
	} else {
		p.Env = environ(path, home, cfg.Env)
	}
	return p, nil
}

// bindsDir reports whether mounts bind dir read-write at its own place
// (a Base resolved with dir as its workspace, protections and all).
func bindsDir(mounts []sandbox.Mount, dir string) bool {
	for _, m := range mounts {
		if m.Kind == sandbox.MountBind && !m.ReadOnly && m.Source == dir && m.Dest == dir {
			return true
		}
	}
	return false
}

// resultError maps how the interpreter ended to the package's typed errors.
func resultError(code, signal int, stderr string, xerr error, memoryMB int) error {
	if xerr != nil {
		// Limits reported by the sandbox (timer, OOM kill, pids) and
		// failures to run at all pass through as they are.
		return xerr
	}
	if code == 0 && signal == 0 {
		return nil
	}
	limit := ""
	if memoryMB > 0 {
		limit = strconv.Itoa(memoryMB) + " MiB"
	}
	exit := &ExitError{Code: code, Signal: signal}
	if err := Classify(stderr, limit); err != nil {
		return &failure{reason: err, exit: exit}
	}
	return exit
}

// ErrOutputCut: a stream of the script's output was longer than a runner
// keeps (sandbox.DefaultMaxOutput): what it printed after that is lost.
// A run that succeeded otherwise fails with it, so that a caller never
// takes cut output for the whole (review 46).
var ErrOutputCut = fmt.Errorf("the script's output was cut at %d MiB a stream: what it printed after that is lost (write large output to a file in the work directory)", sandbox.DefaultMaxOutput>>20)

// cutError is err, or ErrOutputCut for a run that succeeded with a stream
// cut.
func cutError(err error, cut bool) error {
	if err == nil && cut {
		return ErrOutputCut
	}
	return err
}

// failure is a classified script failure (a violation, a memory limit) that
// keeps the exit status: errors.As finds both the reason and the
// *ExitError.
type failure struct {
	reason error
	exit   *ExitError
}

func (f *failure) Error() string   { return f.reason.Error() }
func (f *failure) Unwrap() []error { return []error{f.reason, f.exit} }

// dedupEnv keeps the last value of each key, in first-seen order.
func dedupEnv(env []string) []string {
	idx := map[string]int{}
	out := []string{}
	for _, kv := range env {
		k := kv
		for i := 0; i < len(kv); i++ {
			if kv[i] == '=' {
				k = kv[:i]
				break
			}
		}
		if i, ok := idx[k]; ok {
			out[i] = kv
			continue
		}
		idx[k] = len(out)
		out = append(out, kv)
	}
	return out
}
