package mounts

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestValidate(t *testing.T) {
	bad := map[string]Plan{
		"mounts[0].dest":     {Mounts: []Mount{{Kind: Tmpfs, Dest: "relative"}}},
		"mounts[1].source":   {Mounts: []Mount{{Kind: Tmpfs, Dest: "/a"}, {Kind: Bind, Source: "", Dest: "/b"}}},
		"mounts[0].kind":     {Mounts: []Mount{{Kind: "overlay", Dest: "/a"}}},
		"cannot be replaced": {Mounts: []Mount{{Kind: Tmpfs, Dest: "/proc/"}}},
		"NUL":                {Mounts: []Mount{{Kind: Tmpfs, Dest: "/a\x00b"}}},
		"hostDirs[0]":        {HostDirs: []string{"usr"}},
	}
	for want, p := range bad {
		err := p.Validate()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v", want, err)
		}
	}
	ok := Plan{Mounts: []Mount{{Kind: Bind, Source: "/src", Dest: "/dst"}, {Kind: Hide, Dest: "/home/u/.ssh"}, {Kind: Tmpfs, Dest: "/tmp/x"}}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestErrorMessageNamesWhatFailed(t *testing.T) {
	e := &Error{Step: "mount", Source: "/home/u/p", Dest: "/home/u/p", Err: unix.ENOENT}
	if e.Error() != "mount /home/u/p on /home/u/p: no such file or directory" {
		t.Fatal(e.Error())
	}
	if !errors.Is(e, unix.ENOENT) {
		t.Fatal("the errno is not reachable with errors.Is")
	}
	if got := (&Error{Step: "pivot_root", Err: unix.EINVAL}).Error(); got != "pivot_root: invalid argument" {
		t.Fatal(got)
	}
}
