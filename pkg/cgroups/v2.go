package cgroups

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/containerd/cgroups/v3/cgroup2"
	"golang.org/x/sys/unix"
)

// v2Backend is one group in the unified hierarchy.
type v2Backend struct {
	mode  Mode
	lock  int    // holdGroup fd of dir, until destroy (-1: none)
	dir   string // our group's directory
	cg    string // its path as /proc/<pid>/cgroup shows it
	mgr   *cgroup2.Manager
	fdv   int  // O_PATH fd of dir, -1 when closed
	swap  bool // memory.swap.max was set to 0
	owned bool // we created dir (not systemd): we rmdir it
	gone  bool
}

func v2Mode() Mode {
	if os.Geteuid() == 0 {
		return ModeCgroup2
	}
	return ModeCgroup2Delegated
}

func newV2(name string, p *v2Plan, l Limits) (_ *v2Backend, err error) {
	mode := v2Mode()
	if p.kind == v2Evacuate {
		if err := evacuate(p); err != nil {
			return nil, &SetupError{Mode: mode, Step: "move supervisor into its own leaf", Path: p.self, Err: err}
		}
	}
	// Enable only the controllers still missing, only in base: base is the
	// true root, our own (now empty) cgroup, or our delegated parent; no
	// other cgroup on the host is touched.
	sub := readFields(filepath.Join(p.base, "cgroup.subtree_control"))
	if add := minus(p.ctrls, sub); len(add) > 0 {
		if err := writeFile(filepath.Join(p.base, "cgroup.subtree_control"), "+"+strings.Join(add, " +")); err != nil {
			return nil, &SetupError{Mode: mode, Step: "enable controllers " + strings.Join(add, ","), Path: p.base, Err: err}
		}
	}
	dir := filepath.Join(p.base, name)
	// Mkdir, not MkdirAll: the group must be new, ours alone.
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, &SetupError{Mode: mode, Step: "mkdir", Path: dir, Err: err}
	}
	b := &v2Backend{mode: mode, dir: dir, fdv: -1, owned: true, lock: -1}
	defer func() {
		if err != nil {
			_ = b.destroy() // never leave a half-made group behind
			releaseGroups([]int{b.lock})
		}
	}()
	if b.lock, err = holdGroup(dir); err != nil {
		return nil, &SetupError{Mode: mode, Step: "lock", Path: dir, Err: err}
	}
	if err := b.attach(p.mount); err != nil {
		return nil, err
	}
	res := &cgroup2.Resources{}
	if contains(p.ctrls, ctrlMemory) && l.Memory > 0 {
		mem := l.Memory
		res.Memory = &cgroup2.Memory{Max: &mem}
		if _, err := os.Stat(filepath.Join(dir, "memory.swap.max")); err == nil {
			zero := int64(0) // no swap on top of the limit (only when swap accounting exists)
			res.Memory.Swap = &zero
			b.swap = true
		}
	}
	if contains(p.ctrls, ctrlPids) && l.Pids > 0 {
		res.Pids = &cgroup2.Pids{Max: l.Pids}
	}
	if contains(p.ctrls, ctrlCPU) && l.CPU > 0 {
		q, per := l.cpuQuota(), uint64(cpuPeriod)
		res.CPU = &cgroup2.CPU{Max: cgroup2.NewCPUMax(&q, &per)}
	}
	if err := b.mgr.Update(res); err != nil {
		return nil, &SetupError{Mode: mode, Step: "apply limits", Path: dir, Err: err}
	}
	return b, nil
}

// attach opens the group's fd and the library manager for b.dir.
func (b *v2Backend) attach(m *mount) error {
	rel, err := filepath.Rel(m.point, b.dir)
	if err != nil || strings.HasPrefix(rel, "..") {
		return &SetupError{Mode: b.mode, Step: "locate group", Path: b.dir, Err: errors.New("not under the cgroup2 mount")}
	}
	b.cg = filepath.Join(m.root, rel)
	mgr, err := cgroup2.Load("/"+rel, cgroup2.WithMountpoint(m.point))
	if err != nil {
		return &SetupError{Mode: b.mode, Step: "load group", Path: b.dir, Err: err}
	}
	b.mgr = mgr
	fd, err := unix.Open(b.dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &SetupError{Mode: b.mode, Step: "open group", Path: b.dir, Err: err}
	}
	b.fdv = fd
	return nil
}

// evacuate moves this process (all its threads) from p.self into the leaf
// p.self/nsbox-<pid>-sup, so that p.self holds no process and may enable
// controllers for its children (no-internal-process rule). Only done when
// p.self holds no process but ours (planV2 checked): nobody else is moved.
// The leaf stays while we live; CleanupStale removes it after we die.
func evacuate(p *v2Plan) error {
	leaf := filepath.Join(p.self, supName(os.Getpid()))
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	if err := writeFile(filepath.Join(leaf, "cgroup.procs"), strconv.Itoa(os.Getpid())); err != nil {
		_ = unix.Rmdir(leaf)
		return err
	}
	return nil
}

func (b *v2Backend) fd() (int, bool) {
	if b.gone || b.fdv < 0 {
		return -1, false
	}
	return b.fdv, true
}

func (b *v2Backend) add(pid int) error {
	if b.gone {
		return ErrDestroyed
	}
	if err := b.mgr.AddProc(uint64(pid)); err != nil {
		return &SetupError{Mode: b.mode, Step: "add process", Path: b.dir, Err: err}
	}
	return nil
}

func (b *v2Backend) events() (Events, error) {
	var ev Events
	var e1, e2 error
	if _, err := os.Stat(filepath.Join(b.dir, "memory.events")); err == nil {
		ev.OOMKills, e1 = readKey(filepath.Join(b.dir, "memory.events"), "oom_kill")
	}
	if _, err := os.Stat(filepath.Join(b.dir, "pids.events")); err == nil {
		ev.PidsMax, e2 = readKey(filepath.Join(b.dir, "pids.events"), "max")
	}
	return ev, errors.Join(e1, e2)
}

func (b *v2Backend) kill() error {
	if b.gone {
		return nil
	}
	// cgroup.kill (Linux 5.14+) kills the whole subtree atomically, forks
	// in flight included.
	err := writeFile(filepath.Join(b.dir, "cgroup.kill"), "1")
	if err == nil {
		err = waitEmpty([]string{b.dir})
	} else if errors.Is(err, os.ErrNotExist) {
		err = killLoop([]string{b.dir}, inGroup("", b.cg), b.freezer())
	}
	if err != nil {
		return &CleanupError{Path: b.dir, Err: err}
	}
	return nil
}

// freezer uses cgroup.freeze (5.2+) for the kill loop of old kernels.
func (b *v2Backend) freezer() func(bool) error {
	if _, err := os.Stat(filepath.Join(b.dir, "cgroup.freeze")); err != nil {
		return nil
	}
	return func(frozen bool) error {
		v := "0"
		if frozen {
			v = "1"
		}
		return writeFile(filepath.Join(b.dir, "cgroup.freeze"), v)
	}
}

func (b *v2Backend) destroy() error {
	if b.gone {
		return nil
	}
	if err := b.kill(); err != nil {
		return err
	}
	if b.owned {
		if err := removeTree(b.dir); err != nil {
			return err
		}
	}
	if b.fdv >= 0 {
		_ = unix.Close(b.fdv)
		b.fdv = -1
	}
	releaseGroups([]int{b.lock})
	b.lock = -1
	b.gone = true
	return nil
}
