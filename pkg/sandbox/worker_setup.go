package sandbox

import (
	"fmt"
	"os"

	"github.com/nsbox/nsbox/pkg/mounts"
	"github.com/nsbox/nsbox/pkg/namespaces"
	"github.com/nsbox/nsbox/pkg/notify"
	"github.com/nsbox/nsbox/pkg/seccomp"
	"golang.org/x/sys/unix"
)

// The worker's setup steps (runSetup lists them in order; each is named
// there, with the ordering that security depends on).

// needsShim says whether commands start through the limit shim.
func (w *worker) needsShim() bool {
	return len(w.setup.ExecRlimits) > 0 || len(w.cgroupFDs) > 0
}

func (w *worker) openSelf() error {
	if w.setup.Plan.SelfDest == "" && !w.needsShim() {
		return nil
	}
	// /proc/self/exe names the file through the supervisor's mount
	// namespace, which cannot be cloned from here. Open the same path in
	// this (copied) namespace and check it is the very same file.
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return err
	}
	fd, err := unix.Open(exe, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	var a, b unix.Stat_t
	if err := unix.Fstat(fd, &a); err != nil {
		unix.Close(fd)
		return err
	}
	if err := unix.Stat("/proc/self/exe", &b); err != nil || a.Dev != b.Dev || a.Ino != b.Ino {
		unix.Close(fd)
		return fmt.Errorf("the nsbox binary at %s was replaced while starting", exe)
	}
	w.selfFD = fd
	return nil
}

// cloneShim makes the file the limit shim is executed from: this binary,
// reached through a detached read-only mount. Executed as /proc/self/exe,
// the host's file itself, on its own writable mount, would be the shim's
// /proc/PID/exe, and the shim runs as the sandbox's uid: another process
// inside could open that link and keep the fd, then write the binary once
// nothing executes it any more (CVE-2019-5736 class). Through this clone
// the link only ever yields EROFS. The worker keeps the O_PATH fd, which
// names a file, not a directory: no path starts from it.
func (w *worker) cloneShim() error {
	if !w.needsShim() {
		return nil
	}
	fd, err := mounts.ReadOnlyClone(w.selfFD)
	if err != nil {
		return err
	}
	w.shimFD = fd
	return nil
}

func (w *worker) loopback() error {
	if !w.setup.NewNet || w.loUp {
		return nil
	}
	return namespaces.LoopbackUp()
}

func (w *worker) closeFDs() error {
	if w.selfFD >= 0 {
		unix.Close(w.selfFD)
		w.selfFD = -1
	}
	// Everything above stdio is close-on-exec from here on; the channel
	// and the shim's read-only binary are the only fds the worker keeps
	// open for itself.
	return unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
}

func (w *worker) setRlimits() error {
	for _, r := range w.setup.Rlimits {
		if err := unix.Setrlimit(r.Resource, &unix.Rlimit{Cur: r.Cur, Max: r.Max}); err != nil {
			return fmt.Errorf("resource %d: %w", r.Resource, err)
		}
	}
	return nil
}

func setNoNewPrivs() error {
	return unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
}

func (w *worker) installCommandFilter() error {
	if !w.setup.CommandFilter && len(w.setup.CommandSeccomp) == 0 {
		return nil
	}
	if unix.Gettid() != w.forkTid {
		return errForkThread
	}
	var f *seccomp.Filter
	var err error
	if len(w.setup.CommandSeccomp) > 0 {
		// A profile of the user's that lets openat2 through.
		f, err = seccomp.FilterFromBytes(w.setup.CommandSeccomp)
	} else {
		f, err = seccomp.CommandFilter()
	}
	if err != nil {
		return err
	}
	return f.InstallThread()
}

func (w *worker) installNotify() error {
	if !w.setup.SocketGate {
		return nil
	}
	// With a filtered network, the sockets it installs from the host's
	// network namespace must not listen or be steered; in a network
	// namespace of the sandbox's own, no socket of the host's (the
	// hostCall socket) may describe the host's network (ProgramOptions).
	fd, err := notify.Install(notify.ProgramOptions{Filtered: w.setup.Resolver, OwnNetwork: w.setup.NewNet})
	if err != nil {
		return err
	}
	w.notifyFD = fd
	return nil
}

// installSetID installs nsbox's set-id filter on every thread before a
// profile of the user's (which may deny seccomp(2) itself): no set-id
// file is left for the host, whatever that profile allows.
func (w *worker) installSetID() error {
	if len(w.setup.SetIDSeccomp) == 0 {
		return nil
	}
	return installFilter(w.setup.SetIDSeccomp)
}

func (w *worker) installSeccomp() error {
	if len(w.setup.Seccomp) == 0 {
		return nil
	}
	return installFilter(w.setup.Seccomp)
}
