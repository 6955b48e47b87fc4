package cgroups

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/containerd/cgroups/v3/cgroup1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// v1Backend is one group per used hierarchy (memory, pids, cpu, freezer),
// each created under the caller's current group in that hierarchy.
type v1Backend struct {
	cg    cgroup1.Cgroup
	dirs  map[string]string // controller -> our group's directory
	cgs   map[string]string // controller -> our group's path in /proc/<pid>/cgroup
	memsw bool              // memory.memsw.limit_in_bytes was set (swap accounting exists)
	order []string          // controllers in creation order (removal goes backwards)
	locks []int             // holdGroup fds, one per directory, until destroy
	gone  bool
}

func newV1(name string, p *plan, l Limits) (_ *v1Backend, err error) {
	b := &v1Backend{dirs: map[string]string{}, cgs: map[string]string{}}
	defer func() {
		if err != nil {
			b.removeDirs() // never leave a half-made group behind
			releaseGroups(b.locks)
		}
	}()
	var subs []cgroup1.Subsystem
	rel := map[cgroup1.Name]string{}
	for _, c := range v1Controllers {
		parent, ok := p.v1[c]
		if !ok {
			continue
		}
		dir := filepath.Join(parent, name)
		// Mkdir, not MkdirAll: the group must be new, so it is ours alone
		// and nothing foreign is inside it.
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, &SetupError{Mode: ModeCgroup1, Step: "mkdir", Path: dir, Err: err}
		}
		b.dirs[c], b.cgs[c] = dir, filepath.Join(p.v1Cg[c], name)
		b.order = append(b.order, c)
		lock, err := holdGroup(dir)
		if err != nil {
			return nil, &SetupError{Mode: ModeCgroup1, Step: "lock", Path: dir, Err: err}
		}
		b.locks = append(b.locks, lock)
		// The library's controllers live at <root>/<name>; the hierarchy may
		// be mounted elsewhere (e.g. "cpu,cpuacct"), so the path handed to it
		// is relative to that nominal place and lands on our real directory.
		mp := getMounts().v1[c].point
		root := filepath.Dir(mp)
		r, _ := filepath.Rel(filepath.Join(root, c), dir)
		rel[cgroup1.Name(c)] = r
		switch c {
		case ctrlMemory:
			subs = append(subs, cgroup1.NewMemory(root, cgroup1.OptionalSwap()))
		case ctrlPids:
			subs = append(subs, cgroup1.NewPids(root))
		case ctrlCPU:
			subs = append(subs, cgroup1.NewCpu(root))
		case ctrlFreezer:
			subs = append(subs, cgroup1.NewFreezer(root))
		}
	}
	if d, ok := b.dirs[ctrlMemory]; ok {
		// Hierarchical accounting, so that a group created below ours is
		// charged to our limit (always on since Linux 5.x; older kernels
		// default to 0 where the parent has 0).
		if strings.TrimSpace(readString(filepath.Join(d, "memory.use_hierarchy"))) == "0" {
			if err := writeFile(filepath.Join(d, "memory.use_hierarchy"), "1"); err != nil {
				return nil, &SetupError{Mode: ModeCgroup1, Step: "memory.use_hierarchy", Path: d, Err: err}
			}
		}
		_, serr := os.Stat(filepath.Join(d, "memory.memsw.limit_in_bytes"))
		b.memsw = serr == nil
	}
	res := &specs.LinuxResources{}
	if _, ok := b.dirs[ctrlMemory]; ok && l.Memory > 0 {
		mem := l.Memory
		res.Memory = &specs.LinuxMemory{Limit: &mem}
		if b.memsw {
			// memory+swap = memory: no swap on top of the limit. Only when
			// swap accounting exists (the file is absent otherwise).
			sw := l.Memory
			res.Memory.Swap = &sw
		}
	}
	if _, ok := b.dirs[ctrlPids]; ok && l.Pids > 0 {
		n := l.Pids
		res.Pids = &specs.LinuxPids{Limit: &n}
	}
	if _, ok := b.dirs[ctrlCPU]; ok && l.CPU > 0 {
		q, per := l.cpuQuota(), uint64(cpuPeriod)
		res.CPU = &specs.LinuxCPU{Quota: &q, Period: &per}
	}
	path := func(n cgroup1.Name) (string, error) {
		r, ok := rel[n]
		if !ok {
			return "", cgroup1.ErrControllerNotActive
		}
		return r, nil
	}
	cg, err := cgroup1.New(path, res, cgroup1.WithHierarchy(func() ([]cgroup1.Subsystem, error) { return subs, nil }))
	if err != nil {
		return nil, &SetupError{Mode: ModeCgroup1, Step: "apply limits", Path: strings.Join(b.dirList(), ", "), Err: err}
	}
	b.cg = cg
	return b, nil
}

func readString(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return string(b)
}

func (b *v1Backend) dirList() []string {
	var out []string
	for _, c := range b.order {
		out = append(out, b.dirs[c])
	}
	return out
}

func (b *v1Backend) fd() (int, bool) { return -1, false }

func (b *v1Backend) add(pid int) error {
	if b.gone {
		return ErrDestroyed
	}
	if err := b.cg.AddProc(uint64(pid)); err != nil {
		return &SetupError{Mode: ModeCgroup1, Step: "add process", Path: strings.Join(b.dirList(), ", "), Err: err}
	}
	return nil
}

func (b *v1Backend) events() (Events, error) {
	var ev Events
	var errs []error
	if d, ok := b.dirs[ctrlMemory]; ok {
		n, err := readKey(filepath.Join(d, "memory.oom_control"), "oom_kill")
		ev.OOMKills, errs = n, append(errs, err)
	}
	if d, ok := b.dirs[ctrlPids]; ok {
		n, err := readKey(filepath.Join(d, "pids.events"), "max")
		ev.PidsMax, errs = n, append(errs, err)
	}
	return ev, errors.Join(errs...)
}

// member checks membership in the first hierarchy we use.
func (b *v1Backend) member() member {
	c := b.order[0]
	return inGroup(c, b.cgs[c])
}

func (b *v1Backend) freezer() func(bool) error {
	d, ok := b.dirs[ctrlFreezer]
	if !ok {
		return nil
	}
	return func(frozen bool) error {
		state := "THAWED"
		if frozen {
			state = "FROZEN"
		}
		if err := writeFile(filepath.Join(d, "freezer.state"), state); err != nil {
			return err
		}
		for i := 0; i < 100; i++ { // FREEZING -> FROZEN takes a moment
			if strings.TrimSpace(readString(filepath.Join(d, "freezer.state"))) == state {
				return nil
			}
			time.Sleep(100 * time.Microsecond)
		}
		return errors.New("freezer did not reach " + state)
	}
}

func (b *v1Backend) kill() error {
	if b.gone {
		return nil
	}
	// Every hierarchy is scanned: a process added to only some of them (an
	// AddProcess that failed half way) is ours too.
	if err := killLoop(b.dirList(), b.member(), b.freezer()); err != nil {
		return &CleanupError{Path: strings.Join(b.dirList(), ", "), Err: err}
	}
	return nil
}

func (b *v1Backend) destroy() error {
	if b.gone {
		return nil
	}
	if err := b.kill(); err != nil {
		return err
	}
	if err := b.removeDirs(); err != nil {
		return err
	}
	releaseGroups(b.locks)
	b.locks = nil
	b.gone = true
	return nil
}

func (b *v1Backend) removeDirs() error {
	var errs []error
	for i := len(b.order) - 1; i >= 0; i-- {
		if err := removeTree(b.dirs[b.order[i]]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
