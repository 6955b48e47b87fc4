package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A root secret that is a symlink is denied at its target (review 70: a
// keytab linked into a secrets mount stayed readable), a missing one is
// left out, a glob matches.
func TestRootSecretsFollowLinks(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "mount", "krb5.keytab")
	if err := os.MkdirAll(filepath.Dir(target), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(target, []byte("k"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "krb5.keytab")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "ssh_host_ed25519_key")
	if err := os.WriteFile(key, []byte("k"), 0o600); err != nil {
		t.Fatal(err)
	}
	saved := rootSecretPaths
	t.Cleanup(func() { rootSecretPaths = saved })
	rootSecretPaths = []string{link, filepath.Join(dir, "missing"), filepath.Join(dir, "ssh_host_*_key")}
	got := rootSecrets()
	want := []string{target, key}
	if !slices.Equal(got, want) {
		t.Errorf("rootSecrets: %q, want %q", got, want)
	}
}
