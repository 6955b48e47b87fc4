package mcpintegration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReview43HTTPRotatedSecretNestedItemReadableInside (LOW to MEDIUM:
// the review 41 finding, still open for a Secret whose key is projected
// to a nested path).
//
// What breaks: atomicVolume (cmd/nsbox/mcp.go) looks for the kubelet's
// ..data link only in the token file's own directory. A Secret volume
// with `items: [{key: token, path: auth/token}]` (or any projected path
// with a directory in it) is laid out by the kubelet's atomic writer as
// auth → ..data/auth, ..data → ..TIMESTAMP, the file at
// ..TIMESTAMP/auth/token: `--token-file VOL/auth/token` has no ..data
// beside it (auth resolves into the timestamped directory), so the volume
// is not hidden, only the real path of the file as read at start. After a
// rotation the kubelet writes a new timestamped directory and swaps
// ..data: VOL/auth/token reads the new token in every session, the one
// started before the rotation and the ones after it, exactly the leak
// review 41 fixed for a file at the volume's top.
//
// Attack: the operator rotates a leaked token; a prompt injection in any
// session runs `cat VOL/auth/token`. Fix: walk up from the path named (and
// from its real path) to the directory that holds ..data, or hide every
// directory on the way, or refuse a token file in an atomic-writer tree
// that is not hidden whole.
func TestReview43HTTPRotatedSecretNestedItemReadableInside(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		h := newHome(t, u)
		sec := review41Dir(t, u)
		const oldToken = "rv43-old-token-0123456789abcdef"
		const newToken = "rv43-NEW-token-after-rotation-fedcba9876543210"
		// The kubelet's atomic writer with a nested item path:
		// auth → ..data/auth, ..data → ..TS, ..TS/auth/token.
		review41Write(t, u, sec, "..2024_01_01_00_00_00.000000001/auth/token", oldToken, 0o400)
		review41Symlink(t, u, "..2024_01_01_00_00_00.000000001", filepath.Join(sec, "..data"))
		review41Symlink(t, u, "..data/auth", filepath.Join(sec, "auth"))
		tokenPath := filepath.Join(sec, "auth", "token")

		s := startHTTPServer(t, h, "--token-file", tokenPath, "--idle-timeout", "1h")
		before, err := connectHTTP(t, s.url, oldToken)
		if err != nil {
			t.Fatalf("with the token: %v", err)
		}
		defer before.Close()
		if out := review41Call(t, before, "cat "+tokenPath+" 2>&1; echo END"); strings.Contains(out, oldToken) {
			t.Fatalf("control: the token at start is readable inside:\n%s", out)
		}

		review41Write(t, u, sec, "..2024_02_02_00_00_00.000000002/auth/token", newToken, 0o400)
		review41Symlink(t, u, "..2024_02_02_00_00_00.000000002", filepath.Join(sec, "..data_tmp"))
		if err := os.Rename(filepath.Join(sec, "..data_tmp"), filepath.Join(sec, "..data")); err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(filepath.Join(sec, "..2024_01_01_00_00_00.000000001")); err != nil {
			t.Fatal(err)
		}

		if out := review41Call(t, before, "cat "+tokenPath+" 2>&1; echo END"); strings.Contains(out, newToken) {
			t.Errorf("a session started before the Secret's rotation reads the new bearer token at %s:\n%s", tokenPath, out)
		}
		after, err := connectHTTP(t, s.url, oldToken)
		if err != nil {
			t.Fatalf("a new session after the rotation: %v", err)
		}
		defer after.Close()
		if out := review41Call(t, after, "cat "+tokenPath+" 2>&1; echo END"); strings.Contains(out, newToken) {
			t.Errorf("a session started after the Secret's rotation reads the new bearer token at %s:\n%s", tokenPath, out)
		}
	})
}
