package main

import (
	"errors"
	"strconv"

	"github.com/nsbox/nsbox/pkg/sandbox"
	"golang.org/x/sys/unix"
)

// violationLines writes a {"event":"violation"} status line for each host
// unix socket connect, network destination and (the Landlock backend)
// file mode or time change the sandbox refused, as it happens.
func violationLines(status *statusWriter) sandbox.Option {
	return sandbox.WithViolations(func(v *sandbox.ViolationError) {
		if v.Operation == sandbox.OpFileMetadata {
			status.emit(map[string]any{"event": "violation", "kind": "file_metadata", "operation": v.Operation, "path": v.Path, "detail": v.Detail})
			return
		}
		if v.Host != "" {
			// The network filter: the name (or address) and port
			// refused, as the sandbox asked for them.
			status.emit(map[string]any{"event": "violation", "kind": "network", "operation": v.Operation, "host": v.Host, "port": v.Port, "detail": v.Detail})
			return
		}
		status.emit(map[string]any{"event": "violation", "kind": "unix_socket", "operation": v.Operation, "path": v.Path})
	})
}

// addSocketStatus puts what guards host unix sockets, and the sockets let
// through, in the "started" status line.
func addSocketStatus(started map[string]any, s any, p *sandbox.Policy) {
	g, ok := s.(interface{ UnixSocketGate() string })
	if !ok {
		return
	}
	us := map[string]any{"gate": g.UnixSocketGate()}
	if len(p.UnixSockets.Allow) > 0 {
		us["allow"] = p.UnixSockets.Allow
	}
	started["unix_sockets"] = us
}

func isSocketViolation(err error) bool {
	var v *sandbox.ViolationError
	return errors.As(err, &v) && (v.Operation == "unix connect" || v.Host != "")
}

// unixSocketStatus says what keeps sandboxes from host unix sockets here.
// Landlock's LANDLOCK_ACCESS_FS_RESOLVE_UNIX would do it in the kernel
// without a round trip; no kernel nsbox is tested on has it yet, so the
// seccomp user-notification gate is the mechanism, and the Landlock ABI
// is reported beside it.
type unixSocketStatus struct {
	Mechanism   string `json:"mechanism"`
	Error       string `json:"error,omitempty"`
	LandlockABI int    `json:"landlock_abi"`
}

func socketStatus() unixSocketStatus {
	mech, err := sandbox.SocketGateMechanism()
	st := unixSocketStatus{Mechanism: mech}
	if err != nil {
		st.Error = err.Error()
	}
	// landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)
	// returns the ABI version (0: no Landlock).
	if v, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, 1); e == 0 {
		st.LandlockABI = int(v)
	}
	return st
}

func (s unixSocketStatus) line() string {
	msg := "unix sockets: " + s.Mechanism
	if s.Error != "" {
		msg += " (" + s.Error + "): a sandbox can connect to every host socket it can see"
	} else {
		msg += ": connects to host sockets outside the writable places are refused"
	}
	if s.LandlockABI > 0 {
		msg += "; Landlock ABI " + strconv.Itoa(s.LandlockABI) + " has no LANDLOCK_ACCESS_FS_RESOLVE_UNIX"
	}
	return msg
}
