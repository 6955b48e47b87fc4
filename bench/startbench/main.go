// Command startbench measures the wall time of short-lived commands by
// fork+exec'ing them directly (no shell) many times, interleaved, and prints
// a markdown table of per-run statistics. It is the driver of hack/bench.sh.
//
//	startbench [-n 300] [-warmup 20] [-ratio a/b,...] -c 'name=argv...' -c ...
//	startbench -loop 1000 [-marker-every 10] -c 'name=argv...'
//
// Each -c is NAME[:STATUS]=[K=V ...] ARGV with ARGV split on white space;
// single quotes group words as in sh (no escapes, no expansion). Leading
// K=V words are added to the environment; STATUS is the expected exit status
// (default 0), any other counts as a failure. The runs
// are interleaved (a b c a b c ...), and the order is rotated every round so
// that no command always follows the same other one. A run's time is from
// just before the clone to just after wait4 returned: what a caller of the
// command waits for. Children get /dev/null as stdio.
//
// -loop runs the first command N times and then checks that nothing leaked
// on the host: leftover processes (a marker process is left behind in the
// sandbox every -marker-every runs), nsbox-* cgroup directories, mounts in
// the host's /proc/self/mountinfo, this process's fds and the system's open
// file count. It exits 1 when something leaked.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type spec struct {
	name string
	want int      // expected exit status
	env  []string // added to the environment
	argv []string
	path string
	durs []time.Duration
	// faults and cpu are each measured run's page faults (minor and
	// major) and CPU time (user and system), of the command and every
	// descendant it waited for, as wait4 reports them.
	faults []time.Duration // a count, kept as a Duration for summarize
	cpu    []time.Duration
	fail   int
	last   string // last failure
}

type specList []*spec

func (l *specList) String() string { return "" }
func (l *specList) Set(v string) error {
	name, cmd, ok := strings.Cut(v, "=")
	if !ok || name == "" {
		return fmt.Errorf("want NAME=ARGV, got %q", v)
	}
	want := 0
	if n, code, ok := strings.Cut(name, ":"); ok {
		c, err := strconv.Atoi(code)
		if err != nil {
			return fmt.Errorf("%s: bad exit status %q", name, code)
		}
		name, want = n, c
	}
	argv, err := splitArgs(cmd)
	if err != nil {
		return fmt.Errorf("%s: %v", name, err)
	}
	var env []string
	for len(argv) > 0 && strings.Contains(argv[0], "=") && !strings.HasPrefix(argv[0], "=") {
		env = append(env, argv[0])
		argv = argv[1:]
	}
	if len(argv) == 0 {
		return fmt.Errorf("%s: empty command", name)
	}
	p, err := exec.LookPath(argv[0])
	if err != nil {
		return fmt.Errorf("%s: %v", name, err)
	}
	*l = append(*l, &spec{name: name, want: want, env: env, argv: argv, path: p})
	return nil
}

var devnull *os.File

// splitArgs splits s on white space, keeping 'single quoted' text together.
func splitArgs(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	in, have := false, false
	for _, r := range s {
		switch {
		case r == '\'':
			in = !in
			have = true
		case !in && (r == ' ' || r == '\t' || r == '\n'):
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteRune(r)
			have = true
		}
	}
	if in {
		return nil, fmt.Errorf("unterminated quote in %q", s)
	}
	if have {
		out = append(out, cur.String())
	}
	return out, nil
}

func main() {
	var specs specList
	n := flag.Int("n", 300, "measured runs per command")
	warmup := flag.Int("warmup", 20, "unmeasured runs per command first")
	ratios := flag.String("ratio", "", "comma-separated A/B pairs of names whose median ratio to print")
	title := flag.String("title", "", "heading printed above the table")
	raw := flag.String("raw", "", "write every duration (µs) as CSV to this file")
	loop := flag.Int("loop", 0, "leak-check mode: run the first command this many times, then check the host")
	markerEvery := flag.Int("marker-every", 10, "leak-check mode: every Nth run leaves a marked process behind inside the sandbox (0: never)")
	markerCmd := flag.String("marker-cmd", "", "leak-check mode: the command (argv, white space split) that leaves a process behind; @MARKER@ is replaced")
	flag.Var(&specs, "c", "NAME=ARGV (repeatable; ARGV split on white space, 'single quotes' group)")
	flag.Parse()
	if len(specs) == 0 {
		fmt.Fprintln(os.Stderr, "startbench: no -c NAME=ARGV given")
		os.Exit(2)
	}
	var err error
	devnull, err = os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		fatal(err)
	}
	if *loop > 0 {
		os.Exit(leakLoop(specs[0], *loop, *markerEvery, *markerCmd))
	}
	cpu0 := readCPU()
	for _, s := range specs {
		for i := 0; i < *warmup; i++ {
			runOnce(s, s.path, s.argv)
		}
		s.fail, s.last = 0, ""
	}
	for i := 0; i < *n; i++ {
		for j := range specs {
			s := specs[(i+j)%len(specs)]
			d, ok := runOnce(s, s.path, s.argv)
			if ok {
				s.durs = append(s.durs, d)
				s.faults = append(s.faults, time.Duration(lastUsage.Minflt+lastUsage.Majflt))
				s.cpu = append(s.cpu, time.Duration(lastUsage.Utime.Nano()+lastUsage.Stime.Nano()))
			}
		}
	}
	other := otherLoad(cpu0, readCPU())
	report(specs, *title, *ratios)
	fmt.Printf("\nOther load during the runs: %.0f%% of %d CPUs busy with work not charged to this driver or its children (kernel threads such as namespace cleanup included); above ~15%% the figures are disturbed.\n", other*100, runtime.NumCPU())
	if *raw != "" {
		writeRaw(*raw, specs)
	}
	for _, s := range specs {
		if s.fail > 0 {
			os.Exit(1)
		}
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "startbench:", err)
	os.Exit(2)
}

// lastUsage is the resource usage of runOnce's last command.
var lastUsage syscall.Rusage

// runOnce fork+execs path with argv and waits for it.
func runOnce(s *spec, path string, argv []string) (time.Duration, bool) {
	attr := &syscall.ProcAttr{Files: []uintptr{devnull.Fd(), devnull.Fd(), devnull.Fd()}, Env: append(os.Environ(), s.env...)}
	t0 := time.Now()
	pid, err := syscall.ForkExec(path, argv, attr)
	if err != nil {
		s.fail++
		s.last = err.Error()
		return 0, false
	}
	var ws syscall.WaitStatus
	for {
		_, err = syscall.Wait4(pid, &ws, 0, &lastUsage)
		if err != syscall.EINTR {
			break
		}
	}
	d := time.Since(t0)
	if err != nil || !ws.Exited() || ws.ExitStatus() != s.want {
		s.fail++
		s.last = fmt.Sprintf("exit status %v (%v)", ws.ExitStatus(), err)
		if ws.Signaled() {
			s.last = "signal " + ws.Signal().String()
		}
		return d, false
	}
	return d, true
}

type stats struct {
	n                             int
	min, med, p90, p99, max, mean time.Duration
}

func summarize(d []time.Duration) stats {
	if len(d) == 0 {
		return stats{}
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	var sum time.Duration
	for _, x := range s {
		sum += x
	}
	q := func(p float64) time.Duration {
		// nearest-rank
		i := int(math.Ceil(p*float64(len(s)))) - 1
		if i < 0 {
			i = 0
		}
		return s[i]
	}
	return stats{n: len(s), min: s[0], med: q(0.5), p90: q(0.9), p99: q(0.99), max: s[len(s)-1], mean: sum / time.Duration(len(s))}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f", float64(d)/1e6) }

func report(specs []*spec, title, ratios string) {
	if title != "" {
		fmt.Printf("\n### %s\n\n", title)
	}
	st := map[string]stats{}
	// The last two columns: the median page faults and CPU time of a
	// run, the process tree's (what wait4 sums: the command and every
	// descendant it or they waited for). On a VM a fault is expensive:
	// the start is memory-bound as much as syscall-bound.
	fmt.Println("| command | runs | median ms | p90 ms | p99 ms | min ms | mean ms | failures | page faults | CPU ms |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, s := range specs {
		x := summarize(s.durs)
		st[s.name] = x
		f, c := summarize(s.faults), summarize(s.cpu)
		fmt.Printf("| %s | %d | %s | %s | %s | %s | %s | %d | %d | %s |\n", s.name, x.n, ms(x.med), ms(x.p90), ms(x.p99), ms(x.min), ms(x.mean), s.fail, int64(f.med), ms(c.med))
	}
	if ratios != "" {
		fmt.Println()
		fmt.Println("| ratio | of medians | of p90 | medians' difference ms |")
		fmt.Println("|---|---:|---:|---:|")
		for _, r := range strings.Split(ratios, ",") {
			a, b, ok := strings.Cut(strings.TrimSpace(r), "/")
			sa, oka := st[a]
			sb, okb := st[b]
			if !ok || !oka || !okb || sb.med == 0 || sb.p90 == 0 {
				fmt.Printf("| %s | n/a | n/a | n/a |\n", r)
				continue
			}
			fmt.Printf("| %s/%s | %.2f× | %.2f× | %+.3f |\n", a, b, float64(sa.med)/float64(sb.med), float64(sa.p90)/float64(sb.p90), float64(sa.med-sb.med)/1e6)
		}
	}
	for _, s := range specs {
		if s.fail > 0 {
			fmt.Printf("\n**%s failed %d times**, last: %s\n", s.name, s.fail, s.last)
		}
	}
}

func writeRaw(path string, specs []*spec) {
	var b bytes.Buffer
	b.WriteString("command,run,us\n")
	for _, s := range specs {
		for i, d := range s.durs {
			fmt.Fprintf(&b, "%s,%d,%.1f\n", s.name, i, float64(d)/1e3)
		}
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		fatal(err)
	}
}

type cpuSample struct {
	busy, total uint64        // jiffies of all CPUs (/proc/stat)
	own         time.Duration // CPU time of this process and its reaped children
	wall        time.Time
}

func rusageTime(who int) time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(who, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// readCPU samples the host's CPU counters and our own CPU time.
func readCPU() cpuSample {
	s := cpuSample{own: rusageTime(syscall.RUSAGE_SELF) + rusageTime(syscall.RUSAGE_CHILDREN), wall: time.Now()}
	s.busy, s.total = readStat()
	return s
}

// otherLoad is the share of all CPUs that was busy with something else than
// this process and its children between a and b.
func otherLoad(a, b cpuSample) float64 {
	if b.total <= a.total {
		return 0
	}
	const hz = 100 // USER_HZ
	busy := time.Duration(b.busy-a.busy) * time.Second / hz
	total := time.Duration(b.total-a.total) * time.Second / hz
	other := busy - (b.own - a.own)
	if other < 0 {
		other = 0
	}
	return float64(other) / float64(total)
}

func readStat() (uint64, uint64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var busy, total uint64
	for i, v := range f[1:] {
		n, _ := strconv.ParseUint(v, 10, 64)
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, total
}

// ---- leak check ----

type hostState struct {
	fds       int
	mounts    int
	fileNr    int
	cgroups   map[string]bool
	markers   []int
	nsboxInit []int // processes running the measured binary (by /proc/PID/exe)
}

func snapshot(marker, exe string) hostState {
	h := hostState{cgroups: map[string]bool{}}
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		h.fds = len(ents)
	}
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		h.mounts = bytes.Count(b, []byte("\n"))
	}
	if b, err := os.ReadFile("/proc/sys/fs/file-nr"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			h.fileNr, _ = strconv.Atoi(f[0])
		}
	}
	for _, g := range findCgroups() {
		h.cgroups[g] = true
	}
	h.markers, h.nsboxInit = scanProcs(marker, exe)
	return h
}

// findCgroups lists directories named nsbox-* anywhere below /sys/fs/cgroup
// (v1 controllers, the v2 unified tree, nested delegated groups).
func findCgroups() []string {
	var out []string
	filepath.WalkDir("/sys/fs/cgroup", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), "nsbox-") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// scanProcs returns the pids whose command line contains marker, and those
// that run the binary exe (supervisors and workers of the measured nsbox;
// other nsbox processes on the host are not counted).
func scanProcs(marker, exe string) (markers, inits []int) {
	ents, _ := os.ReadDir("/proc")
	self := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || len(b) == 0 {
			continue
		}
		if marker != "" && bytes.Contains(b, []byte(marker)) {
			markers = append(markers, pid)
		}
		if exe != "" {
			if l, err := os.Readlink("/proc/" + e.Name() + "/exe"); err == nil && l == exe {
				inits = append(inits, pid)
			}
		}
	}
	return
}

func leakLoop(s *spec, n, markerEvery int, markerCmd string) int {
	marker := fmt.Sprintf("nsbox-leak-marker-%d-%d", os.Getpid(), time.Now().UnixNano())
	var markerArgv []string
	var markerPath string
	if markerEvery > 0 && markerCmd != "" {
		args, err := splitArgs(markerCmd)
		if err != nil {
			fatal(err)
		}
		for _, a := range args {
			markerArgv = append(markerArgv, strings.ReplaceAll(a, "@MARKER@", marker))
		}
		if len(markerArgv) > 0 {
			p, err := exec.LookPath(markerArgv[0])
			if err != nil {
				fatal(err)
			}
			markerPath = p
		}
	}
	exe, _ := filepath.EvalSymlinks(s.path)
	before := snapshot(marker, exe)
	// Let the system settle a bit between the snapshot and the loop.
	t0 := time.Now()
	markers := 0
	for i := 0; i < n; i++ {
		path, argv := s.path, s.argv
		if markerArgv != nil && (i+1)%markerEvery == 0 {
			path, argv = markerPath, markerArgv
			markers++
		}
		if d, ok := runOnce(s, path, argv); ok {
			s.durs = append(s.durs, d)
		}
	}
	elapsed := time.Since(t0)
	// Teardown of a sandbox is synchronous in nsbox (Close waits for PID 1);
	// a short grace covers processes that are being reaped by the kernel.
	time.Sleep(200 * time.Millisecond)
	after := snapshot(marker, exe)

	x := summarize(s.durs)
	fmt.Printf("%s: %d runs in %.2fs (median %s ms, p90 %s ms), %d failed", s.name, n, elapsed.Seconds(), ms(x.med), ms(x.p90), s.fail)
	if s.fail > 0 {
		fmt.Printf(" (last: %s)", s.last)
	}
	fmt.Printf("; %d runs left a marked background process inside\n", markers)
	bad := s.fail > 0
	check := func(ok bool, what, detail string) {
		mark := "ok  "
		if !ok {
			mark = "LEAK"
			bad = true
		}
		fmt.Printf("  [%s] %s: %s\n", mark, what, detail)
	}
	check(len(after.markers) == 0, "leftover marked processes", fmt.Sprintf("%d (pids %v)", len(after.markers), after.markers))
	check(len(after.nsboxInit) <= len(before.nsboxInit), "processes running "+exe+" (supervisors, workers)", fmt.Sprintf("before %d, after %d %v", len(before.nsboxInit), len(after.nsboxInit), after.nsboxInit))
	var newCg []string
	for g := range after.cgroups {
		if !before.cgroups[g] {
			newCg = append(newCg, g)
		}
	}
	sort.Strings(newCg)
	check(len(newCg) == 0, "new nsbox-* cgroup dirs under /sys/fs/cgroup", fmt.Sprintf("%d %v (pre-existing: %d)", len(newCg), newCg, len(before.cgroups)))
	check(after.mounts <= before.mounts, "host mounts (/proc/self/mountinfo lines)", fmt.Sprintf("before %d, after %d", before.mounts, after.mounts))
	check(after.fds <= before.fds, "fds of the parent process", fmt.Sprintf("before %d, after %d", before.fds, after.fds))
	// System-wide open files move with everything else on the host (by
	// hundreds within seconds on a busy one): information only.
	fmt.Printf("  [info] system open files (/proc/sys/fs/file-nr; moves with all host activity): before %d, after %d\n", before.fileNr, after.fileNr)
	if bad {
		return 1
	}
	return 0
}
