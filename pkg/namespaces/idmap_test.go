package namespaces

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

func writeTemp(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// rootOpts points every file at a scratch copy.
func rootOpts(t *testing.T, subuid, subgid, passwd string) ChooseOptions {
	return ChooseOptions{EUID: 0, EGID: 0, User: "root",
		SubUID: writeTemp(t, "subuid", subuid), SubGID: writeTemp(t, "subgid", subgid),
		Passwd: writeTemp(t, "passwd", passwd), Group: writeTemp(t, "group", "root:x:0:\n")}
}

func TestChooseIdentityRoot(t *testing.T) {
	const passwd = "root:x:0:0::/root:/bin/sh\nnobody:x:65534:65534::/:/bin/false\n"
	// No nsbox entry: the documented default at the top of the range.
	id, err := ChooseIdentity(rootOpts(t, "alice:100000:65536\n", "", passwd))
	if err != nil {
		t.Fatal(err)
	}
	want := []IDRange{{0, DefaultRootStart, RangeSize}}
	if id.Mode != ModeFull || id.UID != 0 || !reflect.DeepEqual(id.UIDMap, want) || !reflect.DeepEqual(id.GIDMap, want) || id.Helper {
		t.Errorf("default: %+v", id)
	}
	if id.HostUID() != DefaultRootStart || !id.Setgroups() {
		t.Errorf("host uid %d setgroups %v", id.HostUID(), id.Setgroups())
	}
	// An nsbox entry is used as it is given.
	id, err = ChooseIdentity(rootOpts(t, "# reserved\n\nalice:100000:65536\nnsbox:200000:70000\n", "nsbox:300000:65536\n", passwd))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(id.UIDMap, []IDRange{{0, 200000, RangeSize}}) || !reflect.DeepEqual(id.GIDMap, []IDRange{{0, 300000, RangeSize}}) {
		t.Errorf("nsbox entry: %+v", id)
	}
}

func TestChooseIdentityRootRefuses(t *testing.T) {
	const passwd = "root:x:0:0::/root:/bin/sh\n"
	for _, c := range []struct{ name, subuid, passwd, want string }{
		{"overlaps another entry", "alice:100000:65536\nnsbox:150000:65536\n", passwd, "overlaps"},
		{"entry below it", "nsbox:150000:65536\nbob:215535:10\n", passwd, "overlaps"},
		{"default overlaps", fmt.Sprintf("carol:%d:10\n", DefaultRootStart+65535), passwd, "overlaps"},
		{"too small", "nsbox:200000:1000\n", passwd, "has 1000 ids"},
		{"holds a host user", "nsbox:1000:65536\n", passwd + "dave:x:5000:5000::/:/bin/sh\n", `"dave" (5000)`},
		{"malformed: fields", "nsbox:200000\n", passwd, "want NAME:START:COUNT"},
		{"malformed: number", "nsbox:2e5:65536\n", passwd, "must be decimal"},
		{"malformed: zero count", "nsbox:200000:0\n", passwd, "must be decimal"},
		{"malformed: past 2^32", "nsbox:4294967295:2\n", passwd, "at most 4294967296"},
		{"malformed: empty name", ":200000:65536\n", passwd, "want NAME:START:COUNT"},
	} {
		_, err := ChooseIdentity(rootOpts(t, c.subuid, "", c.passwd))
		if err == nil || !errors.Is(err, ErrSubID) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want ErrSubID with %q", c.name, err, c.want)
		}
	}
}

func TestChooseIdentityRootless(t *testing.T) {
	helpers := t.TempDir()
	for _, n := range []string{"newuidmap", "newgidmap"} {
		if err := os.WriteFile(filepath.Join(helpers, n), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	o := ChooseOptions{EUID: 1000, EGID: 100, User: "alice", Helpers: []string{helpers},
		SubUID: writeTemp(t, "subuid", "bob:100000:65536\nalice:165536:65536\n"),
		SubGID: writeTemp(t, "subgid", "1000:300000:65536\n")}
	id, err := ChooseIdentity(o)
	if err != nil {
		t.Fatal(err)
	}
	// The caller keeps its own ids; the rest of 0..65535 come from its
	// entries (subgid names the owner by uid here).
	wantU := []IDRange{{0, 165536, 1000}, {1000, 1000, 1}, {1001, 166536, 64535}}
	wantG := []IDRange{{0, 300000, 100}, {100, 100, 1}, {101, 300100, 65435}}
	if id.Mode != ModeFull || !id.Helper || id.UID != 1000 || id.GID != 100 || !reflect.DeepEqual(id.UIDMap, wantU) || !reflect.DeepEqual(id.GIDMap, wantG) {
		t.Errorf("got %+v", id)
	}
	if id.HostUID() != 1000 {
		t.Errorf("host uid %d", id.HostUID())
	}
	// uid 65534 (the integration tests' root-less user): no id above it
	// but 65535.
	o.EUID, o.EGID, o.User = 65534, 65534, "nobody"
	o.SubUID = writeTemp(t, "subuid", "nobody:200000:65535\n")
	o.SubGID = writeTemp(t, "subgid", "65534:200000:65535\n")
	id, err = ChooseIdentity(o)
	if err != nil {
		t.Fatal(err)
	}
	if want := []IDRange{{0, 200000, 65534}, {65534, 65534, 1}, {65535, 265534, 1}}; !reflect.DeepEqual(id.UIDMap, want) {
		t.Errorf("65534: %+v", id.UIDMap)
	}

	// Fallbacks, each with its reason.
	o.SubUID = writeTemp(t, "subuid", "someone:200000:65536\n")
	if id, err := ChooseIdentity(o); err != nil || id.Mode != ModeSingle || !strings.Contains(id.Reason, "no entry for nobody") ||
		!reflect.DeepEqual(id.UIDMap, []IDRange{{65534, 65534, 1}}) || id.Setgroups() {
		t.Errorf("no entry: %+v %v", id, err)
	}
	o.SubUID = writeTemp(t, "subuid", "nobody:200000:100\n")
	if id, err := ChooseIdentity(o); err != nil || id.Mode != ModeSingle {
		t.Errorf("small entry: %+v %v", id, err)
	}
	o.Helpers = []string{t.TempDir()}
	if id, err := ChooseIdentity(o); err != nil || id.Mode != ModeSingle || !strings.Contains(id.Reason, "package uidmap") {
		t.Errorf("no helpers: %+v %v", id, err)
	}
	o.Helpers = []string{"relative/dir", helpers + "/../" + filepath.Base(helpers)}
	o.Helpers[0] = "bin" // never searched: not absolute
	o.SubUID = writeTemp(t, "subuid", "nobody:x:1\n")
	if _, err := ChooseIdentity(o); !errors.Is(err, ErrSubID) {
		t.Errorf("malformed file: %v, want ErrSubID", err)
	}
	if _, err := ChooseIdentity(ChooseOptions{EUID: 5, EGID: 5, Single: true}); err != nil {
		t.Error(err)
	}
}

// The maps are written from the parent after the child runs; the child
// sees them, and SetIdentity then takes ids of its namespace.
func TestWriteMapsSingle(t *testing.T) {
	id, err := ChooseIdentity(ChooseOptions{EUID: os.Geteuid(), EGID: os.Getegid(), Single: true})
	if err != nil {
		t.Fatal(err)
	}
	out := spawnWithMaps(t, id, `read x <&3
set -- $(cat /proc/self/uid_map); echo uid_map=$*
set -- $(cat /proc/self/gid_map); echo gid_map=$*
echo setgroups=$(cat /proc/self/setgroups)`)
	u, g := os.Geteuid(), os.Getegid()
	want := fmt.Sprintf("uid_map=%d %d 1\ngid_map=%d %d 1\nsetgroups=deny\n", u, u, g, g)
	if out != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
}

func TestWriteMapsFullAsRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("writing a full range without newuidmap needs root")
	}
	id := &Identity{Mode: ModeFull, UIDMap: []IDRange{{0, DefaultRootStart, RangeSize}}, GIDMap: []IDRange{{0, DefaultRootStart, RangeSize}}}
	out := spawnWithMaps(t, id, `read x <&3
set -- $(cat /proc/self/uid_map); echo uid_map=$*
echo setgroups=$(cat /proc/self/setgroups)`)
	want := fmt.Sprintf("uid_map=0 %d %d\nsetgroups=allow\n", DefaultRootStart, RangeSize)
	if out != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
}

// spawnWithMaps spawns sh -c script with a pipe on fd 3, writes id's maps,
// then closes the pipe so that the script goes on.
func spawnWithMaps(t *testing.T, id *Identity, script string) string {
	t.Helper()
	out, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	gate, release, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer release.Close()
	type res struct {
		p   *os.Process
		err error
	}
	started := make(chan res, 1)
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // the parent death signal's thread
		p, err := Spawn(Options{HostNetwork: true}, SpawnArgs{Path: "/bin/sh", Argv: []string{"sh", "-c", script}, Stdout: w, Extra: gate})
		w.Close()
		gate.Close()
		started <- res{p, err}
		if err == nil {
			_, err = p.Wait()
		}
		done <- err
	}()
	r := <-started
	if r.err != nil {
		if errors.Is(r.err, syscall.EPERM) || errors.Is(r.err, syscall.EACCES) {
			t.Skipf("user namespaces are not available here: %v", r.err)
		}
		t.Fatal(r.err)
	}
	if err := WriteMaps(r.p.Pid, id); err != nil {
		r.p.Kill()
		<-done
		t.Fatal(err)
	}
	release.Close()
	b, _ := io.ReadAll(out)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A container's root (no CAP_SYS_ADMIN over the host) cannot make the
// idmapped mounts a root range needs: it gets the single-id map, and the
// reason says why.
func TestChooseIdentityRootNotHostAdmin(t *testing.T) {
	o := rootOpts(t, "alice:100000:65536\n", "", "root:x:0:0::/root:/bin/sh\n")
	o.RootNotHostAdmin = "uid 0 without CAP_SYS_ADMIN"
	id, err := ChooseIdentity(o)
	if err != nil {
		t.Fatal(err)
	}
	if id.Mode != ModeSingle || id.UID != 0 || id.Reason != o.RootNotHostAdmin || id.Setgroups() {
		t.Errorf("container root: %+v", id)
	}
}

// A helper that refuses says why, in its own words, with its exit status:
// newuidmap asked for a range the caller's /etc/subuid entry does not give
// (or for a process whose maps are written already: this one's).
func TestHelperReportsItsMessage(t *testing.T) {
	const helper = "/usr/bin/newuidmap"
	if _, err := os.Stat(helper); err != nil {
		t.Skipf("%s is not installed (package uidmap)", helper)
	}
	h, err := startHelper(helper, os.Getpid(), []IDRange{{0, 4000000000, 1}})
	if err != nil {
		t.Fatal(err)
	}
	err = h.finish()
	var me *MapError
	if !errors.As(err, &me) || me.File != helper {
		t.Fatalf("err = %v, want a *MapError naming %s", err, helper)
	}
	if msg := err.Error(); !strings.Contains(msg, "newuidmap:") || !strings.Contains(msg, "exit status 1") {
		t.Errorf("error %q lacks the helper's message or its exit status", msg)
	}
	_, err = startHelper("/nonexistent/newuidmap", os.Getpid(), nil)
	if !errors.As(err, &me) || !errors.Is(err, syscall.ENOENT) {
		t.Errorf("missing helper: %v, want a *MapError wrapping ENOENT", err)
	}
}
