package cgroups

import (
	"testing"
	"time"
)

// BenchmarkNewDestroy is the cold cost a sandbox start pays for its limits:
// create the group(s), apply memory+pids+cpu, then kill (empty) and remove
// them. One sub-benchmark per mode this uid has here, plus "none".
func BenchmarkNewDestroy(b *testing.B) {
	full := Limits{Memory: 256 << 20, Pids: 256, CPU: 1}
	run := func(name string, l Limits, want Mode) {
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				m, err := New("bench", l)
				if err != nil {
					b.Fatal(err)
				}
				if m.Mode() != want {
					b.Fatalf("mode %s, want %s: %s", m.Mode(), want, m.Detection().Reason)
				}
				if err := m.Destroy(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	if d := Detect(); d.Mode == ModeCgroup1 || d.Mode == ModeCgroup2 || d.Mode == ModeCgroup2Delegated {
		run(string(d.Mode), full, d.Mode)
		run(string(d.Mode)+"-memory-only", Limits{Memory: 256 << 20}, d.Mode)
	} else {
		run("rlimit", full, ModeRlimit)
	}
	run("none", Limits{}, ModeNone)
}

func BenchmarkDetect(b *testing.B) {
	for i := 0; i < b.N; i++ {
		_ = Detect()
	}
}

// BenchmarkCleanupStale: the per-run cost when there is nothing to reap.
func BenchmarkCleanupStale(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if _, err := CleanupStale(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLimitPhases splits what `nsbox run --memory 256M --pids 64`
// pays for its group into the phases a run goes through: New (mkdir, lock
// and limit writes per hierarchy), one Events read (a run reads them
// before and after its command) and Destroy (the kill scan of an empty
// group and the rmdir), each reported per operation. Skipped where these
// limits are not enforced by a cgroup.
func BenchmarkLimitPhases(b *testing.B) {
	l := Limits{Memory: 256 << 20, Pids: 64}
	switch d := Detect(); d.Mode {
	case ModeCgroup1, ModeCgroup2, ModeCgroup2Delegated:
	default:
		b.Skipf("no cgroup for these limits here (mode %s)", d.Mode)
	}
	var tNew, tEv, tDes time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		m, err := New("bench", l)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := m.Events(); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if err := m.Destroy(); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		tNew, tEv, tDes = tNew+t1.Sub(t0), tEv+t2.Sub(t1), tDes+t3.Sub(t2)
	}
	n := float64(b.N)
	b.ReportMetric(float64(tNew.Nanoseconds())/n, "new-ns/op")
	b.ReportMetric(float64(tEv.Nanoseconds())/n, "events-ns/op")
	b.ReportMetric(float64(tDes.Nanoseconds())/n, "destroy-ns/op")
}
