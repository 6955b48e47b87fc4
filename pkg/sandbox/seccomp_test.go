package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// The filter compiled is the profile the policy was resolved (and
// trusted) with: a file rewritten after resolution is refused, not
// installed.
func TestCompileSeccompRefusesChangedFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sc.json")
	trusted := []byte(`{"defaultAction":"SCMP_ACT_ALLOW"}`)
	sum := sha256.Sum256(trusted)
	if err := os.WriteFile(p, trusted, 0o644); err != nil {
		t.Fatal(err)
	}
	pol := &Policy{Seccomp: p, SeccompSHA256: hex.EncodeToString(sum[:])}
	if _, err := compileSeccomp(pol); err != nil {
		t.Fatalf("the trusted bytes: %v", err)
	}
	if err := os.WriteFile(p, []byte(`{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := compileSeccomp(pol); !errors.Is(err, ErrSeccompChanged) {
		t.Fatalf("a rewritten file: %v", err)
	}
	pol.SeccompSHA256 = ""
	if _, err := compileSeccomp(pol); err != nil {
		t.Fatalf("no digest to compare (an embedder's policy): %v", err)
	}
}
