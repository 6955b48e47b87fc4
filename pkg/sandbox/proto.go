package sandbox

import "github.com/nsbox/nsbox/pkg/mounts"

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
	// Env and Workspace are what tools run with.
	Env       []string     `json:"env,omitempty"`
	Workspace string       `json:"workspace,omitempty"`
	Tools     ToolSettings `json:"tools"`
	// CgroupProcs is the number of cgroup.procs fds sent with the
	// handshake: each command writes "0" to each before exec.
	CgroupProcs int `json:"cgroupProcs,omitempty"`
	// HostCalls: commands get a hostCall socket (the policy allows host
	// APIs or tool registration).
	HostCalls bool `json:"hostCalls,omitempty"`
}

type rlimit struct {
	Resource int    `json:"resource"`
	Cur      uint64 `json:"cur"`
	Max      uint64 `json:"max"`
}

// handshakeReply is the worker's answer once setup is done.
type handshakeReply struct {
	Protocol int `json:"protocol"`
}

// executeMsg starts one command. Three stdio fds travel with it
// (SCM_RIGHTS), plus a hostCall socket when HostCall is set.
type executeMsg struct {
	Argv      []string `json:"argv"`
	Env       []string `json:"env"`
	Dir       string   `json:"dir"`
	TimeoutMs int64    `json:"timeoutMs,omitempty"`
	HostCall  bool     `json:"hostCall,omitempty"`
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

type cancelMsg struct {
	ID uint64 `json:"id"`
}

const hostCallFDEnv = "NSBOX_HOSTCALL_FD"
