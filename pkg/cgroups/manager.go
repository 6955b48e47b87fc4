package cgroups

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Rlimit is one resource limit for the commands of a sandbox (setrlimit or
// prlimit in the worker, before exec). Cur == Max: the sandbox cannot raise
// it back.
type Rlimit struct {
	Resource int    // unix.RLIMIT_*
	Name     string // "RLIMIT_CORE", ...
	Cur, Max uint64
}

// Events are the kernel's counters for one sandbox group.
type Events struct {
	// OOMKills: processes the kernel OOM-killed because of the memory limit
	// (memory.events oom_kill on v2, memory.oom_control oom_kill on v1).
	OOMKills uint64
	// PidsMax: forks/clones refused because of the pids limit (pids.events
	// max).
	PidsMax uint64
}

// backend is one cgroup implementation (v1, v2, systemd scope).
type backend interface {
	fd() (int, bool)
	add(pid int) error
	events() (Events, error)
	kill() error
	destroy() error // kill, wait until empty, remove the group(s); idempotent
}

// Manager owns the limits of one sandbox. Its methods are safe for
// concurrent use.
type Manager struct {
	mu          sync.Mutex
	name        string
	limits      Limits
	det         Detection
	b           backend // nil in rlimit and none modes
	enforcement map[string]string
	rlimits     []Rlimit
	destroyed   bool
	final       Events // counters read just before Destroy removed the group
	lazyVersion bool   // det.Version is still to be read (mode none)
}

// New creates the sandbox's group(s) in the mode Detect reports and applies
// l. id (optional, [A-Za-z0-9_.-], at most 64 bytes) is appended to the
// group name "nsbox-<pid>-<random>" to tell sandboxes apart on the host.
//
// If the cgroup cannot be set up although Detect said it could, New falls
// back to rlimits and Detection().Reason says why; it fails only for invalid
// arguments. With no limit requested the Manager is in mode "none" and still
// gives RLIMIT_CORE=0. Call Destroy when the sandbox ends.
func New(id string, l Limits) (*Manager, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	if err := validateID(id); err != nil {
		return nil, err
	}
	name, err := groupName(id)
	if err != nil {
		return nil, err
	}
	m := &Manager{name: name, limits: l}
	if l.Memory == 0 && l.Pids == 0 && l.CPU == 0 {
		// Version is filled in by Detection when asked: reading mountinfo
		// here would cost every limit-less sandbox's start for nothing.
		m.det = Detection{Mode: ModeNone}
		m.lazyVersion = true
		if l.CPUTime > 0 {
			m.det.Mode = ModeRlimit
		}
		m.finish(nil)
		return m, nil
	}
	var need []string
	if l.Memory > 0 {
		need = append(need, ctrlMemory)
	}
	if l.Pids > 0 {
		need = append(need, ctrlPids)
	}
	if l.CPU > 0 {
		need = append(need, ctrlCPU)
	}
	p := makePlan(need)
	m.det = p.det
	var b backend
	switch p.det.Mode {
	case ModeCgroup2, ModeCgroup2Delegated:
		if p.v2.kind == v2Systemd {
			b, err = newScope(name, p.v2, l)
		} else {
			b, err = newV2(name, p.v2, l)
		}
	case ModeCgroup1:
		b, err = newV1(name, p, l)
	}
	if err != nil {
		// Degrade, do not fail: the rlimits below still bound the sandbox and
		// Enforcement/Detection tell the user what happened.
		m.det = Detection{Mode: ModeRlimit, Version: p.det.Version,
			Reason: fmt.Sprintf("%s was expected to work but failed: %v", p.det.Mode, err), Knob: p.det.Knob}
		b = nil
		p = &plan{det: m.det}
	}
	m.b = b
	m.finish(p)
	return m, nil
}

// finish computes the enforcement table and the rlimits.
func (m *Manager) finish(p *plan) {
	l, mode := m.limits, m.det.Mode
	enf := map[string]string{"core": "rlimit RLIMIT_CORE=0"}
	// RLIMIT_CORE=0 in every mode: a core dump of sandboxed code could land
	// outside the sandbox (core_pattern is host-wide) and leak its memory.
	rl := []Rlimit{{Resource: unix.RLIMIT_CORE, Name: "RLIMIT_CORE", Cur: 0, Max: 0}}
	cg := func(c string) bool { return p != nil && p.enforced(c) }
	scope := p != nil && p.v2 != nil && p.v2.kind == v2Systemd
	if l.Memory > 0 {
		switch {
		case cg(ctrlMemory) && scope:
			enf["memory"] = "cgroup2 systemd scope MemoryMax, MemorySwapMax=0"
		case cg(ctrlMemory) && mode == ModeCgroup1:
			enf["memory"] = "cgroup1 memory.limit_in_bytes"
			if v1, ok := m.b.(*v1Backend); ok && v1.memsw {
				enf["memory"] += " + memory.memsw.limit_in_bytes (no swap)"
			}
		case cg(ctrlMemory):
			enf["memory"] = "cgroup2 memory.max"
			if v2, ok := m.b.(*v2Backend); ok && v2.swap {
				enf["memory"] += " + memory.swap.max=0"
			}
		default:
			// Virtual size, not resident memory: looser than a cgroup.
			// RLIMIT_DATA, not RLIMIT_AS: since Linux 4.7 it counts every
			// private writable mapping (heap, anonymous mmap), which is what
			// a memory hog grows, while runtimes that reserve large address
			// ranges up front (V8, Go, the JVM) still start.
			// Shared mappings are not data mappings for the kernel
			// (mm/internal.h is_data_mapping: writable, not shared, not
			// stack): a MAP_SHARED|MAP_ANONYMOUS region, a memfd or System
			// V shm escapes the limit. RLIMIT_AS would count them but also
			// every reserved range, and Go, V8 or a JVM would not start
			// under it; the gap is said plainly where the limit is shown.
			enf["memory"] = "rlimit RLIMIT_DATA (private writable memory, per process; shared memory — MAP_SHARED anonymous mappings, memfd, System V shm — is NOT counted)"
			rl = append(rl, Rlimit{Resource: unix.RLIMIT_DATA, Name: "RLIMIT_DATA", Cur: uint64(l.Memory), Max: uint64(l.Memory)})
		}
	}
	if l.Pids > 0 {
		switch {
		case cg(ctrlPids) && scope:
			enf["pids"] = "cgroup2 systemd scope TasksMax"
		case cg(ctrlPids) && mode == ModeCgroup1:
			enf["pids"] = "cgroup1 pids.max"
		case cg(ctrlPids):
			enf["pids"] = "cgroup2 pids.max"
		default:
			// The kernel counts RLIMIT_NPROC per user (per uid of the
			// sandbox's user namespace), not per sandbox.
			enf["pids"] = "rlimit RLIMIT_NPROC (per user)"
			rl = append(rl, Rlimit{Resource: unix.RLIMIT_NPROC, Name: "RLIMIT_NPROC", Cur: uint64(l.Pids), Max: uint64(l.Pids)})
		}
	}
	if l.CPU > 0 {
		switch {
		case cg(ctrlCPU) && scope:
			enf["cpu"] = "cgroup2 systemd scope CPUQuota"
		case cg(ctrlCPU) && mode == ModeCgroup1:
			enf["cpu"] = "cgroup1 cpu.cfs_quota_us/cfs_period_us"
		case cg(ctrlCPU):
			enf["cpu"] = "cgroup2 cpu.max"
		default:
			enf["cpu"] = "not enforced (needs a cgroup with the cpu controller)"
		}
	}
	if s := l.cpuSeconds(); s > 0 {
		// No cgroup limits total CPU time: RLIMIT_CPU in every mode
		// (Cur == Max: the kernel sends SIGKILL when it is reached).
		enf["cputime"] = "rlimit RLIMIT_CPU (per process)"
		rl = append(rl, Rlimit{Resource: unix.RLIMIT_CPU, Name: "RLIMIT_CPU", Cur: s, Max: s})
	}
	m.enforcement, m.rlimits = enf, rl
}

// Mode returns the mechanism in use.
func (m *Manager) Mode() Mode { return m.det.Mode }

// Detection returns the detection New acted on, with the reason of a
// fallback to rlimits if the cgroup setup failed.
func (m *Manager) Detection() Detection {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lazyVersion {
		m.det.Version, m.lazyVersion = getMounts().version, false
	}
	return m.det
}

// Fallback returns why a better mechanism than Mode is not in use here and
// the host setting that would enable one (both empty when none is
// missing): Detection's Reason and Knob, without its other fields.
func (m *Manager) Fallback() (reason, knob string) { return m.det.Reason, m.det.Knob }

// Name returns the group's name ("nsbox-<pid>-<random>[-<id>]"), also the
// systemd unit name (plus ".scope") in scope mode.
func (m *Manager) Name() string { return m.name }

// CgroupFD returns an O_PATH directory fd of the sandbox's cgroup v2 group,
// for exec.Cmd SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
// (CLONE_INTO_CGROUP): the worker then never runs outside its limits.
// ok is false in the other modes: use AddProcess. The fd stays owned by the
// Manager and is closed by Destroy.
func (m *Manager) CgroupFD() (fd int, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.b == nil || m.destroyed {
		return -1, false
	}
	return m.b.fd()
}

// AddProcess moves pid (the worker, right after it started and before it is
// released to run anything) into the sandbox's group(s): cgroup.procs of
// each v1 hierarchy, the v2 group when CgroupFD was not used, or, in systemd
// scope mode, the transient scope created now with pid as its first member.
// It is a no-op in rlimit and none modes.
func (m *Manager) AddProcess(pid int) error {
	if pid <= 0 {
		return fmt.Errorf("add process: invalid pid %d", pid)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.destroyed {
		return ErrDestroyed
	}
	if m.b == nil {
		return nil
	}
	return m.b.add(pid)
}

// Rlimits returns the rlimits to set on every command of the sandbox. It
// always holds RLIMIT_CORE=0; in rlimit mode also RLIMIT_DATA (Memory) and
// RLIMIT_NPROC (Pids); RLIMIT_CPU whenever CPUTime is set. Apply them to the
// commands, not to the worker: it is a long-lived Go process whose threads
// and memory must not compete with the commands'.
func (m *Manager) Rlimits() []Rlimit {
	return append([]Rlimit(nil), m.rlimits...)
}

// Enforcement maps each requested limit ("memory", "pids", "cpu",
// "cputime", and "core") to the mechanism that enforces it, for the status.
func (m *Manager) Enforcement() map[string]string {
	out := make(map[string]string, len(m.enforcement))
	for k, v := range m.enforcement {
		out[k] = v
	}
	return out
}

// Events reads the kernel's counters. They count since New, for the whole
// group: to attribute an OOM kill to one command, compare the counters
// before and after it. After Destroy it returns the last values read before
// the group was removed. In rlimit and none modes (and before a systemd
// scope exists) it returns zeros: there is no counter to read, and nsbox
// never guesses an OOM.
func (m *Manager) Events() (Events, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.destroyed {
		return m.final, nil
	}
	if m.b == nil {
		return Events{}, nil
	}
	return m.b.events()
}

// Kill SIGKILLs every process in the sandbox's group(s) and waits briefly
// for them to be gone: cgroup.kill on v2; on v1, freeze (if the freezer is
// available), SIGKILL each member, thaw, until cgroup.procs is empty. It does
// not reap: the caller's exec.Cmd.Wait still gets the worker's status. A
// no-op in rlimit and none modes (the PID namespace ends with its PID 1).
func (m *Manager) Kill() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.b == nil || m.destroyed {
		return nil
	}
	return m.b.kill()
}

// Destroy kills what is left and removes the group(s) (and, in systemd
// scope mode, stops the scope). Idempotent: a second call returns nil. If it
// fails (a process that would not die within 5 s), the Manager stays usable
// and Destroy may be called again; CleanupStale of a later run is the last
// resort.
func (m *Manager) Destroy() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.destroyed {
		return nil
	}
	if m.b == nil {
		m.destroyed = true
		return nil
	}
	if ev, err := m.b.events(); err == nil {
		m.final = ev // the counters vanish with the group
	}
	if err := m.b.destroy(); err != nil {
		return err // not marked destroyed: a later call may finish the job
	}
	m.destroyed = true
	return nil
}

func validateID(id string) error {
	if len(id) > 64 {
		return fmt.Errorf("%w: %q is longer than 64 bytes", ErrInvalidID, id)
	}
	for _, c := range []byte(id) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-'
		if !ok {
			// The id becomes part of a directory and unit name: no '/', no
			// escapes, nothing systemd would mangle.
			return fmt.Errorf("%w: %q may only hold letters, digits, '_', '.' and '-'", ErrInvalidID, id)
		}
	}
	return nil
}

// groupName is "nsbox-<our pid>-<random>[-<id>]": CleanupStale reads the pid
// back to tell a dead supervisor's leftovers from a live one's groups.
func groupName(id string) (string, error) {
	var r [6]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", fmt.Errorf("cgroup name: %w", err)
	}
	n := "nsbox-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(r[:])
	if id != "" {
		n += "-" + id
	}
	return n, nil
}

// parseGroupName returns the supervisor pid in an nsbox group name.
func parseGroupName(name string) (pid int, sup bool, ok bool) {
	rest, found := strings.CutPrefix(name, "nsbox-")
	if !found {
		return 0, false, false
	}
	ps, tail, found := strings.Cut(rest, "-")
	if !found || tail == "" {
		return 0, false, false
	}
	n, err := strconv.Atoi(ps)
	if err != nil || n <= 0 || n > math.MaxInt32 || strconv.Itoa(n) != ps {
		return 0, false, false
	}
	if tail == "sup" {
		return n, true, true
	}
	// Exactly groupName's shape: 12 hex digits, then the end or "-ID". A
	// group of someone else's that merely starts with "nsbox-<digits>-"
	// (nsbox-99999-ci-build) is not ours, and is never killed.
	rnd, _, _ := strings.Cut(tail, "-")
	if len(rnd) != 12 || strings.Trim(rnd, "0123456789abcdef") != "" {
		return 0, false, false
	}
	return n, false, true
}

// joinPaths lists the files through which a process joins the group, one
// per hierarchy.
type joinLister interface {
	joinPaths() []string
}

// On v1 the join file is "tasks", not "cgroup.procs": "0" written to tasks
// moves only the writing thread, and the kernel then skips the
// cgroup-wide threadgroup lock, whose write side waits for an RCU grace
// period on every hierarchy not mounted with favordynmods. Measured on
// 6.18 here: 0.03 ms against 4-8 ms for cgroup.procs. The one writer is
// the limit shim, single-threaded before its execve, and execve leaves
// only the calling thread anyway: the command and all it forks are inside.
func (b *v1Backend) joinPaths() []string {
	var out []string
	for _, d := range b.dirList() {
		out = append(out, d+"/tasks")
	}
	return out
}

// v2 has no such shortcut (cgroup.threads takes threads only within a
// threaded subtree).
func (b *v2Backend) joinPaths() []string { return []string{b.dir + "/cgroup.procs"} }

// JoinFiles opens the group's join files (cgroup.procs on v2, tasks on
// v1) for writing (close-on-exec), one per hierarchy, so that a
// single-threaded process started elsewhere can move itself into the group
// by writing "0" to each. The kernel checks the permission against the
// credentials of the opener, not of the writer (since CVE-2021-4197), so
// the files can be handed to a less privileged process. It returns nil in
// modes without such files (rlimit, none, a systemd scope, which is joined
// with AddProcess instead).
func (m *Manager) JoinFiles() ([]*os.File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	jl, ok := m.b.(joinLister)
	if m.b == nil || !ok || m.destroyed {
		return nil, nil
	}
	var files []*os.File
	for _, p := range jl.joinPaths() {
		f, err := os.OpenFile(p, os.O_WRONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err != nil {
			for _, f := range files {
				f.Close()
			}
			return nil, &SetupError{Mode: m.det.Mode, Step: "open " + filepath.Base(p), Path: p, Err: err}
		}
		files = append(files, f)
	}
	return files, nil
}
