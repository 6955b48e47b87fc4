package notify

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// metaBenchChild changes the mode of p n times (alternating two modes)
// and prints the mean time of one call in nanoseconds.
func metaBenchChild(p string, n int) {
	start := time.Now()
	for i := 0; i < n; i++ {
		if err := unix.Fchmodat(unix.AT_FDCWD, p, 0o600|uint32(i&1)<<6, 0); err != nil {
			fmt.Println("error", err)
			return
		}
	}
	fmt.Println("ns", time.Since(start).Nanoseconds()/int64(n))
}

func init() {
	childModes["meta-bench"] = func(args []string, _ *bufio.Reader) int {
		n, _ := strconv.Atoi(args[1])
		metaBenchChild(args[0], n)
		return 0
	}
	if os.Getenv(childEnv) == "meta-bench-plain" {
		args := strings.Fields(os.Getenv("NSBOX_NOTIFY_TEST_ARGS"))
		n, _ := strconv.Atoi(args[1])
		metaBenchChild(args[0], n)
		os.Exit(0)
	}
}

// BenchmarkMetaChmod measures a chmod of a file in a writable place made
// through the metadata gate (the Landlock backend's), against a plain
// one: the figure docs/benchmarks.md reports. ns/chmod is the child's own
// mean; the file is two levels below the writable inode.
func BenchmarkMetaChmod(b *testing.B) {
	if err := Supported(); err != nil {
		b.Skip(err)
	}
	top := b.TempDir()
	rw := filepath.Join(top, "rw")
	if err := os.MkdirAll(filepath.Join(rw, "a", "b"), 0o755); err != nil {
		b.Fatal(err)
	}
	p := filepath.Join(rw, "a", "b", "f")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		b.Fatal(err)
	}
	b.Run("plain", func(b *testing.B) {
		cmd := childCmd(b, "meta-bench-plain", []string{p, strconv.Itoa(b.N)}, nil)
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		readMetaBench(b, bufio.NewScanner(stdout))
		cmd.Wait()
	})
	b.Run("gate", func(b *testing.B) { benchMetaGate(b, p, rw, false) })
	// A root supervisor's: the call made with the target's ids, taken
	// and given back per call (the Landlock backend shares the host's
	// PID namespace, so its threads never keep them).
	b.Run("gate-as-target", func(b *testing.B) {
		if os.Geteuid() != 0 {
			b.Skip("needs root")
		}
		benchMetaGate(b, p, rw, true)
	})
}

func benchMetaGate(b *testing.B, p, rw string, asTarget bool) {
	{
		o := Options{Meta: NewMetaGate([]MetaInode{inodeOf(b, rw)}, nil), AsTarget: asTarget}
		cmd := childCmd(b, "meta-bench", []string{p, strconv.Itoa(b.N)}, nil)
		cmd.Env = append(cmd.Env, metaEnv+"=1")
		stdin, out := startGateChild(b, cmd, GateConfig{}, o)
		stdin.Write([]byte("go\n"))
		readMetaBench(b, out)
		cmd.Wait()
	}
}

// readMetaBench reports the child's mean ("ns N") as ns/chmod.
func readMetaBench(b *testing.B, out *bufio.Scanner) {
	for out.Scan() {
		if v, ok := strings.CutPrefix(out.Text(), "ns "); ok {
			ns, _ := strconv.ParseFloat(v, 64)
			b.ReportMetric(ns, "ns/chmod")
		} else {
			b.Fatal(out.Text())
		}
	}
}
