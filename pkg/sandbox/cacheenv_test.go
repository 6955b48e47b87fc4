package sandbox

import (
	"reflect"
	"testing"
)

func TestWithPrivateCache(t *testing.T) {
	base := []string{"PATH=/bin", "HOME=/home/u"}
	set := append(base[:2:2], "XDG_CACHE_HOME=/tmp/.cache")
	for _, c := range []struct {
		name string
		env  []string
		ms   []Mount
		tmp  string
		want []string
	}{
		{"default", base, nil, "/tmp", set},
		{"landlock TMPDIR", base, nil, "/tmp/nsbox-0/t1", append(base[:2:2], "XDG_CACHE_HOME=/tmp/nsbox-0/t1/.cache")},
		{"caller's choice", append(base[:2:2], "XDG_CACHE_HOME=/x"), nil, "/tmp", append(base[:2:2], "XDG_CACHE_HOME=/x")},
		{"workspace elsewhere", base, []Mount{{Kind: MountBind, Source: "/w", Dest: "/w"}}, "/tmp", set},
		{"read-only bind of the host's cache", base, []Mount{{Kind: MountBind, Source: "/home/u/.cache", Dest: "/home/u/.cache", ReadOnly: true}}, "/tmp", set},
		{"writable bind of the cache", base, []Mount{{Kind: MountBind, Source: "/c", Dest: "/home/u/.cache"}}, "/tmp", base},
		{"writable bind below the cache", base, []Mount{{Kind: MountBind, Source: "/c", Dest: "/home/u/.cache/go-build"}}, "/tmp", base},
		{"writable home", base, []Mount{{Kind: MountBind, Source: "/home/u", Dest: "/home/u"}}, "/tmp", base},
		{"tmpfs at the cache", base, []Mount{{Kind: MountTmpfs, Dest: "/home/u/.cache"}}, "/tmp", base},
		{"hidden cache", base, []Mount{{Kind: MountHide, Dest: "/home/u/.cache"}}, "/tmp", set},
		{"host /tmp bound", base, []Mount{{Kind: MountBind, Source: "/tmp", Dest: "/tmp", ReadOnly: true}}, "/tmp", base},
		{"a bind inside /tmp", base, []Mount{{Kind: MountBind, Source: "/srv/x", Dest: "/tmp/x"}}, "/tmp", set},
		{"no HOME", []string{"PATH=/bin"}, []Mount{{Kind: MountBind, Source: "/c", Dest: "/.cache"}}, "/tmp", []string{"PATH=/bin", "XDG_CACHE_HOME=/tmp/.cache"}},
	} {
		in := append([]string(nil), c.env...)
		if got := withPrivateCache(in, c.ms, c.tmp); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
		if !reflect.DeepEqual(in, c.env) {
			t.Errorf("%s: input changed to %q", c.name, in)
		}
	}
}

// Under the Landlock backend the TMPDIR is nsbox's own directory: a grant
// of the host's /tmp does not cover it, a writable $HOME/.cache still
// counts.
func TestWithPrivateCacheIn(t *testing.T) {
	base := []string{"PATH=/bin", "HOME=/home/u"}
	dir := "/tmp/nsbox-1000/nsbox-tmp-x"
	set := append(base[:2:2], "XDG_CACHE_HOME="+dir+"/.cache")
	if got := withPrivateCacheIn(base, []Mount{{Kind: MountBind, Source: "/tmp", Dest: "/tmp"}}, dir); !reflect.DeepEqual(got, set) {
		t.Errorf("with /tmp granted: %q, want %q", got, set)
	}
	if got := withPrivateCacheIn(base, []Mount{{Kind: MountBind, Source: "/home/u/.cache", Dest: "/home/u/.cache"}}, dir); !reflect.DeepEqual(got, base) {
		t.Errorf("with $HOME/.cache writable: %q, want it unset", got)
	}
}
