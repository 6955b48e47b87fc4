package cgroups

import (
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Limits for one sandbox. The zero value asks for no limit at all.
type Limits struct {
	// Memory in bytes, 0 = none. It covers everything in the sandbox's
	// cgroup: the commands (pkg/sandbox keeps its worker outside the
	// group), and in systemd scope mode, which can only be made around a
	// process, the worker too (a Go process of about 10 MiB resident).
	// Swap is not granted on top of it (memory.swap.max=0 / memsw = limit).
	// In rlimit mode it becomes RLIMIT_DATA of each command (private writable memory).
	Memory int64
	// Pids: maximum number of tasks (processes and threads) in the sandbox,
	// 0 = none. The worker's threads count where the worker is in the
	// group (systemd scope mode) and in rlimit mode. In rlimit mode it
	// becomes RLIMIT_NPROC, which the kernel counts per user (per uid in
	// the sandbox's user namespace), not per sandbox.
	Pids int64
	// CPU bandwidth in CPUs, e.g. 0.5 = half of one CPU, 2 = two CPUs;
	// 0 = none. Only a cgroup can enforce it (cpu.max / cfs_quota_us).
	CPU float64
	// CPUTime: total CPU time of each command (RLIMIT_CPU, whole seconds,
	// rounded up), 0 = none. An rlimit in every mode: cgroups have no such
	// limit.
	CPUTime time.Duration
}

const (
	// MinMemory is the smallest memory limit accepted: room for a small
	// command, and for the worker (a Go process of about 10 MiB resident)
	// where it runs inside the limit (systemd scope mode).
	MinMemory int64 = 32 << 20
	// MinPids is the smallest pids limit accepted: a shell pipeline needs a
	// few tasks, and where the worker counts (systemd scope mode, rlimits)
	// its Go runtime's threads are tasks too.
	MinPids int64 = 16
	// MinCPU is the smallest CPU bandwidth accepted (1 ms of CPU per 100 ms
	// period, the kernel's minimum quota).
	MinCPU = 0.01
	// cpuPeriod is the CFS period used for cpu.max / cfs_period_us, in µs.
	cpuPeriod = 100000
)

// IsZero reports whether no limit at all is requested.
func (l Limits) IsZero() bool {
	return l.Memory == 0 && l.Pids == 0 && l.CPU == 0 && l.CPUTime == 0
}

// Validate checks every field and returns a *LimitError (errors.Is
// ErrInvalidLimit) for the first one out of range.
func (l Limits) Validate() error {
	switch {
	case l.Memory < 0:
		return &LimitError{Field: "memory", Value: strconv.FormatInt(l.Memory, 10),
			Msg: "must not be negative (0 means no memory limit)"}
	case l.Memory > 0 && l.Memory < MinMemory:
		return &LimitError{Field: "memory", Value: formatSize(l.Memory),
			Msg: fmt.Sprintf("must be at least %s: the nsbox worker (about 10 MiB) runs inside the limit", formatSize(MinMemory))}
	}
	switch {
	case l.Pids < 0:
		return &LimitError{Field: "pids", Value: strconv.FormatInt(l.Pids, 10),
			Msg: "must not be negative (0 means no pids limit)"}
	case l.Pids > 0 && l.Pids < MinPids:
		return &LimitError{Field: "pids", Value: strconv.FormatInt(l.Pids, 10),
			Msg: fmt.Sprintf("must be at least %d: the nsbox worker's threads count as tasks too", MinPids)}
	case l.Pids > math.MaxInt32:
		return &LimitError{Field: "pids", Value: strconv.FormatInt(l.Pids, 10),
			Msg: "is larger than any kernel accepts; use 0 for no limit"}
	}
	ncpu := runtime.NumCPU()
	switch {
	case math.IsNaN(l.CPU) || math.IsInf(l.CPU, 0):
		return &LimitError{Field: "cpu", Value: fmt.Sprint(l.CPU), Msg: "must be a number of CPUs such as 0.5 or 2"}
	case l.CPU < 0:
		return &LimitError{Field: "cpu", Value: fmt.Sprint(l.CPU),
			Msg: "must not be negative (0 means no cpu limit)"}
	case l.CPU > 0 && l.CPU < MinCPU:
		return &LimitError{Field: "cpu", Value: fmt.Sprint(l.CPU),
			Msg: fmt.Sprintf("must be at least %g CPUs (1 ms per 100 ms)", MinCPU)}
	case l.CPU > float64(ncpu):
		return &LimitError{Field: "cpu", Value: fmt.Sprint(l.CPU),
			Msg: fmt.Sprintf("must be at most %d, the number of CPUs this process may use (0 means no cpu limit)", ncpu)}
	}
	if l.CPUTime < 0 {
		return &LimitError{Field: "cputime", Value: l.CPUTime.String(),
			Msg: "must not be negative (0 means no CPU time limit)"}
	}
	return nil
}

// cpuQuota returns the CFS quota in µs per cpuPeriod for l.CPU.
func (l Limits) cpuQuota() int64 {
	q := int64(math.Round(l.CPU * cpuPeriod))
	if q < 1000 {
		q = 1000 // kernel minimum is 1 ms
	}
	return q
}

// cpuSeconds returns l.CPUTime rounded up to whole seconds (RLIMIT_CPU unit).
func (l Limits) cpuSeconds() uint64 {
	if l.CPUTime <= 0 {
		return 0
	}
	return uint64((l.CPUTime + time.Second - 1) / time.Second)
}

var sizeUnits = map[string]int64{
	"": 1, "b": 1,
	"k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10,
	"m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
	"g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30,
	"t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40,
}

// ParseSize reads a memory size: plain bytes ("1048576") or a number with a
// binary unit, case-insensitive: k/K, KB, KiB (1024), M, MB, MiB, G, GB, GiB,
// T, TB, TiB. As with docker and ulimit, "M" and "MB" both mean MiB. One
// decimal fraction is accepted ("1.5G"); the result is rounded down to whole
// bytes. Zero, negative, unknown units and overflow are *SizeError
// (errors.Is ErrInvalidSize): to ask for no limit, leave the limit out.
func ParseSize(s string) (int64, error) {
	in := s
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, &SizeError{Input: in, Msg: "empty; use a number of bytes or a unit such as 64M or 1G"}
	}
	if s[0] == '-' {
		return 0, &SizeError{Input: in, Msg: "must not be negative"}
	}
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	num, unit := s[:i], strings.ToLower(strings.TrimSpace(s[i:]))
	if num == "" {
		return 0, &SizeError{Input: in, Msg: "must start with a number, e.g. 512M"}
	}
	mult, ok := sizeUnits[unit]
	if !ok {
		return 0, &SizeError{Input: in, Msg: fmt.Sprintf("unknown unit %q; use B, K, M, G or T (KiB, MiB... also accepted)", s[i:])}
	}
	whole, frac, hasFrac := strings.Cut(num, ".")
	if strings.Contains(frac, ".") || (hasFrac && frac == "") || whole == "" {
		return 0, &SizeError{Input: in, Msg: "malformed number"}
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w > math.MaxInt64/mult {
		return 0, &SizeError{Input: in, Msg: "too large"}
	}
	n := w * mult
	if hasFrac {
		if len(frac) > 9 {
			frac = frac[:9]
		}
		f, _ := strconv.ParseInt(frac, 10, 64) // only digits, at most 9
		scale := int64(math.Pow10(len(frac)))
		// mult <= 2^40 and f < 10^9: split to keep f*mult in range.
		add := (f * (mult >> 10) / scale) << 10
		add += f * (mult & 1023) / scale
		if n > math.MaxInt64-add {
			return 0, &SizeError{Input: in, Msg: "too large"}
		}
		n += add
	}
	if n <= 0 {
		return 0, &SizeError{Input: in, Msg: "must be greater than zero (leave the limit out for none)"}
	}
	return n, nil
}

// formatSize renders n bytes for messages: "32MiB", "1.5GiB", "1000B".
func formatSize(n int64) string {
	units := []struct {
		s string
		v int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}}
	for _, u := range units {
		if n >= u.v {
			if n%u.v == 0 {
				return fmt.Sprintf("%d%s", n/u.v, u.s)
			}
			return fmt.Sprintf("%.1f%s", float64(n)/float64(u.v), u.s)
		}
	}
	return fmt.Sprintf("%dB", n)
}
