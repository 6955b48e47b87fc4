// Command phases runs a command built with the tracepoints of
// bench/phases/trace.patch many times and prints the median time of every
// phase of a sandbox's life: from the fork of the supervisor to the end of
// its wait4, through the worker's setup steps and the teardown.
//
// Every tracepoint writes "TR <who> <label> <CLOCK_MONOTONIC ns>" to stderr;
// CLOCK_MONOTONIC is one clock for all processes of the host, so supervisor
// and worker lines interleave correctly. This driver adds "drv fork" (just
// before the clone of the supervisor) and "drv waited" (wait4 returned).
//
//	phases [-n 200] [-warmup 20] -- bin/nsbox run -- /bin/true
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

type mark struct {
	label string
	t     int64
}

func mono() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

func runOnce(path string, argv []string, devnull *os.File) ([]mark, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	attr := &syscall.ProcAttr{Files: []uintptr{devnull.Fd(), devnull.Fd(), w.Fd()}, Env: os.Environ()}
	t0 := mono()
	pid, err := syscall.ForkExec(path, argv, attr)
	w.Close()
	if err != nil {
		r.Close()
		return nil, err
	}
	var out bytes.Buffer
	done := make(chan struct{})
	go func() { out.ReadFrom(r); close(done) }()
	var ws syscall.WaitStatus
	for {
		if _, err = syscall.Wait4(pid, &ws, 0, nil); err != syscall.EINTR {
			break
		}
	}
	t1 := mono()
	<-done
	r.Close()
	if ws.ExitStatus() != 0 {
		return nil, fmt.Errorf("exit status %d: %s", ws.ExitStatus(), out.String())
	}
	marks := []mark{{"drv fork", t0}}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || f[0] != "TR" {
			continue
		}
		t, err := strconv.ParseInt(f[len(f)-1], 10, 64)
		if err != nil {
			continue
		}
		marks = append(marks, mark{f[1] + " " + strings.Join(f[2:len(f)-1], " "), t})
	}
	marks = append(marks, mark{"drv waited", t1})
	sort.SliceStable(marks, func(i, j int) bool { return marks[i].t < marks[j].t })
	return marks, nil
}

func main() {
	n := flag.Int("n", 200, "measured runs")
	warmup := flag.Int("warmup", 20, "unmeasured runs first")
	all := flag.Bool("all", false, "also list phase pairs seen in fewer than half of the runs")
	flag.Parse()
	argv := flag.Args()
	if len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "usage: phases [-n N] -- CMD ARGS...")
		os.Exit(2)
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	devnull, _ := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	// phase key "A → B" -> durations; order as first seen
	var order []string
	durs := map[string][]int64{}
	var totals []int64
	for i := 0; i < *warmup+*n; i++ {
		m, err := runOnce(path, argv, devnull)
		if err != nil {
			fmt.Fprintln(os.Stderr, "phases:", err)
			os.Exit(1)
		}
		if i < *warmup {
			continue
		}
		totals = append(totals, m[len(m)-1].t-m[0].t)
		for j := 1; j < len(m); j++ {
			k := m[j-1].label + " → " + m[j].label
			if _, ok := durs[k]; !ok {
				order = append(order, k)
			}
			durs[k] = append(durs[k], m[j].t-m[j-1].t)
		}
	}
	med := func(d []int64) (int64, int64, int64) {
		s := append([]int64(nil), d...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return s[len(s)/2], s[(len(s)*9+9)/10-1], s[0]
	}
	fmt.Println("| phase (from → to) | runs | median µs | p90 µs | min µs |")
	fmt.Println("|---|---:|---:|---:|---:|")
	var sum int64
	for _, k := range order {
		m, p, mn := med(durs[k])
		if len(durs[k]) < *n/2 {
			// an ordering that happened only sometimes (lines of two
			// processes racing): left out of the sum
			if !*all {
				continue
			}
			fmt.Printf("| (%s) | %d | %.0f | %.0f | %.0f |\n", k, len(durs[k]), float64(m)/1e3, float64(p)/1e3, float64(mn)/1e3)
			continue
		}
		sum += m
		fmt.Printf("| %s | %d | %.0f | %.0f | %.0f |\n", k, len(durs[k]), float64(m)/1e3, float64(p)/1e3, float64(mn)/1e3)
	}
	tm, tp, tmin := med(totals)
	fmt.Printf("| **total, fork → wait4** | %d | %.0f | %.0f | %.0f |\n", len(totals), float64(tm)/1e3, float64(tp)/1e3, float64(tmin)/1e3)
	fmt.Printf("\n(sum of the phase medians: %.0f µs)\n", float64(sum)/1e3)
}
