package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestIsProjectPolicyFile(t *testing.T) {
	for p, want := range map[string]bool{
		"/p/.nsbox/policy/ci.toml":       true,
		"/p/.nsbox/policy/sub/sc.json":   true,
		"/p/a/b/.nsbox/policy/x.toml":    true,
		"/p/.nsbox/ci.toml":              false,
		"/p/.nsbox/policy":               false,
		"/p/policy/.nsbox/x.toml":        false,
		"/home/u/.config/nsbox/ci.toml":  false,
		"/p/.nsbox/policy/../ci.toml":    false,
		"/p/x.nsbox/policy/ci.toml":      false,
		"/p/.nsbox/policyx/ci.toml":      false,
		"/p/.nsbox/policy/.nsbox/policy": true,
	} {
		if got := IsProjectPolicyFile(p); got != want {
			t.Errorf("IsProjectPolicyFile(%q) = %v, want %v", p, got, want)
		}
	}
}

// A project profile is read only as trusted: refused while new, accepted
// once trusted, refused again after any change, and the message says
// which and names the command.
func TestTrustProjectProfile(t *testing.T) {
	h := testHost(t)
	p := filepath.Join(h.Cwd, ".nsbox", "policy", "ci.toml")
	write(t, p, "extend = \"workspace\"\n")
	req := Request{ConfigFile: "-", Profile: "./.nsbox/policy/ci.toml"}
	_, err := Load(h, req)
	if !errors.Is(err, ErrUntrustedPolicyFile) || !strings.Contains(err.Error(), "nsbox trust "+p) || !strings.Contains(err.Error(), "is new") {
		t.Fatalf("untrusted profile: %v", err)
	}
	recs, err := Trust(h, []string{".nsbox/policy/ci.toml"})
	if err != nil || len(recs) != 1 || recs[0].Path != p {
		t.Fatalf("Trust: %+v %v", recs, err)
	}
	mustLoad(t, h, req)
	write(t, p, "extend = \"workspace\"\nnetwork = \"host\"\n")
	if _, err := Load(h, req); !errors.Is(err, ErrUntrustedPolicyFile) || !strings.Contains(err.Error(), "changed since") {
		t.Fatalf("changed profile: %v", err)
	}
	// A profile it extends is a project policy file too.
	write(t, p, "extend = \"./base.toml\"\n")
	write(t, filepath.Join(filepath.Dir(p), "base.toml"), "extend = \"workspace\"\n")
	trustAll(t, h, p)
	if _, err := Load(h, req); !errors.Is(err, ErrUntrustedPolicyFile) || !strings.Contains(err.Error(), "base.toml") {
		t.Fatalf("untrusted base: %v", err)
	}
	trustAll(t, h, filepath.Dir(p))
	mustLoad(t, h, req)
	// Forgotten: refused again.
	if recs, err := Untrust(h, []string{filepath.Join(h.Cwd, ".nsbox")}); err != nil || len(recs) != 2 {
		t.Fatalf("Untrust: %+v %v", recs, err)
	}
	if _, err := Load(h, req); !errors.Is(err, ErrUntrustedPolicyFile) {
		t.Fatalf("after Untrust: %v", err)
	}
}

// A seccomp file in .nsbox/policy/ needs trust too, and the policy
// carries the digest of the bytes trusted for the sandbox to compare.
func TestTrustSeccompFile(t *testing.T) {
	h := testHost(t)
	p := filepath.Join(h.Cwd, ".nsbox", "policy", "sc.json")
	write(t, p, `{"defaultAction":"SCMP_ACT_ERRNO"}`)
	sc := "./.nsbox/policy/sc.json"
	req := Request{ConfigFile: "-", Flags: &Layer{Kind: KindFlags, Name: "command line", Config: Config{Seccomp: &sc}}}
	if _, err := Load(h, req); !errors.Is(err, ErrUntrustedPolicyFile) || !strings.Contains(err.Error(), p) {
		t.Fatalf("untrusted seccomp file: %v", err)
	}
	recs, err := Trust(h, []string{p})
	if err != nil {
		t.Fatal(err)
	}
	res := mustLoad(t, h, req)
	if res.Policy.SeccompSHA256 != recs[0].SHA256 {
		t.Fatalf("SeccompSHA256 %q, trusted %q", res.Policy.SeccompSHA256, recs[0].SHA256)
	}
}

// A directory that is not a .nsbox/policy/ cannot be trusted whole, nor
// a missing file; a refused trust writes nothing.
func TestTrustRefusesOtherFiles(t *testing.T) {
	h := testHost(t)
	write(t, filepath.Join(h.Cwd, "p.toml"), "x = 1\n")
	for _, p := range []string{".", "missing/.nsbox/policy/x.toml"} {
		if _, err := Trust(h, []string{p}); err == nil {
			t.Errorf("Trust(%q) accepted", p)
		}
	}
	if _, err := Trust(h, []string{"."}); !errors.Is(err, ErrNotProjectPolicy) {
		t.Errorf("Trust(.): %v", err)
	}
	if _, err := os.Stat(h.TrustStorePath()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused trust wrote the store: %v", err)
	}
}

// Two nsbox trust at once lose no record.
func TestTrustConcurrentUpdates(t *testing.T) {
	h := testHost(t)
	var names []string
	for _, n := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		f := filepath.Join(h.Cwd, ".nsbox", "policy", n+".toml")
		write(t, f, n)
		names = append(names, f)
	}
	var wg sync.WaitGroup
	for _, f := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := Trust(h, []string{f}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	recs, err := TrustList(h)
	if err != nil || len(recs) != len(names) {
		t.Fatalf("TrustList: %d records (%v), want %d", len(recs), err, len(names))
	}
}

// A store nsbox cannot read is an error, never an empty store that the
// next save would write over.
func TestTrustStoreMalformed(t *testing.T) {
	h := testHost(t)
	write(t, filepath.Join(h.Cwd, ".nsbox", "policy", "a.toml"), "a")
	for _, bad := range []string{
		"not json",
		`{"version":2,"files":{}}`,
		`{"version":1,"files":{"/a":"zz"}}`,
		`{"version":1,"files":{"rel":"` + strings.Repeat("0", 64) + `"}}`,
		`{"version":1,"files":{},"extra":1}`,
		`{"version":1,"files":{}} {}`,
	} {
		write(t, h.TrustStorePath(), bad)
		if _, err := LoadTrustStore(h.TrustStorePath()); err == nil {
			t.Errorf("LoadTrustStore(%q) accepted", bad)
		}
		if _, err := Trust(h, []string{filepath.Join(h.Cwd, ".nsbox", "policy")}); err == nil {
			t.Errorf("Trust over %q accepted", bad)
		}
		if b, _ := os.ReadFile(h.TrustStorePath()); string(b) != bad {
			t.Errorf("the store %q was rewritten: %q", bad, b)
		}
	}
}

// A trust store in a writable directory of the run, other than the user
// database's config directory, is not read: an earlier run with another
// environment could have written its records.
func TestTrustStoreInWritableDirRefused(t *testing.T) {
	h := testHost(t)
	h.ConfigHome = filepath.Join(h.Cwd, "cfg")
	p := filepath.Join(h.Cwd, ".nsbox", "policy", "ci.toml")
	write(t, p, "extend = \"workspace\"\n")
	trustAll(t, h, p)
	_, err := Load(h, Request{ConfigFile: "-", Profile: "./.nsbox/policy/ci.toml"})
	if !errors.Is(err, ErrUntrustedPolicyFile) || !strings.Contains(err.Error(), "trust store") {
		t.Fatalf("store in the workspace: %v", err)
	}
}

func FuzzTrustStore(f *testing.F) {
	f.Add([]byte(`{"version":1,"files":{"/p/.nsbox/policy/a.toml":"` + strings.Repeat("ab", 32) + `"}}`))
	f.Add([]byte(`{"version":1,"files":{}}`))
	f.Add([]byte(`{}`))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(dir, "trusted.json")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := LoadTrustStore(p)
		if err != nil {
			return
		}
		for path, sum := range s.Files {
			if !filepath.IsAbs(path) || len(sum) != 64 {
				t.Fatalf("accepted record %q %q", path, sum)
			}
		}
	})
}

// A file named in .nsbox/policy/, or reached through a link there, needs
// trust even when it lies elsewhere (review 27); a link loop counts as
// needing it.
func TestNamesProjectPolicy(t *testing.T) {
	h := testHost(t)
	other := filepath.Join(h.Cwd, "other", "evil.toml")
	write(t, other, "x")
	pol := filepath.Join(h.Cwd, ".nsbox", "policy")
	if err := os.MkdirAll(pol, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../other/evil.toml", filepath.Join(pol, "ci.toml")); err != nil {
		t.Fatal(err)
	}
	// A link outside that leads through the policy directory's link.
	if err := os.Symlink(filepath.Join(pol, "ci.toml"), filepath.Join(h.Cwd, "outer.toml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("loop2", filepath.Join(h.Cwd, "loop1")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("loop1", filepath.Join(h.Cwd, "loop2")); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]bool{
		filepath.Join(pol, "ci.toml"):        true,
		filepath.Join(h.Cwd, "outer.toml"):   true,
		other:                                false,
		filepath.Join(h.Cwd, "loop1"):        true,
		filepath.Join(h.Cwd, "missing.toml"): false,
	} {
		if got := namesProjectPolicy(p); got != want {
			t.Errorf("namesProjectPolicy(%s) = %v, want %v", p, got, want)
		}
	}
}

// A project profile's chain is trusted whole: what it extends outside
// .nsbox/policy/ needs a record too (review 27's note).
func TestTrustChainExtendsOutside(t *testing.T) {
	h := testHost(t)
	p := filepath.Join(h.Cwd, ".nsbox", "policy", "ci.toml")
	write(t, p, "extend = \"../../../shared/base.toml\"\n")
	base := filepath.Join(h.Home, "shared", "base.toml")
	write(t, base, "extend = \"workspace\"\n")
	trustAll(t, h, p)
	req := Request{ConfigFile: "-", Profile: "./.nsbox/policy/ci.toml"}
	if _, err := Load(h, req); !errors.Is(err, ErrUntrustedPolicyFile) || !strings.Contains(err.Error(), base) {
		t.Fatalf("an untrusted base outside .nsbox/policy/: %v", err)
	}
	trustAll(t, h, base)
	mustLoad(t, h, req)
}

// A file trusted through a link is recorded at the real path of the file
// whose bytes were hashed, from one open.
func TestTrustRecordsOpenedFile(t *testing.T) {
	h := testHost(t)
	target := filepath.Join(h.Home, "shared", "base.toml")
	write(t, target, "extend = \"workspace\"\n")
	pol := filepath.Join(h.Cwd, ".nsbox", "policy")
	if err := os.MkdirAll(pol, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(pol, "ci.toml")); err != nil {
		t.Fatal(err)
	}
	recs, err := Trust(h, []string{".nsbox/policy/ci.toml"})
	if err != nil || len(recs) != 1 || recs[0].Path != target {
		t.Fatalf("Trust through a link: %+v %v", recs, err)
	}
	sum := sha256.Sum256([]byte("extend = \"workspace\"\n"))
	if recs[0].SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("recorded %s", recs[0].SHA256)
	}
}
