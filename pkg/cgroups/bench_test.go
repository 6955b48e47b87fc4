package cgroups

import "testing"

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
