package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestResolvConfDest(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "etc"), 0o755)
	link := func(target string) {
		p := filepath.Join(root, "etc", "resolv.conf")
		os.Remove(p)
		if target == "" {
			os.WriteFile(p, []byte("nameserver 192.0.2.1\n"), 0o644)
			return
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ target, want string }{
		{"", "/etc/resolv.conf"},
		{"../run/systemd/resolve/stub-resolv.conf", "/run/systemd/resolve/stub-resolv.conf"},
		{"/run/resolvconf/resolv.conf", "/run/resolvconf/resolv.conf"},
		{"/tmp/x/resolv.conf", "/tmp/x/resolv.conf"},
	} {
		link(c.target)
		got, err := resolvConfDestAt(root, "/etc/resolv.conf")
		if err != nil || got != c.want {
			t.Errorf("-> %q: %q %v, want %q", c.target, got, err, c.want)
		}
	}
	// A link onto a host file (outside the private /run and /tmp) would
	// have the bind land on it: refused.
	for _, target := range []string{"/var/lib/resolv.conf", "../run/../var/resolv.conf", "../../../etc/hosts"} {
		link(target)
		if _, err := resolvConfDestAt(root, "/etc/resolv.conf"); !errors.Is(err, ErrNetFilterUnavailable) {
			t.Errorf("-> %q: %v", target, err)
		}
	}
}
