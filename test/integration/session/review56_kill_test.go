package session

import (
	"bufio"
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

func review56Policy() sandbox.Policy {
	p := sandbox.Policy{Limits: sandbox.Limits{Memory: 128 << 20, Pids: 64}}
	if n := os.Getenv("REVIEW56_NET"); n != "" {
		p.Network = sandbox.Network(n)
	}
	return p
}

// TestReview56Owner is the helper process: a busy pool, killed by the test.
func TestReview56Owner(t *testing.T) {
	if os.Getenv("REVIEW56_OWNER") == "" {
		t.Skip("helper")
	}
	if os.Getenv("REVIEW56_OWNER") == "once" {
		s, err := sandbox.Start(context.Background(), review56Policy())
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		s.Close()
		return
	}
	p, err := sandbox.NewPool(review56Policy(), 4)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	for p.Stats().Ready < 1 {
		if err := p.Stats().LastError; err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		time.Sleep(5 * time.Millisecond)
	}
	for i := 0; i < 2; i++ {
		go func() {
			for {
				p.Exec(context.Background(), sandbox.Command{Argv: []string{"/bin/true"}})
			}
		}()
	}
	fmt.Println("go")
	select {}
}

// review56Cgroups lists the cgroup directories named after supervisor pid.
func review56Cgroups(pid int) []string {
	var out []string
	tag := "nsbox-" + strconv.Itoa(pid) + "-"
	filepath.Walk("/sys/fs/cgroup", func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.IsDir() {
			return nil
		}
		if strings.HasPrefix(filepath.Base(p), tag) {
			out = append(out, p)
			return filepath.SkipDir
		}
		return nil
	})
	return out
}

type review56Proc struct {
	pid   int
	start string
	cmd   string
}

func review56Stat(pid int) (ppid int, start string, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, "", false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if f[0] == "Z" || f[0] == "X" {
		return 0, "", false
	}
	ppid, _ = strconv.Atoi(f[1])
	return ppid, f[19], true
}

// review56Tree lists pid's descendants (not pid).
func review56Tree(root int) []review56Proc {
	kids := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp, _, ok := review56Stat(n); ok {
			kids[pp] = append(kids[pp], n)
		}
	}
	var out []review56Proc
	var walk func(int)
	walk = func(p int) {
		for _, k := range kids[p] {
			_, st, _ := review56Stat(k)
			cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(k) + "/cmdline")
			out = append(out, review56Proc{k, st, strings.ReplaceAll(string(cmd), "\x00", " ")})
			walk(k)
		}
	}
	walk(root)
	return out
}

func review56Alive(ps []review56Proc) []string {
	var out []string
	for _, p := range ps {
		if _, st, ok := review56Stat(p.pid); ok && st == p.start {
			out = append(out, fmt.Sprintf("process %d %q", p.pid, p.cmd))
		}
	}
	return out
}

// TestReview56KillOwnerMidRefill: SIGKILL of a pool's owner while refills
// are under way (a busy pool with limits and the filtered network) leaves
// no process behind, and what it leaves on the host goes with the next
// nsbox process's first filtered start: the cgroups (CleanupStale) and the
// generated resolv.conf's directories in /dev/shm, made for each start
// and removed once the worker has mounted it. Those had no owner in
// their name and stayed for good, about three a kill (review 56).
func TestReview56KillOwnerMidRefill(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		os.Setenv("REVIEW56_NET", "filtered")
		probe, err := sandbox.Start(context.Background(), review56Policy())
		if err != nil {
			t.Skipf("no filtered network here: %v", err)
		}
		probe.Close()
		self, _ := os.Executable()
		shmBefore, _ := filepath.Glob("/dev/shm/nsbox-net-*")
		for round := 0; round < 3; round++ {
			cmd := exec.Command(self, "-test.run", "^TestReview56Owner$")
			cmd.Env = []string{"REVIEW56_OWNER=1", "PATH=/usr/bin:/bin", "REVIEW56_NET=" + os.Getenv("REVIEW56_NET"), "HOME=/tmp"}
			out, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, _ := bufio.NewReader(out).ReadString('\n')
			if strings.TrimSpace(line) != "go" {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("owner: %q", line)
			}
			time.Sleep(time.Duration(50+rand.Intn(300)) * time.Millisecond)
			cmd.Process.Signal(syscall.SIGSTOP)
			time.Sleep(20 * time.Millisecond)
			tree := review56Tree(cmd.Process.Pid)
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			pid := cmd.Process.Pid
			var left []string
			for i := 0; i < 100; i++ {
				if left = review56Alive(tree); len(left) == 0 {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if len(left) > 0 {
				t.Errorf("round %d: processes of killed owner %d still running 5 s later (of %d in its tree):\n%s", round, pid, len(tree), strings.Join(left, "\n"))
				for _, p := range tree {
					syscall.Kill(p.pid, syscall.SIGKILL)
				}
			}
			t.Logf("round %d: %d processes in tree, cgroups left: %d", round, len(tree), len(review56Cgroups(pid)))
		}
		mid, _ := filepath.Glob("/dev/shm/nsbox-net-*")
		t.Logf("resolv.conf directories before a later start: %d (%d before the rounds)", len(mid), len(shmBefore))
		// A new process's first filtered start removes the dead owners'.
		one := exec.Command(self, "-test.run", "^TestReview56Owner$")
		one.Env = []string{"REVIEW56_OWNER=once", "PATH=/usr/bin:/bin", "REVIEW56_NET=" + os.Getenv("REVIEW56_NET"), "HOME=/tmp"}
		if out, err := one.CombinedOutput(); err != nil {
			t.Fatalf("a later start: %v\n%s", err, out)
		}
		shmAfter, _ := filepath.Glob("/dev/shm/nsbox-net-*")
		var left []string
		for _, d := range shmAfter {
			if !slices.Contains(shmBefore, d) {
				left = append(left, d)
				os.RemoveAll(d) // this test's only
			}
		}
		if len(left) > 0 {
			t.Errorf("owners killed mid-refill left %d directories in /dev/shm that a later start did not remove: %v", len(left), left)
		}
	})
}
