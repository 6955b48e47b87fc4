package cgroups

import (
	"errors"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	ok := []struct {
		in   string
		want int64
	}{
		{"1", 1},
		{"1048576", 1 << 20},
		{"512k", 512 << 10},
		{"512K", 512 << 10},
		{"512KB", 512 << 10},
		{"512KiB", 512 << 10},
		{"64M", 64 << 20},
		{"64m", 64 << 20},
		{"64MB", 64 << 20},
		{"256MiB", 256 << 20},
		{"256mib", 256 << 20},
		{"1G", 1 << 30},
		{"1GiB", 1 << 30},
		{"1.5G", 3 << 29},
		{"0.5M", 512 << 10},
		{"2T", 2 << 40},
		{" 64M ", 64 << 20},
		{"64 M", 64 << 20},
		{"100b", 100},
		{"100B", 100},
		{"8388607T", 8388607 << 40},
	}
	for _, c := range ok {
		got, err := ParseSize(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	bad := []struct{ in, msg string }{
		{"0", "greater than zero"},
		{"0M", "greater than zero"},
		{"0.0001", "greater than zero"},
		{"-1", "negative"},
		{"-64M", "negative"},
		{"12XB", "unknown unit"},
		{"12 parsecs", "unknown unit"},
		{"", "empty"},
		{"   ", "empty"},
		{"M", "must start with a number"},
		{"1..5G", "malformed"},
		{"1.G", "malformed"},
		{".5G", "malformed"},
		{"1.2.3", "malformed"},
		{"8388608T", "too large"},
		{"99999999999999999999", "too large"},
		{"0x10", "unknown unit"},
	}
	for _, c := range bad {
		_, err := ParseSize(c.in)
		var se *SizeError
		if !errors.As(err, &se) || !errors.Is(err, ErrInvalidSize) {
			t.Errorf("ParseSize(%q) error = %v; want *SizeError", c.in, err)
			continue
		}
		if se.Input != c.in || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("ParseSize(%q) = %q; want input echoed and %q", c.in, err, c.msg)
		}
	}
}

func TestValidate(t *testing.T) {
	ncpu := float64(runtime.NumCPU())
	good := []Limits{
		{},
		{Memory: MinMemory},
		{Memory: 8 << 30, Pids: MinPids, CPU: 0.5, CPUTime: time.Minute},
		{CPU: ncpu},
		{CPU: MinCPU},
		{Pids: math.MaxInt32},
	}
	for _, l := range good {
		if err := l.Validate(); err != nil {
			t.Errorf("%+v: unexpected error %v", l, err)
		}
	}
	bad := []struct {
		l     Limits
		field string
		msg   string
	}{
		{Limits{Memory: -1}, "memory", "negative"},
		{Limits{Memory: 1 << 20}, "memory", "at least 32MiB"},
		{Limits{Memory: MinMemory - 1}, "memory", "worker"},
		{Limits{Pids: -5}, "pids", "negative"},
		{Limits{Pids: 4}, "pids", "at least 16"},
		{Limits{Pids: math.MaxInt32 + 1}, "pids", "larger"},
		{Limits{CPU: -0.5}, "cpu", "negative"},
		{Limits{CPU: 0.001}, "cpu", "at least"},
		{Limits{CPU: ncpu + 1}, "cpu", "at most"},
		{Limits{CPU: math.NaN()}, "cpu", "number"},
		{Limits{CPU: math.Inf(1)}, "cpu", "number"},
		{Limits{CPUTime: -time.Second}, "cputime", "negative"},
	}
	for _, c := range bad {
		err := c.l.Validate()
		var le *LimitError
		if !errors.As(err, &le) || !errors.Is(err, ErrInvalidLimit) {
			t.Errorf("%+v: error %v; want *LimitError", c.l, err)
			continue
		}
		if le.Field != c.field || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%+v: got field %q msg %q; want %q containing %q", c.l, le.Field, err, c.field, c.msg)
		}
	}
}

func TestLimitConversions(t *testing.T) {
	if q := (Limits{CPU: 0.5}).cpuQuota(); q != 50000 {
		t.Errorf("cpuQuota(0.5) = %d", q)
	}
	if q := (Limits{CPU: 0.01}).cpuQuota(); q != 1000 {
		t.Errorf("cpuQuota(0.01) = %d", q)
	}
	if s := (Limits{CPUTime: 1500 * time.Millisecond}).cpuSeconds(); s != 2 {
		t.Errorf("cpuSeconds(1.5s) = %d", s)
	}
	if s := (Limits{CPUTime: time.Nanosecond}).cpuSeconds(); s != 1 {
		t.Errorf("cpuSeconds(1ns) = %d", s)
	}
	for n, want := range map[int64]string{1000: "1000B", 32 << 20: "32MiB", 3 << 29: "1.5GiB", 2 << 40: "2TiB"} {
		if got := formatSize(n); got != want {
			t.Errorf("formatSize(%d) = %q; want %q", n, got, want)
		}
	}
}
