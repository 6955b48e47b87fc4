package policy

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

func envValue(env []string, k string) (string, bool) {
	for _, kv := range env {
		if v, ok := cutKey(kv, k); ok {
			return v, true
		}
	}
	return "", false
}

func cutKey(kv, k string) (string, bool) {
	if len(kv) > len(k) && kv[:len(k)] == k && kv[len(k)] == '=' {
		return kv[len(k)+1:], true
	}
	return "", false
}

// A workspace without .git gets a .git placeholder, which go build takes
// for a repository: its VCS stamp is turned off; with a real .git it is
// not.
func TestGoBuildVCSOffWithGitPlaceholder(t *testing.T) {
	h := testHost(t)
	res := mustLoad(t, h, Request{ConfigFile: "-"})
	if v, ok := envValue(res.Policy.Env, "GOFLAGS"); !ok || v != "-buildvcs=false" {
		t.Fatalf("GOFLAGS with a .git placeholder = %q (set %v), want -buildvcs=false; env %q", v, ok, res.Policy.Env)
	}
	// The caller's GOFLAGS is kept and extended.
	res = mustLoad(t, h, Request{ConfigFile: "-", Flags: flags(Config{Env: Env{Set: map[string]string{"GOFLAGS": "-mod=mod"}}})})
	if v, _ := envValue(res.Policy.Env, "GOFLAGS"); v != "-mod=mod -buildvcs=false" {
		t.Fatalf("GOFLAGS = %q, want the caller's flags and -buildvcs=false", v)
	}
	// The caller's own -buildvcs wins.
	res = mustLoad(t, h, Request{ConfigFile: "-", Flags: flags(Config{Env: Env{Set: map[string]string{"GOFLAGS": "-buildvcs=true"}}})})
	if v, _ := envValue(res.Policy.Env, "GOFLAGS"); v != "-buildvcs=true" {
		t.Fatalf("GOFLAGS = %q, want the caller's -buildvcs=true", v)
	}
	// Backend none runs on the host: no placeholder is made.
	res = mustLoad(t, h, Request{ConfigFile: "-", Flags: flags(Config{Backend: ptr(BackendNone)})})
	if v, ok := envValue(res.Policy.Env, "GOFLAGS"); ok {
		t.Fatalf("GOFLAGS = %q with backend none", v)
	}
	// A repository: no placeholder, no change.
	if err := os.Mkdir(filepath.Join(h.Cwd, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	res = mustLoad(t, h, Request{ConfigFile: "-"})
	if v, ok := envValue(res.Policy.Env, "GOFLAGS"); ok {
		t.Fatalf("GOFLAGS = %q set in a repository", v)
	}
}

func TestGoBuildVCSOff(t *testing.T) {
	for _, c := range []struct{ in, want []string }{
		{[]string{"PATH=/bin"}, []string{"PATH=/bin", "GOFLAGS=-buildvcs=false"}},
		{[]string{"GOFLAGS="}, []string{"GOFLAGS=-buildvcs=false"}},
		{[]string{"GOFLAGS=-trimpath ", "A=b"}, []string{"GOFLAGS=-trimpath -buildvcs=false", "A=b"}},
		{[]string{"GOFLAGS=-buildvcs"}, []string{"GOFLAGS=-buildvcs"}},
		{[]string{"GOFLAGS=--buildvcs=auto"}, []string{"GOFLAGS=--buildvcs=auto"}},
	} {
		in := slices.Clone(c.in)
		if got := goBuildVCSOff(in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("goBuildVCSOff(%q) = %q, want %q", c.in, got, c.want)
		}
		if !reflect.DeepEqual(in, c.in) {
			t.Errorf("goBuildVCSOff changed its input %q to %q", c.in, in)
		}
	}
}
