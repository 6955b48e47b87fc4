package mounts

import (
	"os"
	"strings"
	"syscall"
	"testing"
)

// TestBuildProtectPlaceholders: the missing paths of a run of protected
// entries are made (an inode each), nothing is
// made below a protected directory of the same run or where the parent is
// missing, and none of them can be written inside.
func TestBuildProtectPlaceholders(t *testing.T) {
	d := hostTempDir(t)
	mustWrite(t, d+"/kept", "KEPT")
	p := Plan{Mounts: []Mount{
		{Kind: Bind, Source: d, Dest: "/w"},
		{Kind: Protect, Dest: "/w/.git", Dir: true},
		{Kind: Protect, Dest: "/w/.git/hooks", Dir: true}, // covered by .git
		{Kind: Protect, Dest: "/w/.mcp.json"},
		{Kind: Protect, Dest: "/w/.envrc"},
		{Kind: Protect, Dest: "/w/.cargo", Dir: true},
		{Kind: Protect, Dest: "/w/.cargo/config"}, // covered by .cargo
		{Kind: Protect, Dest: "/w/kept"},
		{Kind: Protect, Dest: "/w/no/such/parent"},
	}}
	out, stderr, code := buildAndRun(t, p, `
cd /w
for f in .mcp.json .envrc kept .git/x .git/hooks .cargo/config no/such/parent; do
	if (echo x > $f) 2>/dev/null; then echo "wrote $f"; fi
done
mkdir -p no/such 2>/dev/null && echo "made no/such"
echo "ls=[$(ls -A . | tr '\n' ' ')]"
`)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, stderr, out)
	}
	// no/such/parent was not protected (its parent was missing): the
	// sandbox may make its parent, like any new path.
	if strings.Contains(out, "wrote") {
		t.Errorf("a protected path was written inside:\n%s", out)
	}
	if want := "ls=[.cargo .envrc .git .mcp.json kept no ]"; !strings.Contains(out, want) {
		t.Errorf("got %q, want a line %q", out, want)
	}
	var mcp, envrc syscall.Stat_t
	if err := syscall.Lstat(d+"/.mcp.json", &mcp); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Lstat(d+"/.envrc", &envrc); err != nil {
		t.Fatal(err)
	}
	// Never one inode under two names: a write through one (the host's,
	// another sandbox's that lifts it) would land in the other.
	if mcp.Ino == envrc.Ino || mcp.Nlink != 1 || mcp.Size != 0 {
		t.Errorf("placeholders .mcp.json and .envrc: inodes %d and %d, %d links, size %d; want two empty inodes of one link", mcp.Ino, envrc.Ino, mcp.Nlink, mcp.Size)
	}
	for _, gone := range []string{"/.git/hooks", "/.cargo/config"} {
		if _, err := os.Lstat(d + gone); err == nil {
			t.Errorf("%s was made below a protected directory of the same run", gone)
		}
	}
	if b, _ := os.ReadFile(d + "/kept"); string(b) != "KEPT" {
		t.Errorf("kept = %q", b)
	}
}

// TestBuildProtectLink: a NoFollow protect pins the symlink itself (it
// cannot be removed or renamed inside, and still points where it did),
// and one whose symlink is gone stops the build (fail closed).
func TestBuildProtectLink(t *testing.T) {
	d := hostTempDir(t)
	if err := os.Mkdir(d+"/shared", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("shared", d+"/.claude"); err != nil {
		t.Fatal(err)
	}
	p := Plan{Mounts: []Mount{
		{Kind: Bind, Source: d, Dest: "/w"},
		{Kind: Protect, Dest: "/w/.claude", NoFollow: true},
		{Kind: Protect, Dest: "/w/shared", Dir: true},
	}}
	out, stderr, code := buildAndRun(t, p, `
cd /w
rm .claude 2>/dev/null && echo removed
mv .claude x 2>/dev/null && echo renamed
echo "link=$(readlink .claude)"
`)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, stderr, out)
	}
	if out != "link=shared\n" {
		t.Errorf("got %q, want the symlink kept in place", out)
	}
	p.Mounts[1].Dest = "/w/.gone"
	if _, stderr, code := buildAndRun(t, p, "true"); code != buildFailed || !strings.Contains(stderr, StepProtectChanged) {
		t.Errorf("a protected symlink that is gone: exit %d, %q; want the build to stop at %q", code, stderr, StepProtectChanged)
	}
}
