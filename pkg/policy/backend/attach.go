package backend

import (
	"bufio"
	"bytes"
	"os"
	"strings"

	"github.com/nsbox/nsbox/pkg/cgroups"
)

// checkCgroupAttach says whether moving a command into its limited group
// will be fast. On cgroup v2 every command under limits joins its group by
// a write to cgroup.procs; the kernel then takes the cgroup-wide
// threadgroup lock for writing, which waits for an RCU grace period unless
// the hierarchy favours dynamic modifications (kernel commit 6a010a49,
// Documentation/admin-guide/cgroup-v2.rst "favordynmods"). Measured on v1
// here: 0.5-11 ms per command. Nothing fails without it; it is a host knob
// that nsbox must not change, so status names it. On v1 commands join
// through the tasks files instead (cgroups.Manager.JoinFiles): a process
// moving its one thread, which the kernel does without that lock since
// 5.2 ("cgroup: Optimize single thread migration"; 0.03 ms measured here
// on 6.18).
func checkCgroupAttach(mode cgroups.Mode) Check {
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	cmdline, _ := os.ReadFile("/proc/cmdline")
	major, minor, _ := kernelVersion()
	return cgroupAttach(mode, mi, string(cmdline), major, minor)
}

// cgroupAttach is checkCgroupAttach on given mountinfo and kernel command
// line contents and kernel version.
func cgroupAttach(mode cgroups.Mode, mountinfo []byte, cmdline string, major, minor int) Check {
	c := Check{Name: "cgroup attach", OK: true}
	var want []string // the hierarchies commands are moved into
	switch mode {
	case cgroups.ModeCgroup1:
		if major > 5 || (major == 5 && minor >= 2) {
			c.Value = "fast"
			c.Detail = "commands join their v1 groups through the tasks files: a move of one thread, which this kernel makes without the cgroup-wide lock"
			return c
		}
		want = []string{"memory", "pids", "cpu"}
	case cgroups.ModeCgroup2, cgroups.ModeCgroup2Delegated:
		want = []string{""} // the unified hierarchy
	default:
		c.Value = "not used"
		c.Detail = "limits are not cgroups here (" + string(mode) + "): no command is moved into a group"
		return c
	}
	for _, arg := range strings.Fields(cmdline) {
		if v, ok := strings.CutPrefix(arg, "cgroup_favordynmods="); ok {
			if on, known := boolArg(v); known {
				if on {
					c.Value = "fast"
					c.Detail = "the kernel command line sets cgroup_favordynmods=" + v + ": moving a command into its group does not wait for an RCU grace period"
					return c
				}
				break // explicitly off: the mount options cannot turn it on
			}
		}
	}
	var slow, fast []string
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	for sc.Scan() {
		fstype, mp, opts, ok := mountinfoFS(sc.Text())
		if !ok || (fstype != "cgroup" && fstype != "cgroup2") {
			continue
		}
		if !usedHierarchy(fstype, opts, want) {
			continue
		}
		if hasOpt(opts, "favordynmods") {
			fast = append(fast, mp)
		} else {
			slow = append(slow, mp)
		}
	}
	switch {
	case len(slow) == 0 && len(fast) > 0:
		c.Value = "fast"
		c.Detail = "mounted with favordynmods: " + strings.Join(fast, ", ")
	case len(slow) == 0:
		c.Value = "unknown"
		c.Detail = "no cgroup hierarchy of the " + string(mode) + " mode found in /proc/self/mountinfo"
	default:
		c.Value = "slow"
		c.Detail = "each command under cgroup limits waits for an RCU grace period when it joins its group (0.5-11 ms per command on the machine nsbox is tested on): " + strings.Join(slow, ", ") + " not mounted with favordynmods"
		switch {
		case mode == cgroups.ModeCgroup1:
			c.Fix = "a kernel of 5.2 or later, where a command's join through tasks takes no cgroup-wide lock"
		default:
			c.Fix = "mount -o remount,favordynmods " + slow[0] + " (kernel 6.0 or later), or boot with cgroup_favordynmods=true (6.7 or later)"
		}
	}
	return c
}

// mountinfoFS returns the file system type, mount point and super options
// of one /proc/self/mountinfo line (proc(5): the fields after " - ").
func mountinfoFS(line string) (fstype, mountpoint, superOpts string, ok bool) {
	pre, post, found := strings.Cut(line, " - ")
	if !found {
		return "", "", "", false
	}
	f := strings.Fields(pre)
	g := strings.Fields(post)
	if len(f) < 5 || len(g) < 3 {
		return "", "", "", false
	}
	return g[0], unescape(f[4]), g[2], true
}

// usedHierarchy reports whether a cgroup mount is one that commands are
// moved into: the unified one for v2 modes, a v1 hierarchy holding one of
// the limited controllers otherwise.
func usedHierarchy(fstype, opts string, want []string) bool {
	for _, w := range want {
		if w == "" && fstype == "cgroup2" {
			return true
		}
		if w != "" && fstype == "cgroup" && hasOpt(opts, w) {
			return true
		}
	}
	return false
}

func hasOpt(opts, name string) bool {
	for _, o := range strings.Split(opts, ",") {
		if o == name {
			return true
		}
	}
	return false
}

// boolArg reads a kernel boolean parameter as kstrtobool does (1/0, y/n,
// on/off, true/false).
func boolArg(v string) (on, known bool) {
	switch strings.ToLower(v) {
	case "1", "y", "yes", "on", "true":
		return true, true
	case "0", "n", "no", "off", "false":
		return false, true
	}
	return false, false
}
