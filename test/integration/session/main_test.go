// Package session tests the embeddable Go API (pkg/sandbox) black-box: the
// test binary is itself the embedding program, so TestMain calls
// sandbox.Init first, exactly as an embedding main must. Each test runs as
// root and, re-executed under uid 65534, root-less.
package session

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

const innerEnv = "NSBOX_IT_INNER"

// copiedBinary is a world-readable copy of the test binary, for the
// root-less re-execution (go test builds into a root-only directory).
var copiedBinary string

func TestMain(m *testing.M) {
	// The sandbox worker is this test binary re-executed: it must take
	// over before the testing package does anything.
	sandbox.Init()
	if mode := os.Getenv("NSBOX_IT_SUPERVISOR"); mode != "" {
		os.Exit(supervisorMain(mode))
	}
	if os.Getenv("NSBOX_IT_POOL_OWNER") != "" {
		os.Exit(poolOwnerMain())
	}
	code := func() int {
		if os.Getuid() == 0 && os.Getenv(innerEnv) == "" {
			dir, err := os.MkdirTemp("", "nsbox-session-it-")
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			defer os.RemoveAll(dir)
			os.Chmod(dir, 0o755)
			copiedBinary = filepath.Join(dir, "session.test")
			if err := copyFile(os.Args[0], copiedBinary); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
		return m.Run()
	}()
	os.Exit(code)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// eachUser runs fn as root and as uid 65534 (by re-executing this test
// binary under that uid), or as the current user when not root.
func eachUser(t *testing.T, fn func(t *testing.T)) {
	t.Helper()
	if os.Getenv(innerEnv) != "" {
		t.Run("rootless", func(t *testing.T) { requireSandbox(t); fn(t) })
		return
	}
	if os.Getuid() != 0 {
		t.Run("rootless", func(t *testing.T) { requireSandbox(t); fn(t) })
		return
	}
	t.Run("root", func(t *testing.T) { requireSandbox(t); fn(t) })
	t.Run("rootless", func(t *testing.T) {
		top := strings.SplitN(t.Name(), "/", 2)[0]
		cmd := exec.Command(copiedBinary, "-test.run", "^"+top+"$/^rootless$", "-test.v", "-test.count=1")
		cmd.Env = []string{innerEnv + "=1", "NSBOX_IT_REPO=" + repoRoot(), "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/tmp", "LANG=C.UTF-8"}
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
		out, err := cmd.CombinedOutput()
		text := string(out)
		if err != nil {
			t.Fatalf("root-less run failed: %v\n%s", err, text)
		}
		if strings.Contains(text, "--- SKIP") {
			t.Skipf("root-less: %s", skipReason(text))
		}
		if !strings.Contains(text, "--- PASS") {
			t.Fatalf("root-less run did not pass:\n%s", text)
		}
	})
}

func skipReason(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, ".go:") && !strings.Contains(l, "---") {
			return strings.TrimSpace(l)
		}
	}
	return "skipped"
}

// requireSandbox skips with the reason when no sandbox can start here.
func requireSandbox(t *testing.T) {
	t.Helper()
	if err := sandbox.Available(); err != nil {
		t.Skipf("sandboxing unavailable here: %v", err)
	}
}

// repoRoot is the repository root (the inner root-less run gets it from
// the outer one, since it runs from /).
func repoRoot() string {
	if r := os.Getenv("NSBOX_IT_REPO"); r != "" {
		return r
	}
	wd, _ := os.Getwd()
	return filepath.Join(wd, "../../..")
}
