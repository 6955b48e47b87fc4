package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestReview71ScriptFileFromWorkdir
//
// Finding (LOW): `nsbox script FILE` read FILE with os.ReadFile: in a
// --workdir an earlier script rewrote, a FIFO there hung the next run, a
// sparse file of gigabytes was read whole, and a symlink to a host file
// (/etc/shadow for a root caller) handed its text to the sandbox as the
// script. Now a symlink and anything but a regular file are refused, and
// no more than the script size limit is read.
func TestReview71ScriptFileFromWorkdir(t *testing.T) {
	for _, u := range users() {
		u := u
		t.Run(u.name, func(t *testing.T) {
			requireSandbox(t, u)
			dir := u.tempDir(t)
			secret := filepath.Join(filepath.Dir(dir), "secret")
			u.writeFile(t, secret, "echo HOST-SECRET-71\n", 0o600)
			link := filepath.Join(dir, "link.sh")
			if err := os.Symlink(secret, link); err != nil {
				t.Fatal(err)
			}
			r := u.run(t, &runOpts{dir: dir}, "script", "--lang", "bash", link)
			if r.code == 0 || strings.Contains(r.stdout, "HOST-SECRET-71") || !strings.Contains(r.stderr, "symbolic link") {
				t.Errorf("script FILE through a symlink: exit %d, stdout %q, stderr %q; want it refused, naming the link", r.code, r.stdout, r.stderr)
			}
			fifo := filepath.Join(dir, "fifo.sh")
			if err := unix.Mkfifo(fifo, 0o666); err != nil {
				t.Fatal(err)
			}
			os.Chown(fifo, u.uid, u.gid)
			r = u.run(t, &runOpts{dir: dir, timeout: 30 * time.Second}, "script", "--lang", "bash", fifo)
			if r.code == 0 || !strings.Contains(r.stderr, "not a regular file") {
				t.Errorf("script FILE that is a FIFO: exit %d, stderr %q; want it refused as no regular file", r.code, r.stderr)
			}
		})
	}
}

// TestReview71TokenFileFIFO
//
// Finding (LOW): `nsbox mcp --http --token-file F` opened F without
// O_NONBLOCK: a FIFO put in its place by a sandbox (F in a workspace)
// held the server's start for good. Now it is refused at once.
func TestReview71TokenFileFIFO(t *testing.T) {
	for _, u := range users() {
		u := u
		t.Run(u.name, func(t *testing.T) {
			requireSandbox(t, u)
			dir := u.tempDir(t)
			fifo := filepath.Join(dir, "token")
			if err := unix.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			os.Chown(fifo, u.uid, u.gid)
			r := u.run(t, &runOpts{dir: dir, timeout: 30 * time.Second}, "mcp", "--http", "127.0.0.1:0", "--token-file", fifo)
			if r.code == 0 || !strings.Contains(r.stderr, "not a regular file") {
				t.Errorf("--token-file FIFO: exit %d, stderr %q; want it refused as no regular file", r.code, r.stderr)
			}
		})
	}
}

// TestReview71StatusFileThroughPlantedLink
//
// Finding (MEDIUM, the rest of #3): --json-status refused a symlink at the
// file itself, but not on the way to it: an earlier sandbox that turned
// the workspace's out/ into a symlink to another directory had nsbox, with
// the caller's rights, create and fill the status file there. Now a
// symlink that leads out of its directory and lies in a directory the
// sandbox writes is refused; one outside them (a data disk's link) and
// one that stays within its directory are followed, and the file is
// protected inside by its real path.
func TestReview71StatusFileThroughPlantedLink(t *testing.T) {
	for _, u := range users() {
		u := u
		t.Run(u.name, func(t *testing.T) {
			requireSandbox(t, u)
			base := u.tempDir(t)
			ws := filepath.Join(base, "ws")
			victim := filepath.Join(base, "victim")
			u.mkdirs(t, filepath.Join(ws, "build"), victim)
			if err := os.Symlink(victim, filepath.Join(ws, "out")); err != nil {
				t.Fatal(err)
			}
			r := u.run(t, &runOpts{dir: ws}, "run", "--json-status", "out/status.jsonl", "--", "/bin/true")
			if r.code == 0 || !strings.Contains(r.stderr, "symlink "+filepath.Join(ws, "out")) {
				t.Errorf("--json-status through a link planted in the workspace: exit %d, stderr %q; want it refused, naming the link", r.code, r.stderr)
			}
			if exists(filepath.Join(victim, "status.jsonl")) {
				t.Errorf("nsbox created %s through the planted link", filepath.Join(victim, "status.jsonl"))
			}
			// A link that stays in its directory is followed; the file
			// it leads to is read-only inside.
			if err := os.Symlink("build", filepath.Join(ws, "inner")); err != nil {
				t.Fatal(err)
			}
			r = u.run(t, &runOpts{dir: ws}, "run", "--json-status", "inner/status.jsonl", "--", "/bin/sh", "-c", "echo forged >> build/status.jsonl && echo WROTE")
			if r.code == 0 || strings.Contains(r.stdout, "WROTE") {
				t.Errorf("the status file reached through a link in the workspace was writable inside: %q", r.stdout)
			}
			b, _ := os.ReadFile(filepath.Join(ws, "build", "status.jsonl"))
			if !strings.Contains(string(b), `"exited"`) || strings.Contains(string(b), "forged") {
				t.Errorf("status lines through a link within the workspace: %q", b)
			}
			// A link outside the sandbox's writable directories (the
			// user's own: ~/code -> /mnt/data/code) is followed.
			other := filepath.Join(base, "other")
			u.mkdirs(t, other)
			if err := os.Symlink(other, filepath.Join(base, "outside")); err != nil {
				t.Fatal(err)
			}
			r = u.run(t, &runOpts{dir: ws}, "run", "--json-status", filepath.Join(base, "outside", "s.jsonl"), "--", "/bin/true")
			expectCode(t, r, 0)
			if !exists(filepath.Join(other, "s.jsonl")) {
				t.Errorf("--json-status through a link outside the workspace: no file at its target; stderr %q", r.stderr)
			}
		})
	}
}
