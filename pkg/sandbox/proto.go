package sandbox

import (
	"encoding/json"
	"strconv"

	"github.com/nsbox/nsbox/pkg/ipc"
	"github.com/nsbox/nsbox/pkg/mounts"
)

// Payloads of the supervisor–worker protocol (docs/protocol.md). Only plain
// data: these cross a socket into the sandbox's PID 1.

// setupMsg is the handshake payload from the supervisor: everything the
// worker needs, already resolved and validated.
type setupMsg struct {
	Protocol        int         `json:"protocol"`
	Plan            mounts.Plan `json:"plan"`
	Hostname        string      `json:"hostname"`
	NewNet          bool        `json:"newNet"`
	Rlimits         []rlimit    `json:"rlimits,omitempty"`
	ExecRlimits     []rlimit    `json:"execRlimits,omitempty"`
	Seccomp         []byte      `json:"seccomp,omitempty"`
	AllowPrivileged bool        `json:"allowPrivileged,omitempty"`
	// HostRootFiles: what the sandbox's root makes in a writable bind
	// belongs to host root (a root caller's idmapped binds, or its
	// single-id map). --allow-privileged then keeps no capability that
	// stores privilege in a file (keepCaps).
	HostRootFiles bool `json:"hostRootFiles,omitempty"`
	// Env and Workspace are what tools run with.
	Env       []string     `json:"env,omitempty"`
	Workspace string       `json:"workspace,omitempty"`
	Tools     ToolSettings `json:"tools"`
	// CgroupProcs is the number of cgroup join fds (cgroup.procs on v2,
	// tasks on v1) sent with the handshake: each command writes "0" to
	// each before exec.
	CgroupProcs int `json:"cgroupProcs,omitempty"`
	// HostCalls: commands get a hostCall socket (the policy allows host
	// APIs or tool registration).
	HostCalls bool `json:"hostCalls,omitempty"`
	// Resolver: bind the filtered network's resolver sockets in the
	// sandbox's network namespace and name them in the reply.
	Resolver bool `json:"resolver,omitempty"`
	// Landlock: the worker runs the Landlock backend's setup (it was
	// confined before its runtime started, see landlock_init.c).
	Landlock bool `json:"landlock,omitempty"`
	// SocketFilter is the Landlock backend's socket filter: "none"
	// refuses socket(2) for all families, "unix" AF_UNIX only.
	SocketFilter string `json:"socketFilter,omitempty"`
	// NoScopes skips the namespace sandbox's Landlock scopes step (for
	// benchmarks that measure it).
	NoScopes bool `json:"noScopes,omitempty"`
	// CommandFilter: commands also get seccomp.CommandFilter (openat2
	// ENOSYS), with the default profile.
	CommandFilter bool `json:"commandFilter,omitempty"`
	// SetIDSeccomp, with a profile of the user's, is nsbox's set-id
	// filter (seccomp.SetIDFilter), installed on every thread right
	// before the profile's; CommandSeccomp, when that profile lets
	// openat2 through, the openat2 guard commands get instead of
	// CommandFilter (seccomp.OpenAt2Guard). Compiled BPF (Filter.Bytes).
	SetIDSeccomp   []byte `json:"setIDSeccomp,omitempty"`
	CommandSeccomp []byte `json:"commandSeccomp,omitempty"`
	// Identity is who the worker becomes once its maps are written.
	Identity identityMsg `json:"identity"`
	// Premade lists the plan's mount indices for which an fd (an
	// idmapped bind) follows the cgroup join fds in the handshake.
	Premade []int `json:"premade,omitempty"`
	// SocketGate: install the socket notification filter (pkg/notify)
	// right before the main filter, and name its listener in the reply.
	SocketGate bool `json:"socketGate,omitempty"`
	// MetaGate: the Landlock backend's command filter hands chmod and
	// utimensat and their kin to the supervisor (notify.MetaGate), and
	// the reply names its listener.
	MetaGate bool `json:"metaGate,omitempty"`
	// MetaDumpable: the supervisor reads a command's calls with the
	// command's own rights (it has no CAP_SYS_PTRACE: root-less, or root
	// in a container's default capability set), so commands must stay
	// dumpable: prctl(PR_SET_DUMPABLE, 0) is refused.
	MetaDumpable bool `json:"metaDumpable,omitempty"`
}

// typePremade carries idmapped binds (fds only) to the worker ahead of
// the handshake, which lists what they are for (setupMsg.Premade); the
// worker takes at most maxPremade in all.
const (
	typePremade = "premadeMounts"
	maxPremade  = 256
)

type rlimit struct {
	Resource int    `json:"resource"`
	Cur      uint64 `json:"cur"`
	Max      uint64 `json:"max"`
}

// handshakeReply is the worker's answer once setup is done.
type handshakeReply struct {
	Protocol int `json:"protocol"`
	// WorkspaceError says why the tools' workspace cannot be opened
	// inside, once setup is done; empty when it can.
	WorkspaceError string `json:"workspaceError,omitempty"`
	// OuterProc: the worker bound the outer /proc (Plan.ProcFallback).
	OuterProc bool `json:"outerProc,omitempty"`
	// Resolver names the worker's numbers of the resolver's sockets,
	// which the supervisor takes with pidfd_getfd.
	Resolver resolverFDs `json:"resolver,omitempty"`
	// NotifyFD is the worker's number of the socket notification
	// listener, which the supervisor takes with pidfd_getfd (0: none).
	NotifyFD int `json:"notifyFD,omitempty"`
	// MetaListener: the reply carries the Landlock backend's metadata
	// gate listener as its one fd (SCM_RIGHTS). Not pidfd_getfd: that
	// worker has no user namespace of the supervisor's, and a root-less
	// supervisor may not take an fd of a process that is not dumpable.
	MetaListener bool `json:"metaListener,omitempty"`
	// NetnsCookie is the cookie (SO_NETNS_COOKIE) of the sandbox's own
	// network namespace, with one (setupMsg.NewNet): the socket gate
	// answers device ioctls on its sockets only (notify.Options).
	NetnsCookie uint64 `json:"netnsCookie,omitempty"`
}

// executeMsg starts one command. Three stdio fds travel with it
// (SCM_RIGHTS), plus a hostCall socket when HostCall is set.
type executeMsg struct {
	Argv      []string `json:"argv"`
	Env       []string `json:"env"`
	Dir       string   `json:"dir"`
	TimeoutMs int64    `json:"timeoutMs,omitempty"`
	HostCall  bool     `json:"hostCall,omitempty"`
	// Seq names the command for a cancel ({seq}): a number the
	// supervisor gives each execute, unique in the session. 0: none (only
	// a cancel naming the request id reaches it then).
	Seq int64 `json:"seq,omitempty"`
}

// executeReply reports how the command ended.
type executeReply struct {
	Pid      int    `json:"pid"`
	ExitCode int    `json:"exitCode"`
	Signal   int    `json:"signal,omitempty"`
	TimedOut bool   `json:"timedOut,omitempty"`
	Canceled bool   `json:"canceled,omitempty"`
	StartErr string `json:"startError,omitempty"` // "not_found", "not_executable", "bad_dir"
	Message  string `json:"message,omitempty"`
}

// The execute request and reply cross on every Exec: they are written and
// read without reflection. The text is what encoding/json gives for the same
// structs, and it is read as encoding/json reads it (proto_test.go compares
// both ways).

// encode returns the execute payload.
func (m *executeMsg) encode() json.RawMessage {
	b := make([]byte, 0, 256)
	b = append(b, `{"argv":`...)
	b = appendStrings(b, m.Argv)
	b = append(b, `,"env":`...)
	b = appendStrings(b, m.Env)
	b = append(b, `,"dir":`...)
	b = ipc.AppendString(b, m.Dir)
	if m.TimeoutMs != 0 {
		b = append(b, `,"timeoutMs":`...)
		b = strconv.AppendInt(b, m.TimeoutMs, 10)
	}
	if m.HostCall {
		b = append(b, `,"hostCall":true`...)
	}
	if m.Seq != 0 {
		b = append(b, `,"seq":`...)
		b = strconv.AppendInt(b, m.Seq, 10)
	}
	return append(b, '}')
}

func (m *executeMsg) decode(data []byte) error {
	return ipc.DecodeFields(data, []ipc.Field{
		{Name: "argv", Strings: &m.Argv},
		{Name: "env", Strings: &m.Env},
		{Name: "dir", String: &m.Dir},
		{Name: "timeoutMs", Int: &m.TimeoutMs},
		{Name: "hostCall", Bool: &m.HostCall},
		{Name: "seq", Int: &m.Seq},
	})
}

func appendStrings(b []byte, list []string) []byte {
	if list == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = ipc.AppendString(b, s)
	}
	return append(b, ']')
}

// encode returns the execute reply payload.
func (r *executeReply) encode() json.RawMessage {
	b := make([]byte, 0, 64)
	b = append(b, `{"pid":`...)
	b = strconv.AppendInt(b, int64(r.Pid), 10)
	b = append(b, `,"exitCode":`...)
	b = strconv.AppendInt(b, int64(r.ExitCode), 10)
	if r.Signal != 0 {
		b = append(b, `,"signal":`...)
		b = strconv.AppendInt(b, int64(r.Signal), 10)
	}
	if r.TimedOut {
		b = append(b, `,"timedOut":true`...)
	}
	if r.Canceled {
		b = append(b, `,"canceled":true`...)
	}
	if r.StartErr != "" {
		b = append(b, `,"startError":`...)
		b = ipc.AppendString(b, r.StartErr)
	}
	if r.Message != "" {
		b = append(b, `,"message":`...)
		b = ipc.AppendString(b, r.Message)
	}
	return append(b, '}')
}

func (r *executeReply) decode(data []byte) error {
	var pid, code, sig int64
	err := ipc.DecodeFields(data, []ipc.Field{
		{Name: "pid", Int: &pid},
		{Name: "exitCode", Int: &code},
		{Name: "signal", Int: &sig},
		{Name: "timedOut", Bool: &r.TimedOut},
		{Name: "canceled", Bool: &r.Canceled},
		{Name: "startError", String: &r.StartErr},
		{Name: "message", String: &r.Message},
	})
	r.Pid, r.ExitCode, r.Signal = int(pid), int(code), int(sig)
	return err
}

// cancelMsg asks the worker to stop one request: the execute sent with Seq,
// or the request (execute or callTool) whose envelope id is ID. A cancel
// that names nothing running (its command already ended) does nothing. One
// with neither set stops everything running; nsbox never sends that: it
// would hit work the sender did not mean to stop.
type cancelMsg struct {
	ID  uint64 `json:"id,omitempty"`
	Seq int64  `json:"seq,omitempty"`
}

const hostCallFDEnv = "NSBOX_HOSTCALL_FD"

// typeIdle is the notification a Pool sends the worker of a session that
// has waited unused in it for idleRelease (worker_idle.go). No payload.
const typeIdle = "idle"

// typeQuiesce is the request a Pool sends the worker of a session a call
// has used, before it is discarded: the worker kills every other process
// of the sandbox and replies once they are all reaped (worker_quiesce.go).
// No payload.
const typeQuiesce = "quiesce"
