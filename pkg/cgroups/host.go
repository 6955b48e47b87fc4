package cgroups

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// mount is one cgroup filesystem from /proc/self/mountinfo.
type mount struct {
	point string // where it is mounted
	root  string // the cgroup path (in our cgroup namespace) mounted there
}

// hostMounts is what the host offers, read once per process: cgroup mounts
// do not move under a running supervisor, and reading mountinfo on every
// sandbox start would be a measurable part of the cold start.
type hostMounts struct {
	v2      *mount            // the cgroup2 mount, nil if none
	v1      map[string]*mount // v1 controller name ("memory", "pids", "cpu", "freezer") -> its mount
	version string            // "v2", "hybrid", "v1" or "" (no cgroupfs)
}

var (
	mountsOnce sync.Once
	mountsVal  hostMounts
)

func getMounts() hostMounts {
	mountsOnce.Do(func() {
		data, err := os.ReadFile("/proc/self/mountinfo")
		if err == nil {
			mountsVal = parseMountinfo(data)
		} else {
			mountsVal = hostMounts{v1: map[string]*mount{}}
		}
	})
	return mountsVal
}

// v1Controllers are the v1 hierarchies nsbox uses.
var v1Controllers = []string{"memory", "pids", "cpu", "freezer"}

func parseMountinfo(data []byte) hostMounts {
	h := hostMounts{v1: map[string]*mount{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		// id parent maj:min root mountpoint opts [optional...] - fstype source superopts
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 {
			continue
		}
		m := &mount{point: unescapeMount(f[4]), root: unescapeMount(f[3])}
		switch g[0] {
		case "cgroup2":
			// Prefer /sys/fs/cgroup (pure v2) or .../unified (hybrid) if
			// mounted twice; the first one otherwise.
			if h.v2 == nil || m.point == "/sys/fs/cgroup" {
				h.v2 = m
			}
		case "cgroup":
			for _, opt := range strings.Split(g[2], ",") {
				for _, c := range v1Controllers {
					if opt == c && h.v1[c] == nil {
						h.v1[c] = m
					}
				}
			}
		}
	}
	switch {
	case h.v2 != nil && len(h.v1) == 0:
		h.version = "v2"
	case h.v2 != nil:
		h.version = "hybrid"
	case len(h.v1) > 0:
		h.version = "v1"
	}
	return h
}

// unescapeMount undoes mountinfo's octal escapes (\040 for space...).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// procCgroups is /proc/<pid>/cgroup: v1 controller -> path, and the v2 path.
type procCgroups struct {
	v1 map[string]string
	v2 string // "" when the process has no v2 entry
}

func readProcCgroups(pid string) (procCgroups, error) {
	data, err := os.ReadFile("/proc/" + pid + "/cgroup")
	if err != nil {
		return procCgroups{}, err
	}
	return parseProcCgroups(data), nil
}

func parseProcCgroups(data []byte) procCgroups {
	pc := procCgroups{v1: map[string]string{}}
	for _, line := range strings.Split(string(data), "\n") {
		id, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		ctrls, path, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		if id == "0" && ctrls == "" {
			pc.v2 = path
			continue
		}
		for _, c := range strings.Split(ctrls, ",") {
			pc.v1[c] = path
		}
	}
	return pc
}

// hostDir maps a cgroup path as /proc/self/cgroup shows it onto the
// directory under m. ok is false when the path lies outside what m shows
// (another cgroup namespace, "/.." paths).
func hostDir(m *mount, cgPath string) (string, bool) {
	if m == nil || cgPath == "" || !strings.HasPrefix(cgPath, "/") {
		return "", false
	}
	rel, err := filepath.Rel(m.root, cgPath)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	return filepath.Join(m.point, rel), true
}

// canWrite reports whether this process (effective ids) may write path;
// for a directory that means creating entries in it.
func canWrite(path string, dir bool) bool {
	mode := uint32(unix.W_OK)
	if dir {
		mode |= unix.X_OK
	}
	return unix.Faccessat(unix.AT_FDCWD, path, mode, unix.AT_EACCESS) == nil
}

func readFields(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	return strings.Fields(string(b))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// readKey reads "key value" lines (memory.events, pids.events,
// memory.oom_control, cpu.stat) and returns the value of key.
func readKey(path, key string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if ok && k == key {
			return strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, nil
}
