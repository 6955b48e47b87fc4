package policy

import (
	"errors"
	"testing"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

func TestCheckPath(t *testing.T) {
	res := &Result{Policy: sandbox.Policy{Mounts: []sandbox.Mount{
		{Kind: sandbox.MountBind, Source: "/home/u/proj", Dest: "/home/u/proj"},
		{Kind: sandbox.MountProtect, Dest: "/home/u/proj/.git", Dir: true},
		{Kind: sandbox.MountHide, Dest: "/home/u/proj/.env"},
		{Kind: sandbox.MountBind, Source: "/data", Dest: "/input", ReadOnly: true},
		{Kind: sandbox.MountTmpfs, Dest: "/scratch"},
		{Kind: sandbox.MountHide, Dest: "/home/u/.ssh", Dir: true},
	}}, Plan: []PlanEntry{{Mount: sandbox.Mount{Kind: sandbox.MountHide, Dest: "/home/u/proj/.env"}, Why: "hidden: reads as empty (profile base)"}}}
	for _, c := range []struct {
		path string
		want Access
		kind string
	}{
		{"/home/u/proj/main.go", AccessReadWrite, "bind"},
		{"/home/u/proj", AccessReadWrite, "bind"},
		{"/home/u/proj/.git/config", AccessReadOnly, "protect"},
		{"/home/u/proj/.env", AccessHidden, "hide"},
		{"/home/u/.ssh/id_ed25519", AccessHidden, "hide"},
		{"/home/u/proj2/x", AccessReadOnly, "root"}, // a prefix of the name is not a parent
		{"/input/a.csv", AccessReadOnly, "bind"},
		{"/scratch/x", AccessInvisible, "tmpfs"},
		{"/tmp/x", AccessInvisible, "tmpfs"},
		{"/proc/1/environ", AccessInvisible, "tmpfs"},
		{"/etc/passwd", AccessReadOnly, "root"},
	} {
		got, rule, err := res.CheckPath(c.path)
		if err != nil || got != c.want || rule.Kind != c.kind {
			t.Errorf("%s: %s by %+v (%v), want %s by a %s rule", c.path, got, rule, err, c.want, c.kind)
		}
	}
	if _, rule, _ := res.CheckPath("/home/u/proj/.env"); rule.Why != "hidden: reads as empty (profile base)" {
		t.Errorf("rule of .env: %q, want the plan's explanation", rule.Why)
	}
	if _, _, err := res.CheckPath("proj/x"); !errors.Is(err, ErrRelativePath) {
		t.Errorf("relative path: %v", err)
	}
	// With host_dirs, only those are seen.
	res.Policy.HostDirs = []string{"/usr", "/etc"}
	for p, want := range map[string]Access{"/usr/bin/env": AccessReadOnly, "/home/u/other": AccessInvisible, "/home/u/proj/a": AccessReadWrite} {
		if got, rule, _ := res.CheckPath(p); got != want {
			t.Errorf("host_dirs: %s is %s (%v), want %s", p, got, rule, want)
		}
	}
}
