// Package integration holds black-box tests of the built nsbox binary. Each
// test runs once as root and once as an unprivileged user (uid 65534, as
// `setpriv --reuid=65534 --regid=65534 --clear-groups` would), and skips
// with a stated reason when a requirement is missing.
package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// user is one identity a test runs nsbox as.
type user struct {
	name     string
	uid, gid int
	// switchTo is set when the test process must drop to uid/gid to run
	// nsbox (it runs as root).
	switchTo bool
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// nsboxBin returns the binary under test: $NSBOX_BIN, or bin/nsbox at the
// repository root.
func nsboxBin(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binPath = os.Getenv("NSBOX_BIN")
		if binPath == "" {
			binPath, _ = filepath.Abs("../../bin/nsbox")
		}
		if _, err := os.Stat(binPath); err != nil {
			binErr = fmt.Errorf("nsbox binary not found at %s (run make build, or set NSBOX_BIN): %v", binPath, err)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// users returns the identities to test: root and nobody when the tests run
// as root, else the current user only.
func users() []user {
	if os.Getuid() == 0 {
		return []user{{name: "root", uid: 0, gid: 0}, {name: "rootless", uid: 65534, gid: 65534, switchTo: true}}
	}
	return []user{{name: "rootless", uid: os.Getuid(), gid: os.Getgid()}}
}

// eachUser runs fn as a subtest for each identity, skipping one whose
// sandbox cannot start here (with the reason nsbox gives).
func eachUser(t *testing.T, fn func(t *testing.T, u user)) {
	t.Helper()
	for _, u := range users() {
		u := u
		t.Run(u.name, func(t *testing.T) {
			requireSandbox(t, u)
			fn(t, u)
		})
	}
}

var (
	probeMu  sync.Mutex
	probeErr = map[string]error{}
)

// requireSandbox skips when nsbox cannot build a sandbox as u on this host,
// stating nsbox's own reason.
func requireSandbox(t *testing.T, u user) {
	t.Helper()
	probeMu.Lock()
	err, done := probeErr[u.name]
	if !done {
		r := u.run(t, nil, "run", "--", "/bin/true")
		if r.code != 0 {
			err = fmt.Errorf("nsbox cannot build a sandbox as %s here: %s", u.name, strings.TrimSpace(r.stderr))
		}
		probeErr[u.name] = err
	}
	probeMu.Unlock()
	if err != nil {
		t.Skip(err.Error())
	}
}

type result struct {
	stdout, stderr string
	code           int
}

type runOpts struct {
	stdin      io.Reader
	env        []string
	dir        string
	extraFiles []*os.File
	timeout    time.Duration
}

// run executes nsbox with args as u and returns its output and exit code.
func (u user) run(t *testing.T, o *runOpts, args ...string) result {
	t.Helper()
	return u.runAs(t, o, nsboxBin(t), args...)
}

// runAs runs any program as u: the identity, clean environment and bounds
// every nsbox run gets.
func (u user) runAs(t *testing.T, o *runOpts, name string, args ...string) result {
	t.Helper()
	if o == nil {
		o = &runOpts{}
	}
	timeout := o.timeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + u.home(), "LANG=C.UTF-8"}, o.env...)
	cmd.Dir = o.dir
	if cmd.Dir == "" {
		cmd.Dir = "/"
	}
	cmd.Stdin = o.stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.ExtraFiles = o.extraFiles
	if u.switchTo {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.uid), Gid: uint32(u.gid), Groups: []uint32{}}}
	}
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("running %s %v: %v", name, args, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("%s %v did not finish within %s; stderr: %s", name, args, timeout, stderr.String())
	}
	return result{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// asUser makes cmd run as u (a no-op for the user the tests run as).
func (u user) asUser(cmd *exec.Cmd) {
	if u.switchTo {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.uid), Gid: uint32(u.gid), Groups: []uint32{}}}
	}
}

func (u user) home() string {
	if u.uid == 0 {
		return "/root"
	}
	return "/nonexistent"
}

// tempDir returns a fresh directory owned by u (0700), removed after the
// test. It lives under /tmp, visible to both identities.
func (u user) tempDir(t *testing.T) string {
	t.Helper()
	base, err := os.MkdirTemp("", "nsbox-it-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "ws")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, u.uid, u.gid); err != nil && os.Getuid() == 0 {
		t.Fatal(err)
	}
	return dir
}

// writeFile writes a file owned by u.
func (u user) writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if os.Getuid() == 0 {
		os.Chown(path, u.uid, u.gid)
	}
}

// sh runs a shell script in a sandbox with extra nsbox flags before "--".
func (u user) sh(t *testing.T, o *runOpts, flags []string, script string) result {
	t.Helper()
	args := append([]string{"run"}, flags...)
	args = append(args, "--", "/bin/sh", "-c", script)
	return u.run(t, o, args...)
}

func expectCode(t *testing.T, r result, want int) {
	t.Helper()
	if r.code != want {
		t.Fatalf("exit code %d, want %d\nstdout: %s\nstderr: %s", r.code, want, r.stdout, r.stderr)
	}
}

// listenLoopback starts a TCP listener on the host's 127.0.0.1 that accepts
// and closes connections until the test ends.
func listenLoopback(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln.Addr().String()
}

// pidsOfMarker lists host pids whose command line contains marker.
func pidsOfMarker(marker string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.Contains(b, []byte(marker)) {
			out = append(out, e.Name())
		}
	}
	return out
}
