package mcpintegration

import "testing"

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
	// The kubelet's atomic writer with a nested item path:
	// auth → ..data/auth, ..data → ..TS, ..TS/auth/token.
	checkSecretRotation(t, "auth/token", "rv43-old-token-0123456789abcdef", "rv43-NEW-token-after-rotation-fedcba9876543210")
}
