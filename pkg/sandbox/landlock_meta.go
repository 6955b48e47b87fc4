package sandbox

import (
	"os"
	"sync"
	"time"

	"github.com/nsbox/nsbox/pkg/notify"
	"golang.org/x/sys/unix"
)

// The Landlock backend's metadata gate: Landlock has no right for a
// file's mode or times (landlock(7)), so its commands' filter
// (commandFilterLandlock) hands chmod(2), utimensat(2) and their kin to
// the supervisor, which makes them only on a file that is, or lies
// beneath, an inode the session's rules let commands write
// (landlock.Ruleset.Writable; notify.MetaGate). What the mount namespace
// backend allows, where a read-only bind refuses the same calls.

// metaGateSupported says whether this kernel can run the metadata gate
// (notify.MetaSupported: seccomp user notification; no pidfd_getfd, which
// a container runtime's default profile refuses), asked once.
var metaGateSupported = sync.OnceValue(notify.MetaSupported)

// hasCapSysPtrace says whether this process holds CAP_SYS_PTRACE in its
// effective set, which the kernel's ptrace access checks use.
func hasCapSysPtrace() bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if unix.Capget(&hdr, &data[0]) != nil {
		return false
	}
	return data[unix.CAP_SYS_PTRACE/32].Effective&(1<<(unix.CAP_SYS_PTRACE%32)) != 0
}

// OpFileMetadata is the Operation of a ViolationError for a refused
// change of a file's mode or times (the Landlock backend).
const OpFileMetadata = "file metadata"

// startMetaGate serves the listener the worker's handshake reply carried
// (its one fd) for the session's life.
func (s *Session) startMetaGate(sent bool, fds []int) error {
	if !sent || len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return &SetupError{Step: "metadata gate", Err: errNoListener}
	}
	listener := fds[0]
	ws := make([]notify.MetaInode, 0, len(s.ll.ruleset.Writable))
	for _, w := range s.ll.ruleset.Writable {
		ws = append(ws, notify.MetaInode{Dev: w.Dev, Ino: w.Ino})
	}
	var reported metaReports
	gate := notify.NewMetaGate(ws, func(op, p string) {
		if !reported.first(p) {
			return
		}
		if f := s.opts.violations; f != nil {
			f(&ViolationError{Operation: OpFileMetadata, Path: p, Detail: op + ": a file outside the sandbox's writable places"})
		}
		if s.hostCalls == nil {
			return
		}
		if a := s.hostCalls.audit; a.enabled() {
			a.write(map[string]any{"time": time.Now().UTC().Format(time.RFC3339Nano), "session": s.opts.id,
				"kind": "violation", "operation": OpFileMetadata, "call": op, "path": p})
		}
	})
	// A root supervisor makes each call with the calling process's own
	// ids and no capability (notify.asTarget): root's CAP_FOWNER would
	// change a file the command does not own. The Landlock backend
	// shares the host's PID namespace: never sticky ids.
	srv, err := notify.NewServer(listener, notify.Options{Meta: gate, AsTarget: os.Geteuid() == 0})
	if err != nil {
		unix.Close(listener)
		return &SetupError{Step: "metadata gate", Err: err}
	}
	s.sockets.meta = srv
	go srv.Serve()
	return nil
}

// metaReports keeps a session's reports of refused metadata calls to the
// first of each path, and to maxReportedPaths paths: a loop of refused
// calls is not a flood.
type metaReports struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (r *metaReports) first(p string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[string]bool{}
	}
	if r.seen[p] || len(r.seen) >= maxReportedPaths {
		return false
	}
	r.seen[p] = true
	return true
}
