package integration

// Review 46: the script runner and the file tools.
//
// The file tools run in the sandbox's worker, PID 1, which is outside the
// sandbox's memory limit and its CPU cgroup (docs/security.md, "Kept
// outputs"; "the worker runs outside the sandbox's memory limit, so what a
// walk holds must not depend on the workspace", docs/tools.md). edit_file
// bounds the file it reads (16 MiB) and its arguments (old_string and
// new_string 1 MiB characters, diff 4 MiB), but not what it builds from
// them, nor the time it spends matching a diff.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReview46EditFileReplaceAllAmplification
//
// Finding (MEDIUM): edit_file with replace_all builds the new content with
// bytes.Replace, whose size is len(file) + n*(len(new_string) -
// len(old_string)): a 16 MiB file (the bound) of one repeated character,
// old_string that character and a 64 KiB new_string ask the worker for
// 1 TiB at once. The worker is PID 1 of the sandbox and outside its memory
// limit: the allocation either fails, and the Go runtime's "out of memory"
// is fatal (not a panic the tool registry recovers), so the worker dies and
// with it the whole session (its background processes, dev servers, /tmp),
// or, sized to fit (new_string of 1 KiB: 16 GiB), it is allocated and
// filled on the host, outside every limit of the sandbox. docs/tools.md
// promises "the worker never crashes".
//
// Attack: a model (or a prompt injection in a file it read) calls
// edit_file {"path":"big","old_string":"a","new_string":"<64 KiB>",
// "replace_all":true} on a 16 MiB file it wrote with write_file or
// run_command. `nsbox tools call` answers "session closed" (exit 125)
// instead of a tool result; the kernel logs __vm_enough_memory for 1 TiB.
//
// Fix: bound the edited content (as the file read is bounded, 16 MiB, or
// some multiple), computed before any allocation, and refuse with a tool
// failure and the file unchanged.
func TestReview46EditFileReplaceAllAmplification(t *testing.T) {
	if b, err := os.ReadFile("/proc/sys/vm/overcommit_memory"); err == nil && strings.TrimSpace(string(b)) == "1" {
		// With "always overcommit" the unfixed worker would not fail its
		// 1 TiB allocation but fill it, and take the host down.
		t.Skip("vm.overcommit_memory is 1: the unfixed worker would really fill 1 TiB")
	}
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		f := filepath.Join(ws, "big")
		u.writeFile(t, f, strings.Repeat("a", 16<<20), 0o644)
		args := jsonArgs(t, map[string]any{
			"path": "big", "old_string": "a", "new_string": strings.Repeat("b", 64<<10), "replace_all": true,
		})
		r := u.run(t, &runOpts{dir: ws}, "tools", "call", "edit_file", args, "--workspace", ws)
		if !strings.HasPrefix(strings.TrimSpace(r.stdout), "{") {
			t.Fatalf("edit_file with a replace_all that multiplies the file by 65536: no tool result (exit %d): the worker died\nstderr: %s", r.code, r.stderr)
		}
		tr := toolResultOf(t, r)
		if tr.Success {
			t.Fatalf("edit_file wrote a 1 TiB file?")
		}
		if fi, err := os.Stat(f); err != nil || fi.Size() != 16<<20 {
			t.Fatalf("the file changed: %v %v", fi, err)
		}
	})
}

// TestReview46EditFileDiffSearchOutlivesTimeout
//
// Finding (MEDIUM): edit_file's diff form looks for a hunk whose line
// number is off "nearby", which findHunk does across the whole file:
// for each of the file's lines it compares the hunk's old lines, and it
// never looks at the call's context. A hunk of 30,000 context lines that
// all match but the last, against a file of 4,000,000 identical lines,
// costs about 10^11 string comparisons. The call's timeout answers the
// caller ("timed out after 2s") but the goroutine runs on in the worker,
// which is outside the sandbox's CPU cgroup: each such call pins a host
// core for minutes (hours with a 4 MiB diff over MCP), and a few calls pin
// every core, for as long as the session lives.
//
// Attack: in a session (nsbox mcp, nsbox tools call --session), write a
// file of 4M lines "a" (8 MB) and call edit_file with
// "@@ -1,30001 +1,30000 @@\n" + " a\n"*30000 + "-b\n", a few times.
// `ps` shows nsbox-init (the worker) at 100% CPU long after every call
// returned.
//
// Fix: check ctx in findHunk (and bound its work, e.g. look for the hunk
// only within a window of its line number, or use an index of the file's
// lines), so that a timed-out call stops working.
func TestReview46EditFileDiffSearchOutlivesTimeout(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		u.writeFile(t, filepath.Join(ws, "lines"), strings.Repeat("a\n", 4_000_000), 0o644)
		name := fmt.Sprintf("rv46-%d-%d", os.Getpid(), u.uid)
		t.Cleanup(func() { u.run(t, nil, "session", "stop", name) })
		if tr, _ := u.callTool(t, ws, "list_directory", `{}`, "--session", name); !tr.Success {
			t.Fatalf("session start: %s", tr.err())
		}
		worker := sessionWorker(t, name)
		diff := "@@ -1,30001 +1,30000 @@\n" + strings.Repeat(" a\n", 30000) + "-b\n"
		start := time.Now()
		r := u.run(t, &runOpts{dir: ws}, "tools", "call", "edit_file", jsonArgs(t, map[string]any{"path": "lines", "diff": diff}),
			"--workspace", ws, "--session", name, "--timeout", "2s")
		tr := toolResultOf(t, r)
		if tr.Success {
			t.Fatalf("the hunk applied?")
		}
		t.Logf("the call answered after %s: %s", time.Since(start).Round(time.Millisecond), clip46(tr.err(), 200))
		// The call is over: the worker should be idle now.
		before := cpuTicks(t, worker)
		time.Sleep(5 * time.Second)
		after := cpuTicks(t, worker)
		if used := after - before; used > 50 { // 0.5 s of CPU in 5 s
			t.Fatalf("the worker (pid %d) used %d ticks of CPU in the 5 s after the edit_file call had returned: the timed-out diff search goes on outside the sandbox's CPU limit", worker, used)
		}
	})
}

// TestReview46EditFileDiffMemory
//
// Finding (LOW): the diff form splits the file into a []fileLine (two
// strings, 32 bytes a line) and builds the result as another []fileLine
// grown by append: a file of 16 MiB of empty lines costs the worker about
// 2 GB for a one-line insertion (maximum RSS measured by wait4 of the
// nsbox that ran the call: 2,044,192 KiB), 125 times the 16 MiB bound
// edit_file sets on what it reads. The worker is outside the memory limit,
// and an MCP client's concurrent calls add up on the host.
//
// Attack: a 16 MiB file of "\n" and edit_file {"diff":"@@ -1,1 +1,2 @@\n
// \n+x\n"}, a few calls at once in a session.
//
// Fix: index lines by offset into the content (or bound the number of
// lines a diff edit takes), and write the result without a second
// per-line copy.
func TestReview46EditFileDiffMemory(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		u.writeFile(t, filepath.Join(ws, "nl"), strings.Repeat("\n", 16<<20-1024), 0o644)
		args := jsonArgs(t, map[string]any{"path": "nl", "diff": "@@ -1,1 +1,2 @@\n \n+x\n"})
		cmd := []string{"tools", "call", "edit_file", args, "--workspace", ws}
		r, maxrss := u.runRusage(t, ws, cmd...)
		if tr := toolResultOf(t, r); !tr.Success {
			t.Fatalf("edit_file: %s", tr.err())
		}
		t.Logf("maximum RSS of nsbox and its worker: %d MiB", maxrss>>10)
		if maxrss > 1<<20 { // KiB: 1 GiB
			t.Fatalf("a one-line diff edit of a 16 MiB file took %d MiB of memory outside the sandbox's limit", maxrss>>10)
		}
	})
}

// TestReview46ScriptOutputCutSilently
//
// Finding (LOW): `nsbox script` collects the script's stdout and stderr
// (sandbox.DefaultMaxOutput, 16 MiB each) and prints them when it ends;
// what is over the bound is dropped and nothing says so: the exit status
// is the script's own (0), no message, and Result.Truncated is ignored.
// A caller that takes the output as complete (an agent parsing JSON, a
// pipeline `nsbox script gen.py > out.tar`) gets a cut file that looks
// whole, and the end of the output, where the error or the summary is,
// is what is lost. docs/tools.md says nothing of this bound.
//
// Attack/repro: nsbox script --lang bash -c 'head -c 17000000 /dev/zero |
// tr "\0" a; echo END' | wc -c   → 16777216, exit 0, "END" gone.
//
// Fix: stream the output (as nsbox run does), or say that it was cut
// (a message on stderr and a non-zero exit, or keep the tail as the tools
// do).
func TestReview46ScriptOutputCutSilently(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		r := u.run(t, nil, "script", "--lang", "bash", "-c", `head -c 17000000 /dev/zero | tr '\0' a; echo END`)
		if len(r.stdout) == 17000004 && strings.HasSuffix(r.stdout, "aEND\n") {
			return // all of it
		}
		if r.code != 0 && (strings.Contains(r.stderr, "cut") || strings.Contains(r.stderr, "truncat")) {
			return // said so
		}
		t.Fatalf("the script printed 17000004 bytes; nsbox script gave %d of them, exit %d, and said nothing (stderr %q)", len(r.stdout), r.code, clip46(r.stderr, 300))
	})
}

// sessionWorker is the host pid of the worker of session name: the child
// of its `nsbox session serve NAME` daemon.
func sessionWorker(t *testing.T, name string) int {
	t.Helper()
	for _, p := range pidsOfMarker("session\x00serve\x00" + name + "\x00") {
		tasks, _ := filepath.Glob("/proc/" + p + "/task/*/children")
		for _, f := range tasks {
			b, _ := os.ReadFile(f)
			for _, c := range strings.Fields(string(b)) {
				argv, _ := os.ReadFile("/proc/" + c + "/cmdline")
				if strings.HasPrefix(string(argv), "nsbox-init") {
					pid, _ := strconv.Atoi(c)
					return pid
				}
			}
		}
	}
	t.Fatalf("no worker found for session %s", name)
	return 0
}

// cpuTicks is utime+stime of pid (all its threads), in clock ticks.
func cpuTicks(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatalf("worker %d: %v", pid, err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return ut + st
}

// runRusage runs nsbox as u and returns its result and the maximum RSS
// (KiB) that wait4 reports for it and its waited-for descendants (the
// worker is its child).
func (u user) runRusage(t *testing.T, dir string, args ...string) (result, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, nsboxBin(t), args...)
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + u.home(), "LANG=C.UTF-8"}
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	u.asUser(cmd)
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("running nsbox %v: %v", args, err)
	}
	ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if ru == nil {
		t.Fatalf("no rusage")
	}
	return result{stdout: stdout.String(), stderr: stderr.String(), code: code}, ru.Maxrss
}

func clip46(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
