package landlock

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The restricting tests re-execute the test binary: a Landlock domain
// cannot be left, and the test process must stay free.
const childEnv = "NSBOX_LANDLOCK_TEST_CHILD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(childEnv); dir != "" {
		os.Exit(child(dir))
	}
	os.Exit(m.Run())
}

// tree makes root/{a, secret/key, ws/f, ws/.git/config} and returns root.
func tree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"secret", "ws/.git", "ws/sub"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"a", "secret/key", "ws/f", "ws/.git/config"} {
		if err := os.WriteFile(filepath.Join(root, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("secret", filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	return root
}

func grantsFor(root string) []Grant {
	return []Grant{
		{Path: root, Access: ReadExec},
		{Path: filepath.Join(root, "secret"), Access: 0},
		{Path: filepath.Join(root, "ws"), Access: ReadWrite},
		{Path: filepath.Join(root, "ws/.git"), Access: ReadExec},
	}
}

func TestExpandSplitsNarrowerGrants(t *testing.T) {
	root := tree(t)
	e, err := Expand(grantsFor(root))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]AccessFS{}
	for _, r := range e.Rules {
		if _, dup := got[r.Path]; dup {
			t.Errorf("two rules for %s", r.Path)
		}
		got[r.Path] = r.Access
	}
	want := map[string]AccessFS{
		root:                           ReadDir,   // on the way to secret: listable only
		filepath.Join(root, "a"):       ReadExec,  // a sibling keeps the wider grant
		filepath.Join(root, "ws/f"):    ReadWrite, // ws is split for .git
		filepath.Join(root, "ws/sub"):  ReadWrite,
		filepath.Join(root, "ws/.git"): ReadExec,
	}
	for p, a := range want {
		if got[p] != a {
			t.Errorf("rule for %s = %s, want %s", p, got[p], a)
		}
	}
	for _, p := range []string{filepath.Join(root, "secret"), filepath.Join(root, "secret/key"), filepath.Join(root, "link")} {
		if a, ok := got[p]; ok {
			t.Errorf("%s got a rule (%s); hidden paths and symlinks get none", p, a)
		}
	}
	if len(e.Frozen) != 1 || e.Frozen[0] != filepath.Join(root, "ws") {
		t.Errorf("Frozen = %v, want [%s]", e.Frozen, filepath.Join(root, "ws"))
	}
	if len(e.Listable) != 1 || e.Listable[0] != filepath.Join(root, "secret") {
		t.Errorf("Listable = %v, want the hidden dir", e.Listable)
	}
}

func TestExpandWiderBeneathNeedsNoSplit(t *testing.T) {
	root := tree(t)
	e, err := Expand([]Grant{{Path: root, Access: ReadExec}, {Path: filepath.Join(root, "ws"), Access: ReadWrite}})
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Rules) != 2 || len(e.Frozen) != 0 {
		t.Fatalf("rules %v frozen %v: a wider grant beneath needs no split", e.Rules, e.Frozen)
	}
}

func TestExpandRelative(t *testing.T) {
	if _, err := Expand([]Grant{{Path: "rel", Access: ReadOnly}}); err == nil {
		t.Fatal("a relative path was accepted")
	}
}

func TestABI(t *testing.T) {
	abi, err := ABI()
	if err != nil {
		t.Skipf("no Landlock here: %v", err)
	}
	if abi < 1 {
		t.Fatalf("ABI %d", abi)
	}
}

func TestBuildDropsWhatTheABILacks(t *testing.T) {
	abi, err := ABI()
	if err != nil {
		t.Skipf("no Landlock here: %v", err)
	}
	r, err := Build(Config{HandledFS: ReadWrite, HandledNet: BindTCP | ConnectTCP, Scoped: ScopeSignal | ScopeAbstractUnix, BestEffort: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Report.HandledFS != fsForABI(abi)&ReadWrite {
		t.Errorf("handled %s on ABI %d", r.Report.HandledFS, abi)
	}
	if (abi >= 6) != (r.Report.Scoped != 0) || (abi >= 4) != (r.Report.HandledNet != 0) {
		t.Errorf("ABI %d: report %+v", abi, r.Report)
	}
	if abi < 6 && len(r.Report.Dropped) == 0 {
		t.Error("dropped scopes not reported")
	}
}

// TestBuildListsWritableInodes: Writable holds the inodes of the rules
// granting WriteFile (a directory and a file), and not those of read-only
// rules: the metadata gate's list (pkg/notify MetaGate).
func TestBuildListsWritableInodes(t *testing.T) {
	if _, err := ABI(); err != nil {
		t.Skipf("no Landlock here: %v", err)
	}
	dir := t.TempDir()
	rw, ro, f := filepath.Join(dir, "rw"), filepath.Join(dir, "ro"), filepath.Join(dir, "f")
	for _, d := range []string{rw, ro} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Build(Config{HandledFS: ReadWrite, BestEffort: true, Paths: []PathRule{
		{Path: rw, Access: ReadWrite}, {Path: ro, Access: ReadExec}, {Path: f, Access: ReadFile | WriteFile}}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ino := func(p string) Inode {
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		return Inode{Dev: st.Dev, Ino: st.Ino}
	}
	want := []Inode{ino(rw), ino(f)}
	if len(r.Writable) != 2 || r.Writable[0] != want[0] || r.Writable[1] != want[1] {
		t.Errorf("Writable %v, want %v (rw, f; not ro %v)", r.Writable, want, ino(ro))
	}
}

// TestRestrict applies the expansion of grantsFor in a child, with every
// TCP connect refused and both scopes, and has the child probe each.
func TestRestrict(t *testing.T) {
	if _, err := ABI(); err != nil {
		t.Skipf("no Landlock here: %v", err)
	}
	root := tree(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	abstract := fmt.Sprintf("@nsbox-landlock-test-%d", os.Getpid())
	ul, err := net.Listen("unix", abstract)
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+root, "TCP_ADDR="+ln.Addr().String(), "ABSTRACT="+abstract, "PARENT="+strconv.Itoa(os.Getpid()))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		t.Log(line)
		if strings.HasPrefix(line, "FAIL") {
			t.Error(line)
		}
	}
	if !strings.Contains(string(out), "done") {
		t.Fatalf("the child did not finish:\n%s", out)
	}
}

func child(root string) int {
	runtime.LockOSThread() // the restricted thread; probes run on it
	e, err := Expand(grantsFor(root))
	if err != nil {
		fmt.Println("FAIL expand:", err)
		return 1
	}
	r, err := Build(Config{HandledFS: ReadWrite, Paths: e.Rules, HandledNet: BindTCP | ConnectTCP,
		Scoped: ScopeAbstractUnix | ScopeSignal, BestEffort: true})
	if err != nil {
		fmt.Println("FAIL build:", err)
		return 1
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fmt.Println("FAIL no_new_privs:", err)
		return 1
	}
	if err := r.RestrictSelf(); err != nil {
		fmt.Println("FAIL restrict:", err)
		return 1
	}
	rep := r.Report
	check := func(name string, err error, allowed bool) {
		switch {
		case allowed && err != nil:
			fmt.Printf("FAIL %s: refused: %v\n", name, err)
		case !allowed && err == nil:
			fmt.Printf("FAIL %s: allowed\n", name)
		case !allowed && !errors.Is(err, unix.EACCES) && !errors.Is(err, unix.EPERM):
			fmt.Printf("FAIL %s: refused with %v, want EACCES or EPERM\n", name, err)
		default:
			fmt.Printf("ok %s (%v)\n", name, err)
		}
	}
	read := func(p string) error {
		fd, err := unix.Open(filepath.Join(root, p), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == nil {
			unix.Close(fd)
		}
		return err
	}
	write := func(p string) error {
		fd, err := unix.Open(filepath.Join(root, p), unix.O_WRONLY|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
		if err == nil {
			unix.Close(fd)
		}
		return err
	}
	check("read a", read("a"), true)
	check("read secret/key", read("secret/key"), false)
	check("read through a symlink to secret", read("link/key"), false)
	check("write a", write("a"), false)
	check("write ws/f", write("ws/f"), true)
	check("create ws/sub/new", write("ws/sub/new"), true)
	check("write ws/.git/config", write("ws/.git/config"), false)
	check("create ws/.git/hooks-new", write("ws/.git/new"), false)
	check("create a file directly in frozen ws", write("ws/new"), false)
	check("unlink protected ws/.git/config", unix.Unlink(filepath.Join(root, "ws/.git/config")), false)
	if rep.HandledNet&ConnectTCP != 0 {
		conn, err := net.Dial("tcp", os.Getenv("TCP_ADDR"))
		if conn != nil {
			conn.Close()
		}
		check("TCP connect", unwrapSyscall(err), false)
	}
	if rep.Scoped&ScopeAbstractUnix != 0 {
		conn, err := net.Dial("unix", os.Getenv("ABSTRACT"))
		if conn != nil {
			conn.Close()
		}
		check("connect to an abstract socket outside", unwrapSyscall(err), false)
	}
	if rep.Scoped&ScopeSignal != 0 {
		ppid, _ := strconv.Atoi(os.Getenv("PARENT"))
		check("signal a process outside", unix.Kill(ppid, 0), false)
		check("signal itself", unix.Kill(os.Getpid(), 0), true)
	}
	fmt.Println("done")
	return 0
}

func unwrapSyscall(err error) error {
	var se *os.SyscallError
	if errors.As(err, &se) {
		return se.Err
	}
	return err
}

// BenchmarkScopesStep is what the native worker's "restrict scopes
// (landlock)" step costs but for its one landlock_restrict_self(2), which
// cannot be repeated in one process (a domain is never left, and at most
// 16 stack): the ABI query, the ruleset's creation and its close.
func BenchmarkScopesStep(b *testing.B) {
	if _, err := ABI(); err != nil {
		b.Skipf("no Landlock here: %v", err)
	}
	for i := 0; i < b.N; i++ {
		if _, err := ABI(); err != nil {
			b.Fatal(err)
		}
		r, err := Build(Config{Scoped: ScopeAbstractUnix | ScopeSignal})
		if err != nil {
			b.Fatal(err)
		}
		r.Close()
	}
}

// BenchmarkRestrictSelf measures landlock_restrict_self(2) in fresh
// threads, 15 restrictions per thread at most (the kernel's limit is 16
// stacked domains).
func BenchmarkRestrictSelf(b *testing.B) {
	if _, err := ABI(); err != nil {
		b.Skipf("no Landlock here: %v", err)
	}
	r, err := Build(Config{Scoped: ScopeAbstractUnix | ScopeSignal})
	if err != nil {
		b.Skip(err)
	}
	defer r.Close()
	done := 0
	for done < b.N {
		ch := make(chan error)
		n := min(15, b.N-done)
		go func() {
			// The thread is restricted and never unlocked: it ends with
			// the goroutine, and no other goroutine runs on it.
			runtime.LockOSThread()
			if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
				ch <- err
				return
			}
			for j := 0; j < n; j++ {
				if err := r.RestrictSelf(); err != nil {
					ch <- err
					return
				}
			}
			ch <- nil
		}()
		if err := <-ch; err != nil {
			b.Fatal(err)
		}
		done += n
	}
}

// TestLastIsSymlink: SkipMissing skips a rule for a symlink only when the
// symlink is the last component; one higher up stays an error.
func TestLastIsSymlink(t *testing.T) {
	d := t.TempDir()
	os.Mkdir(filepath.Join(d, "real"), 0o755)
	os.Symlink("real", filepath.Join(d, "link"))
	os.Symlink("x", filepath.Join(d, "real", "inner"))
	for p, want := range map[string]bool{
		filepath.Join(d, "link"):          true,
		filepath.Join(d, "real", "inner"): true,
		filepath.Join(d, "link", "inner"): false, // a symlink above the last
		filepath.Join(d, "real"):          false,
		filepath.Join(d, "missing"):       false,
	} {
		if got := lastIsSymlink(p); got != want {
			t.Errorf("lastIsSymlink(%s) = %v, want %v", p, got, want)
		}
	}
}
