package seccomp

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

func BenchmarkParseDefault(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if _, err := Default(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCompileDefault(b *testing.B) {
	p, err := Default()
	if err != nil {
		b.Fatal(err)
	}
	var f *Filter
	for i := 0; i < b.N; i++ {
		if f, err = Compile(p, Options{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(f.Len()), "insns")
}

// BenchmarkDefaultFilter is what a sandbox start pays for the default
// profile: the precompiled filter where the binary carries one for this
// architecture (check, decode, validate), otherwise parse and compile.
func BenchmarkDefaultFilter(b *testing.B) {
	for _, v := range defaultVariants {
		b.Run(fmt.Sprintf("%+v", v.opts), func(b *testing.B) {
			var f *Filter
			var err error
			for i := 0; i < b.N; i++ {
				if f, err = DefaultFilter(v.opts); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(f.Len()), "insns")
		})
	}
}

func BenchmarkCompileDocker(b *testing.B) {
	p, err := LoadFile("testdata/docker-default.json")
	if err != nil {
		b.Fatal(err)
	}
	var f *Filter
	for i := 0; i < b.N; i++ {
		if f, err = Compile(p, Options{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(f.Len()), "insns")
}

func BenchmarkFilterFromBytes(b *testing.B) {
	data := compileDefault(b, Options{}).Bytes()
	b.SetBytes(int64(len(data)))
	for i := 0; i < b.N; i++ {
		if _, err := FilterFromBytes(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInstall measures Install (prctl + seccomp(2) with TSYNC) in child
// processes, since filters cannot be removed; they stack, so each child
// installs at most 50 times (the kernel caps a process at 32768
// instructions across its filters). ns/op includes the amortized start of
// the children; ns/install is measured inside them.
func BenchmarkInstall(b *testing.B) {
	f := compileDefault(b, Options{})
	b.ResetTimer()
	var total int64
	for done := 0; done < b.N; {
		n := b.N - done
		if n > 50 {
			n = 50
		}
		out, err := runHelper(b, "bench-install", f, countEnv+"="+strconv.Itoa(n))
		if err != nil {
			b.Fatal(err)
		}
		ns, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		total += ns
		done += n
	}
	b.ReportMetric(float64(total)/float64(b.N), "ns/install")
}

// BenchmarkSyscallOverhead measures what the default filter adds to an
// allowed syscall: a child makes b.N getpid calls before and b.N after
// installing it.
func BenchmarkSyscallOverhead(b *testing.B) {
	f := compileDefault(b, Options{})
	b.ResetTimer()
	out, err := runHelper(b, "bench-getpid", f, countEnv+"="+strconv.Itoa(b.N))
	if err != nil {
		b.Fatal(err)
	}
	var before, after int64
	if _, err := fmt.Sscan(string(out), &before, &after); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(before)/float64(b.N), "ns/getpid-unfiltered")
	b.ReportMetric(float64(after)/float64(b.N), "ns/getpid-filtered")
}
