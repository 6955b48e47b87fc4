package sandbox

import (
	"fmt"
	"os"
	"strconv"

	"github.com/nsbox/nsbox/pkg/cgroups"
	"golang.org/x/sys/unix"
)

// limiter applies a policy's limits with the best mechanism this host has
// (cgroup v2, v1, or rlimits) and reads back, from the kernel, whether a
// limit ended a command.
type limiter struct {
	m          *cgroups.Manager
	limits     Limits
	joinWorker bool
}

// limiterResult carries newLimiter's result from the goroutine Start runs
// it on.
type limiterResult struct {
	l   *limiter
	err error
}

func newLimiter(l Limits) (*limiter, error) {
	// A supervisor that was SIGKILLed could not remove its groups; the
	// next run does, with limits or without: the groups of a killed run
	// would otherwise stay until a limited run happened to come (about
	// 0.13 ms when there is nothing to remove: BenchmarkCleanupStale).
	cgroups.CleanupStale()
	m, err := cgroups.New(strconv.Itoa(os.Getpid()), cgroups.Limits{Memory: l.Memory, Pids: l.Pids, CPU: l.CPU})
	if err != nil {
		return nil, err
	}
	return &limiter{m: m, limits: l}, nil
}

// joinFiles opens the group's join files (cgroups.Manager.JoinFiles). The
// worker is NOT in the limited group: it hands these to each command, which
// moves itself in before exec. So a fork bomb or a memory hog can exhaust the group without
// starving PID 1 of a thread or making it the OOM killer's victim, and the
// group's counters speak of the commands alone.
func (l *limiter) joinFiles() ([]*os.File, error) {
	if l == nil || l.m == nil {
		return nil, nil
	}
	files, err := l.m.JoinFiles()
	if err != nil {
		return nil, err
	}
	if files == nil {
		switch l.m.Mode() {
		case cgroups.ModeCgroup1, cgroups.ModeCgroup2, cgroups.ModeCgroup2Delegated:
			l.joinWorker = true
		}
	}
	return files, nil
}

// join puts the worker itself in the group, only where the group cannot be
// joined by file (a systemd scope is created around a process).
func (l *limiter) join(pid int) error {
	if l == nil || l.m == nil || !l.joinWorker {
		return nil
	}
	return l.m.AddProcess(pid)
}

// Mode says which mechanism enforces the limits.
func (l *limiter) mode() cgroups.Mode {
	if l == nil || l.m == nil {
		return cgroups.ModeNone
	}
	return l.m.Mode()
}

func (l *limiter) rlimits() (worker, exec []rlimit) {
	if l == nil || l.m == nil {
		return nil, nil
	}
	for _, r := range l.m.Rlimits() {
		rl := rlimit{Resource: r.Resource, Cur: r.Cur, Max: r.Max}
		// Only RLIMIT_CORE applies to the worker (PID 1) and is inherited.
		// AS, CPU and NPROC would bind the worker too — a long-lived Go
		// process with a large address space and several threads — so
		// they are set in each command only.
		if r.Resource != unix.RLIMIT_CORE {
			exec = append(exec, rl)
		} else {
			worker = append(worker, rl)
		}
	}
	return worker, exec
}

func (l *limiter) events() cgroups.Events {
	if l == nil || l.m == nil {
		return cgroups.Events{}
	}
	ev, _ := l.m.Events()
	return ev
}

// check turns a kernel-reported limit hit during a command into its reason
// and error: the OOM killer's count from memory.events or
// memory.oom_control, the pids controller's from pids.events.
func (l *limiter) check(before cgroups.Events, r *Result) error {
	if l == nil || l.m == nil {
		return nil
	}
	after := l.events()
	switch {
	case after.OOMKills > before.OOMKills:
		r.Reason = ReasonOOM
		return &ResourceLimitError{Resource: "memory", Limit: formatBytes(l.limits.Memory), Enforcer: string(l.m.Mode())}
	case after.PidsMax > before.PidsMax:
		r.Reason = ReasonPids
		return &ResourceLimitError{Resource: "pids", Limit: strconv.FormatInt(l.limits.Pids, 10), Enforcer: string(l.m.Mode())}
	}
	return nil
}

func (l *limiter) kill() {
	if l != nil && l.m != nil {
		l.m.Kill()
	}
}

func (l *limiter) destroy() error {
	if l == nil || l.m == nil {
		return nil
	}
	return l.m.Destroy()
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// LimitInfo says how a session's limits are enforced.
type LimitInfo struct {
	// Mode is "cgroup2", "cgroup2-delegated", "cgroup1", "rlimit" or "none".
	Mode string `json:"mode"`
	// Enforcement maps each limit to its mechanism, e.g.
	// "memory": "cgroup1 memory.limit_in_bytes".
	Enforcement map[string]string `json:"enforcement,omitempty"`
	// Reason says why a better mechanism is not available here.
	Reason string `json:"reason,omitempty"`
	// Knob is the host setting that would enable a better mechanism.
	Knob string `json:"knob,omitempty"`
}

// Limits says which mechanism enforces this session's limits.
func (s *Session) Limits() LimitInfo {
	if s.limits == nil || s.limits.m == nil {
		return LimitInfo{Mode: string(cgroups.ModeNone)}
	}
	reason, knob := s.limits.m.Fallback()
	return LimitInfo{Mode: string(s.limits.m.Mode()), Enforcement: s.limits.m.Enforcement(), Reason: reason, Knob: knob}
}
