package session

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

// TestReviewMergeKeptDirReachedByMagicLink (callspeed2, dircheck.c's kept
// directory). Attack: a command runs in Dir D, which the helper approves
// and keeps open (O_PATH, dc_kept_fd = N in the worker). That command
// removes D and puts a symlink D -> /proc/self/fd/N in its place. The next
// command asked to run in D is a "hit" (same path string): the helper is
// not asked, the vfork child chdirs through the magic link into its own
// copy of the worker's fd N, which is the kept directory itself, so the
// dev/ino/mount comparison passes and the command runs in a directory that
// only a /proc magic link reaches (a removed directory here; likewise one
// a mount has covered since). A fresh check (openat2
// RESOLVE_NO_MAGICLINKS) refuses D: "too many levels of symbolic links".
// Expected safe behaviour: the start in D is refused as a fresh check
// refuses it, and nothing runs. N is found by trying each small number
// (each miss makes the worker forget the kept directory, so every try
// approves a fresh one).
func TestReviewMergeKeptDirReachedByMagicLink(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		s := start(t, sandbox.Policy{})
		ctx := context.Background()
		for n := 3; n < 48; n++ {
			d := fmt.Sprintf("/tmp/nsbox-rvkept-%d", n)
			sh(t, s, "mkdir -p "+d)
			swap := fmt.Sprintf("cd / && rmdir %s && ln -s /proc/self/fd/%d %s && echo swapped", d, n, d)
			res, err := s.Exec(ctx, sandbox.Command{Argv: []string{"/bin/sh", "-c", swap}, Dir: d})
			if err != nil || !strings.Contains(string(res.Stdout), "swapped") {
				t.Fatalf("approve and swap %s: %v %q %q", d, err, res.Stdout, res.Stderr)
			}
			res, err = s.Exec(ctx, sandbox.Command{Argv: []string{"/bin/sh", "-c", "echo ran; readlink /proc/self/cwd"}, Dir: d})
			if strings.Contains(string(res.Stdout), "ran") {
				t.Fatalf("a command started in %s, a symlink to /proc/self/fd/%d (the worker's kept directory), "+
					"which a fresh check refuses: it ran in %q (err %v)", d, n, strings.TrimSpace(string(res.Stdout)), err)
			}
			// Refused: as a fresh check refuses the magic link (ELOOP),
			// or, for the kept directory's own number, as it finds the
			// link's target gone once the worker dropped that
			// descriptor (ENOENT).
			if err == nil || !(strings.Contains(err.Error(), "too many levels of symbolic links") || strings.Contains(err.Error(), "no such file or directory")) {
				t.Fatalf("%s -> /proc/self/fd/%d: %v, want the magic link refused", d, n, err)
			}
		}
	})
}
