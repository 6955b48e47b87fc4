package cgroups

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Mode is the mechanism that enforces a sandbox's limits.
type Mode string

const (
	// ModeCgroup2: a cgroup v2 group of our own (root, or our own cgroup
	// namespace root, or a systemd system scope).
	ModeCgroup2 Mode = "cgroup2"
	// ModeCgroup2Delegated: root-less, in a cgroup v2 subtree delegated to
	// this uid (our own writable cgroup, or a systemd user scope with
	// Delegate=yes).
	ModeCgroup2Delegated Mode = "cgroup2-delegated"
	// ModeCgroup1: groups in the cgroup v1 hierarchies (hybrid and v1 hosts).
	ModeCgroup1 Mode = "cgroup1"
	// ModeRlimit: no usable cgroup; limits are per-process rlimits.
	ModeRlimit Mode = "rlimit"
	// ModeNone: no limit was requested (RLIMIT_CORE=0 still applies).
	ModeNone Mode = "none"
)

// Detection says which mode works for this uid on this host and, when it is
// not the best one, why and what to change.
type Detection struct {
	Mode    Mode
	Version string // "v2", "hybrid", "v1", or "" when no cgroupfs is mounted
	// Reason: why a better mode is not available ("" when Mode is the best
	// this host can offer to anyone).
	Reason string
	// Knob: the exact host setting or command that would enable a better
	// mode ("" when there is none).
	Knob string
}

// Controller names; also the keys of a plan's controller sets.
const (
	ctrlMemory  = "memory"
	ctrlPids    = "pids"
	ctrlCPU     = "cpu"
	ctrlFreezer = "freezer"
)

type v2Kind int

const (
	v2Direct   v2Kind = iota + 1 // create groups in base, whose subtree_control we may set
	v2Evacuate                   // move ourselves into base/nsbox-<pid>-sup first
	v2Systemd                    // transient scope with Delegate=yes over D-Bus
)

// v2Plan says how to get a cgroup v2 group.
type v2Plan struct {
	kind  v2Kind
	mount *mount
	self  string   // our current cgroup directory
	base  string   // the directory our groups are created in (direct/evacuate)
	ctrls []string // needed controllers that will be available in the group
	bus   busInfo  // systemd only
}

// plan is what New will do, computed without side effects.
type plan struct {
	det Detection
	v2  *v2Plan
	// v1: controller -> directory of our current group in that hierarchy,
	// for the hierarchies we can create groups in.
	v1 map[string]string
	// v1Cg: controller -> our cgroup path as /proc/self/cgroup shows it.
	v1Cg map[string]string
}

// enforced reports whether controller c will be enforced by a cgroup.
func (p *plan) enforced(c string) bool {
	switch p.det.Mode {
	case ModeCgroup2, ModeCgroup2Delegated:
		return contains(p.v2.ctrls, c)
	case ModeCgroup1:
		_, ok := p.v1[c]
		return ok
	}
	return false
}

// Detect reports the mode New would use for memory, pids and cpu limits,
// for this uid on this host. It only reads /proc and cgroupfs: no side
// effect, no D-Bus call (a systemd manager counts as usable when its socket
// exists).
func Detect() Detection {
	return makePlan([]string{ctrlMemory, ctrlPids, ctrlCPU}).det
}

// supName is the leaf a supervisor moves itself into (v2Evacuate).
func supName(pid int) string { return "nsbox-" + strconv.Itoa(pid) + "-sup" }

func makePlan(need []string) *plan {
	h := getMounts()
	p := &plan{det: Detection{Version: h.version}}
	if len(need) == 0 {
		p.det.Mode = ModeRlimit
		return p
	}
	pc, err := readProcCgroups("self")
	if err != nil {
		p.det.Mode = ModeRlimit
		p.det.Reason = "cannot read /proc/self/cgroup: " + err.Error()
		p.det.Knob = "mount /proc"
		return p
	}
	if h.version == "" {
		p.det.Mode = ModeRlimit
		p.det.Reason = "no cgroup filesystem is mounted"
		p.det.Knob = "mount -t cgroup2 none /sys/fs/cgroup"
		return p
	}
	uid := os.Geteuid()
	v2, v2Reason, v2Knob := planV2(h, pc, need, uid)
	if v2 != nil {
		p.v2 = v2
		p.det.Mode = ModeCgroup2Delegated
		if uid == 0 {
			p.det.Mode = ModeCgroup2
		}
		p.det.Reason, p.det.Knob = v2Reason, v2Knob // e.g. a controller not delegated
		return p
	}
	v1, v1Cg, v1Reason := planV1(h, pc, need, uid)
	if len(v1) > 0 {
		p.v1, p.v1Cg = v1, v1Cg
		p.det.Mode = ModeCgroup1
		p.det.Reason, p.det.Knob = v2Reason, v2Knob
		if v1Reason != "" {
			p.det.Reason = joinReason(p.det.Reason, v1Reason)
		}
		return p
	}
	p.det.Mode = ModeRlimit
	p.det.Reason = joinReason(v2Reason, v1Reason)
	p.det.Knob = v2Knob
	if p.det.Knob != "" && uid != 0 {
		p.det.Knob += ", with cgroup delegation for users (systemd: Delegate=yes on user@.service); or run nsbox as root"
	}
	if p.det.Knob == "" {
		p.det.Knob = "run nsbox as root, or boot with cgroup v2 (systemd.unified_cgroup_hierarchy=1) and delegation (systemd: Delegate=yes on user@.service)"
	}
	return p
}

func joinReason(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

// planV2 finds a cgroup v2 directory we may create groups in. It returns a
// nil plan and the reason when there is none; with a plan, reason/knob
// describe controllers that are missing.
func planV2(h hostMounts, pc procCgroups, need []string, uid int) (*v2Plan, string, string) {
	if h.v2 == nil {
		return nil, "", ""
	}
	rootCtrls := readFields(filepath.Join(h.v2.point, "cgroup.controllers"))
	if len(intersect(need, rootCtrls)) == 0 {
		return nil, fmt.Sprintf("the cgroup v2 hierarchy (%s) has no memory, pids or cpu controller (on this %s host they are on cgroup v1)", h.v2.point, hostKind(h)),
			"boot the kernel with systemd.unified_cgroup_hierarchy=1 (or cgroup_no_v1=all) to use cgroup v2"
	}
	self, ok := hostDir(h.v2, pc.v2)
	if !ok {
		return nil, fmt.Sprintf("this process's cgroup %q is outside the mounted cgroup v2 tree %s", pc.v2, h.v2.point),
			"mount the cgroup2 filesystem of this cgroup namespace on /sys/fs/cgroup"
	}
	base, evacuated := self, false
	if filepath.Base(self) == supName(os.Getpid()) {
		// We moved ourselves into our own leaf earlier (v2Evacuate): our
		// groups go beside it.
		base, evacuated = filepath.Dir(self), true
	}
	avail := readFields(filepath.Join(base, "cgroup.controllers"))
	ctrls := intersect(need, avail)
	missing := minus(need, ctrls)
	if len(ctrls) > 0 && canWrite(base, true) {
		sub := readFields(filepath.Join(base, "cgroup.subtree_control"))
		_, typeErr := os.Stat(filepath.Join(base, "cgroup.type"))
		realRoot := os.IsNotExist(typeErr) // the true root has no cgroup.type and no internal-process rule
		kind := v2Kind(0)
		switch {
		case len(minus(ctrls, sub)) == 0:
			kind = v2Direct
		case (realRoot || evacuated) && canWrite(filepath.Join(base, "cgroup.subtree_control"), false):
			kind = v2Direct
		case !evacuated && onlyUs(self) && cgroupType(self) == "domain" &&
			canWrite(filepath.Join(self, "cgroup.procs"), false) &&
			canWrite(filepath.Join(self, "cgroup.subtree_control"), false):
			// Our cgroup is ours alone: controllers can be enabled in it once
			// we have moved into a leaf of our own (no-internal-process rule).
			kind = v2Evacuate
		}
		if kind != 0 {
			r, k := missingReason(missing, base, uid)
			return &v2Plan{kind: kind, mount: h.v2, self: self, base: base, ctrls: ctrls}, r, k
		}
	}
	why := fmt.Sprintf("cgroup v2: this process's cgroup %s is not delegated to uid %d (not writable, or shared with other processes)", self, uid)
	if len(ctrls) == 0 {
		why = fmt.Sprintf("cgroup v2: no memory, pids or cpu controller is enabled for this process's cgroup %s", self)
	}
	if bus, ok := findSystemd(uid); ok {
		sctrls := intersect(need, systemdControllers(h, uid, rootCtrls))
		if len(sctrls) > 0 {
			r, k := missingReason(minus(need, sctrls), "the systemd scope", uid)
			return &v2Plan{kind: v2Systemd, mount: h.v2, self: self, ctrls: sctrls, bus: bus}, r, k
		}
	}
	if uid == 0 {
		return nil, why + " and systemd is not running",
			"run nsbox as the only process of its cgroup (for example as a container's init), or under systemd"
	}
	return nil, why + " and no systemd user manager was found",
		"systemd-run --user --scope -p Delegate=yes nsbox ..., or enable delegation: systemctl edit user@.service → [Service] Delegate=memory pids cpu"
}

func missingReason(missing []string, where string, uid int) (string, string) {
	if len(missing) == 0 {
		return "", ""
	}
	r := fmt.Sprintf("controller(s) %s not available in %s for uid %d: those limits fall back to rlimits or are not enforced",
		strings.Join(missing, ", "), where, uid)
	return r, "enable delegation of " + strings.Join(missing, " ") + ": systemctl edit user@.service → [Service] Delegate=memory pids cpu (then log in again)"
}

func hostKind(h hostMounts) string {
	if h.version == "" {
		return "cgroup-less"
	}
	return h.version
}

// onlyUs reports whether dir's cgroup.procs lists this process and no other.
func onlyUs(dir string) bool {
	procs := readFields(filepath.Join(dir, "cgroup.procs"))
	return len(procs) == 1 && procs[0] == strconv.Itoa(os.Getpid())
}

func cgroupType(dir string) string {
	f := readFields(filepath.Join(dir, "cgroup.type"))
	if len(f) == 0 {
		return ""
	}
	return strings.Join(f, " ")
}

// planV1 returns, per controller, the current group's directory in the
// hierarchies where we can create groups.
func planV1(h hostMounts, pc procCgroups, need []string, uid int) (map[string]string, map[string]string, string) {
	dirs, cgs := map[string]string{}, map[string]string{}
	var notWritable, absent []string
	for _, c := range need {
		m := h.v1[c]
		if m == nil {
			absent = append(absent, c)
			continue
		}
		dir, ok := hostDir(m, pc.v1[c])
		if !ok {
			absent = append(absent, c)
			continue
		}
		if !canWrite(dir, true) {
			notWritable = append(notWritable, dir)
			continue
		}
		dirs[c], cgs[c] = dir, pc.v1[c]
	}
	if len(dirs) > 0 {
		// The freezer makes Kill race-free; optional.
		if m := h.v1[ctrlFreezer]; m != nil {
			if dir, ok := hostDir(m, pc.v1[ctrlFreezer]); ok && canWrite(dir, true) {
				dirs[ctrlFreezer], cgs[ctrlFreezer] = dir, pc.v1[ctrlFreezer]
			}
		}
	}
	var r []string
	if len(notWritable) > 0 {
		r = append(r, fmt.Sprintf("cgroup v1 group(s) %s not writable by uid %d (cgroup v1 has no safe delegation to users)", strings.Join(notWritable, ", "), uid))
	}
	if len(absent) > 0 && h.version != "v2" {
		r = append(r, fmt.Sprintf("cgroup v1 controller(s) %s not mounted", strings.Join(absent, ", ")))
	}
	return dirs, cgs, strings.Join(r, "; ")
}

func intersect(a, b []string) []string {
	var out []string
	for _, x := range a {
		if contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

func minus(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}
