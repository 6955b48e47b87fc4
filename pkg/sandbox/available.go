package sandbox

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"

	"github.com/nsbox/nsbox/pkg/namespaces"
	"golang.org/x/sys/unix"
)

// probeArg0 marks a re-exec that only proves the namespaces can be created.
const probeArg0 = "nsbox-probe"

var (
	availOnce sync.Once
	availErr  error
)

// Available says whether a sandbox can be built here, and if not, why and
// which host knob decides it. It creates the sandbox's namespaces once in a
// short-lived child (the result is cached for the process).
func Available() error {
	availOnce.Do(func() { availErr = probe() })
	return availErr
}

func probe() error {
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil && strings.TrimSpace(string(b)) == "0" {
		return fmt.Errorf("%w: user namespaces are disabled: user.max_user_namespaces is 0 (sudo sysctl -w user.max_user_namespaces=15000)", ErrUnavailable)
	}
	// The same spawn as a sandbox's worker, which exits at once.
	err := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // the parent death signal's thread; ends with the goroutine
		proc, serr := namespaces.Spawn(namespaces.Options{},
			namespaces.SpawnArgs{Path: "/proc/self/exe", Argv: []string{probeArg0}})
		if serr == nil {
			serr = waitError(proc.Wait())
		}
		err <- serr
	}()
	if err := <-err; err != nil {
		if err.Error() == fmt.Sprintf("exit status %d", probeProcRefused) {
			return fmt.Errorf("%w: %w", ErrUnavailable, ErrProcRefused)
		}
		reason := describeStartError(err)
		if b, rerr := os.ReadFile("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); rerr == nil && strings.TrimSpace(string(b)) == "1" && os.Getuid() != 0 {
			return fmt.Errorf("%w: AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1): install contrib/apparmor/nsbox (make install) or run sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0 (%v)", ErrUnavailable, err)
		}
		if b, rerr := os.ReadFile("/proc/sys/kernel/unprivileged_userns_clone"); rerr == nil && strings.TrimSpace(string(b)) == "0" && os.Getuid() != 0 {
			return fmt.Errorf("%w: unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone=0): sudo sysctl -w kernel.unprivileged_userns_clone=1", ErrUnavailable)
		}
		return reason
	}
	return nil
}

// ErrProcRefused is why the namespace sandbox cannot start where its
// namespaces can be created but a fresh /proc cannot be mounted.
var ErrProcRefused = errors.New(procRefused)

const procRefused = "the kernel refuses a fresh /proc in a new user namespace: this /proc is partly masked (an outer container covers parts of it, as every Docker, containerd and Kubernetes default does); run the container with /proc unmasked: docker run --security-opt systempaths=unconfined, podman run --security-opt unmask=ALL, Kubernetes securityContext.procMount: Unmasked (with hostUsers: false)"

// probeProcRefused is the probe child's exit status when the proc mount is
// refused.
const probeProcRefused = 3

// probeChild runs in the probe's namespaces as PID 1: it mounts a fresh
// /proc, as every sandbox's root needs, in its own mount namespace, which
// dies with it (made private first, so that nothing propagates out). The
// kernel refuses the mount under a /proc with submounts
// (fs/namespace.c mount_too_revealing).
func probeChild() int {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return 4
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		if err == unix.EPERM || err == unix.EACCES {
			return probeProcRefused
		}
		return 4
	}
	return 0
}
