package session

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

// A root-less prestarted worker gets its id maps as soon as it starts,
// before its policy is known (newuidmap/newgidmap, with the full range
// when /etc/subuid has an entry for the caller). These tests check that
// the maps a command sees are still those its policy asks for, and that a
// worker whose maps were under way is never left behind.

// withSubIDEntry gives uid 65534 an entry in /etc/subuid and /etc/subgid
// for the test, as TestIdentityRootlessFullRange does (newuidmap reads
// only the real files), and restores them byte for byte afterwards. Only
// root can, in the outer run; the root-less half (a child under uid 65534)
// then sees it. Elsewhere the test runs with whatever the host has.
func withSubIDEntry(t *testing.T) {
	if os.Getuid() != 0 || os.Getenv(innerEnv) != "" {
		return
	}
	for _, h := range []string{"/usr/bin/newuidmap", "/usr/bin/newgidmap"} {
		if _, err := os.Stat(h); err != nil {
			return // the root-less half runs with the single-id map
		}
	}
	// The root-less half's first full-range start leaves an identity
	// holder (pkg/namespaces, holder.c) waiting for the next: ended with
	// the test, so that none outlives the entry.
	t.Cleanup(func() { endHolders(65534) })
	for _, path := range []string{"/etc/subuid", "/etc/subgid"} {
		old, err := os.ReadFile(path)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		existed := err == nil
		mode := os.FileMode(0o644)
		if st, err := os.Stat(path); err == nil {
			mode = st.Mode().Perm()
		}
		t.Cleanup(func() {
			if !existed {
				os.Remove(path)
				return
			}
			os.WriteFile(path, old, mode)
		})
		entry := "65534:1000000:65536\n"
		if len(old) > 0 && !bytes.HasSuffix(old, []byte("\n")) {
			entry = "\n" + entry
		}
		if err := os.WriteFile(path, append(append([]byte{}, old...), entry...), mode); err != nil {
			t.Fatal(err)
		}
	}
}

// mapsInside is the number of lines and of ids of the sandbox's uid map,
// and its setgroups setting.
func mapsInside(t *testing.T, s *sandbox.Session) (lines int, ids uint64, setgroups string) {
	t.Helper()
	res := sh(t, s, "cat /proc/self/uid_map; echo; cat /proc/self/setgroups")
	if res.ExitCode != 0 {
		t.Fatalf("reading the maps: exit %d, %s", res.ExitCode, res.Stderr)
	}
	parts := strings.SplitN(string(res.Stdout), "\n\n", 2)
	if len(parts) != 2 {
		t.Fatalf("unexpected output %q", res.Stdout)
	}
	for _, l := range strings.Split(strings.TrimSpace(parts[0]), "\n") {
		f := strings.Fields(l)
		if len(f) != 3 {
			t.Fatalf("uid_map line %q", l)
		}
		n, err := strconv.ParseUint(f[2], 10, 32)
		if err != nil {
			t.Fatal(err)
		}
		lines++
		ids += n
	}
	return lines, ids, strings.TrimSpace(parts[1])
}

func TestPrestartedWorkerMapsFollowThePolicy(t *testing.T) {
	withSubIDEntry(t)
	eachUser(t, func(t *testing.T) {
		id, err := sandbox.CurrentIdentity(sandbox.Policy{})
		if err != nil {
			t.Fatal(err)
		}
		full := id.Mode == "full"

		// The default policy adopts the worker and sees its identity's maps.
		w := sandbox.Prestart(sandbox.PrestartHint{})
		pid := w.Pid()
		s := start(t, sandbox.Policy{}, sandbox.WithPrestarted(w))
		if s.Pid() != pid {
			t.Fatalf("session worker %d, prestarted worker %d: not adopted", s.Pid(), pid)
		}
		lines, ids, setgroups := mapsInside(t, s)
		if full && (ids != 65536 || setgroups != "allow") {
			t.Fatalf("%s: %d ids in %d lines, setgroups %q; want the full range (65536 ids), setgroups allow", id.Mode, ids, lines, setgroups)
		}
		if !full && (lines != 1 || ids != 1 || setgroups != "deny") {
			t.Fatalf("%s: %d ids in %d lines, setgroups %q; want one id, setgroups deny", id.Mode, ids, lines, setgroups)
		}

		// A policy that asks for the single-id map gets it, even from a
		// worker whose full-range maps were written before the policy
		// was known: that worker is discarded, not adopted.
		w = sandbox.Prestart(sandbox.PrestartHint{})
		pid = w.Pid()
		s = start(t, sandbox.Policy{SingleID: true}, sandbox.WithPrestarted(w))
		if lines, ids, setgroups := mapsInside(t, s); lines != 1 || ids != 1 || setgroups != "deny" {
			t.Fatalf("SingleID: %d ids in %d lines, setgroups %q; want one id, setgroups deny", ids, lines, setgroups)
		}
		if full && id.Helper && (s.Pid() == pid || !gone(pid)) {
			t.Fatalf("the worker %d mapped with the full range before its policy was adopted or left running for a SingleID policy (worker %d)", pid, s.Pid())
		}

		// A worker whose maps may still be under way ends with a failed
		// Start, and with Discard.
		w = sandbox.Prestart(sandbox.PrestartHint{})
		pid = w.Pid()
		bad := sandbox.Policy{Mounts: []sandbox.Mount{{Kind: sandbox.MountBind, Source: "/nonexistent/nsbox-idmaps", Dest: "/x"}}}
		if _, err := sandbox.Start(context.Background(), bad, sandbox.WithPrestarted(w)); err == nil {
			t.Fatal("Start with a missing mount source succeeded")
		}
		if !gone(pid) {
			t.Fatalf("prestarted worker %d survived a failed Start", pid)
		}
		w = sandbox.Prestart(sandbox.PrestartHint{})
		pid = w.Pid()
		w.Discard()
		if !gone(pid) {
			t.Fatalf("prestarted worker %d survived Discard", pid)
		}
	})
}

// With a full range (setgroups allowed) the worker drops the caller's
// supplementary groups before anything of the sandbox runs: unmapped, they
// would still grant access to the host files of those groups. A caller
// without any skips the (all-threads) setgroups; one with some must still
// lose them. Root only: it sets this test process's own groups.
func TestFullRangeDropsSupplementaryGroups(t *testing.T) {
	if os.Getuid() != 0 || os.Getenv(innerEnv) != "" {
		t.Skip("needs root to give the test process supplementary groups")
	}
	requireSandbox(t)
	id, err := sandbox.CurrentIdentity(sandbox.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	if !id.Setgroups {
		t.Skipf("root gets the single-id map here (%s): setgroups stays denied and the groups as they are", id.Reason)
	}
	old, err := syscall.Getgroups()
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setgroups([]int{4, 24}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Setgroups(old) })
	for _, groups := range [][]int{{4, 24}, {}} {
		if err := syscall.Setgroups(groups); err != nil {
			t.Fatal(err)
		}
		s := start(t, sandbox.Policy{})
		res := sh(t, s, "grep '^Groups:' /proc/self/status")
		if got := strings.Fields(string(res.Stdout)); len(got) != 1 {
			t.Errorf("caller's groups %v: inside %q, want no supplementary group", groups, res.Stdout)
		}
	}
}

// BenchmarkStartIdentity is what the full range adds to a cold start, the
// way the CLI starts: a prestarted worker (whose root-less maps begin at
// once), Start, /bin/true, Close; with the identity this caller gets by
// default and with the single-id map, alternated in one loop so that both
// see the same load. It reports the median of each and their ratio. The
// single-id runs of a root-less caller point the sub-id files at an empty
// one (as a caller without an entry has), so that its prestarted worker
// is given the single-id map from the start, as it would be. Run it as
// root and, from a copy of the test binary, as a user with an /etc/subuid
// entry:
//
//	go test -tags=seccomp -c -o /tmp/session.test ./test/integration/session/
//	/tmp/session.test -test.run '^$' -test.bench StartIdentity -test.benchtime 200x
func BenchmarkStartIdentity(b *testing.B) {
	ctx := context.Background()
	empty := filepath.Join(b.TempDir(), "subid")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		b.Fatal(err)
	}
	run := func(single bool) time.Duration {
		p := sandbox.Policy{SingleID: single}
		if single && os.Geteuid() != 0 {
			os.Setenv(sandbox.EnvSubUID, empty)
			os.Setenv(sandbox.EnvSubGID, empty)
			defer os.Unsetenv(sandbox.EnvSubUID)
			defer os.Unsetenv(sandbox.EnvSubGID)
		}
		t0 := time.Now()
		s, err := sandbox.Start(ctx, p, sandbox.WithPrestarted(sandbox.Prestart(sandbox.HintFor(p))))
		if err != nil {
			b.Skipf("no sandbox here: %v", err)
		}
		res, err := s.Exec(ctx, sandbox.Command{Argv: []string{"/bin/true"}})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("/bin/true: %v, exit %d", err, res.ExitCode)
		}
		s.Close()
		return time.Since(t0)
	}
	id, err := sandbox.CurrentIdentity(sandbox.Policy{})
	if err != nil {
		b.Fatal(err)
	}
	var dflt, single []time.Duration
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			dflt = append(dflt, run(false))
			single = append(single, run(true))
		} else {
			single = append(single, run(true))
			dflt = append(dflt, run(false))
		}
	}
	med := func(d []time.Duration) float64 {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return float64(d[len(d)/2]) / 1e6
	}
	m, s := med(dflt), med(single)
	b.ReportMetric(m, id.Mode+"-ms")
	b.ReportMetric(s, "single-ms")
	b.ReportMetric(m/s, id.Mode+"/single")
}

// endHolders kills uid's identity holders and removes their directory.
func endHolders(uid int) {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		var st syscall.Stat_t
		if bytes.HasPrefix(cmd, []byte("nsbox-idholder\x00")) && syscall.Stat("/proc/"+e.Name(), &st) == nil && int(st.Uid) == uid {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	os.RemoveAll("/tmp/nsbox-" + strconv.Itoa(uid))
}
