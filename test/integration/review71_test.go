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
